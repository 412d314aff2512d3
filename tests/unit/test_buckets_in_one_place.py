"""Every key-value bucket is opened and made in one place (``services/log/buckets.py``), with the names of
``services/log/names.py``: so each is made the same way (its copies, history, description, lifetime)
wherever it is first needed, and each kind is described once."""

from __future__ import annotations

import ast
from pathlib import Path

from services.log.buckets import KINDS
from services.log.names import ACTORS, KEYS, LEASES, RATES, SLUGS, TLOG
from services.registry_buckets import registry_buckets

ROOT = Path(__file__).resolve().parents[2]
OPENERS = {"key_value", "create_key_value", "KeyValueConfig"}
HOME = Path("services/log/buckets.py")


def opened_at(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
        if name in OPENERS:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_no_module_but_the_buckets_one_opens_or_makes_a_bucket():
    elsewhere = [where for path in sorted((ROOT / "services").rglob("*.py")) if path.relative_to(ROOT) != HOME for where in opened_at(path)]
    assert elsewhere == [], "open a bucket with services/log/buckets.py (find_bucket, open_bucket)"


def test_every_kind_of_bucket_is_described_once_and_reported_on():
    assert set(KINDS) == {ACTORS, KEYS, SLUGS, RATES, LEASES, TLOG}
    assert sorted(registry_buckets().values()) == sorted(kind.what for kind in KINDS.values())
