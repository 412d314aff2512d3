"""Tests stand on their own: the builders of events, workloads and fuzz runs live in tests/builders/, the
benchmarks import them from there, and no test imports a benchmark's module (but the tests of a bench's own
tools, ``test_bench_*.py``, which import the tool they test)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imports(path: Path) -> set[str]:
    """Every module ``path`` names in an import, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_of_the_tests_imports_bench():
    offenders = {
        str(path.relative_to(ROOT)): sorted(name for name in imports(path) if name == "bench" or name.startswith("bench."))
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if not path.name.startswith("test_bench_")
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_benches_take_their_workload_from_the_tests_builders():
    assert "tests.builders.workload" in imports(ROOT / "bench" / "common.py")
    assert not (ROOT / "bench" / "workload.py").exists()


def test_the_benches_and_the_builders_import_no_module_round_a_circle():
    paths = {module_name(path): path for folder in ("bench", "tests/builders") for path in sorted((ROOT / folder).rglob("*.py"))}
    edges = {name: {other for other in imports(path) if other in paths and other != name} for name, path in paths.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        assert name not in trail, "import circle: " + " -> ".join([*trail[trail.index(name):], name])
        if name not in done:
            for other in sorted(edges[name]):
                visit(other, [*trail, name])
            done.add(name)

    for name in sorted(paths):
        visit(name, [])
