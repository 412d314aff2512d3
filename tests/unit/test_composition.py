"""One composition root per process: what a process serves with is built at its entry and handed down.

``Settings`` are read from the environment at a process's entry only: a ``claimlog`` command, in
``services/cli/setup.py`` (the API, the projector and the workers it starts get them from there).
Everything below takes them as an argument, so one process never runs on two readings of its environment.

The API's services live in one typed ``ApiState`` (``services/read_api/api_state.py``); routes take it as a
dependency, so no other module reads untyped attributes off ``app.state``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE_MODULE = Path("services/read_api/api_state.py")
SETTINGS_ROOTS = {Path("services/cli/setup.py")}


def sources() -> list[tuple[Path, ast.Module]]:
    return [(p.relative_to(ROOT), ast.parse(p.read_text(), filename=str(p))) for p in sorted((ROOT / "services").rglob("*.py"))]


def touches_app_state(tree: ast.Module) -> list[int]:
    """Lines reading or writing ``<something>.app.state`` or ``app.state``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "state":
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id == "app") or (isinstance(owner, ast.Attribute) and owner.attr == "app"):
                found.append(node.lineno)
    return found


def test_only_the_state_module_touches_app_state():
    offenders = {str(path): lines for path, tree in sources() if path != STATE_MODULE and (lines := touches_app_state(tree))}
    assert not offenders, f"app.state is read outside {STATE_MODULE} (take the typed ApiState dependency instead): {offenders}"


def test_the_scan_sees_app_state():
    assert touches_app_state(ast.parse("x = request.app.state.engine\napp.state.api = 1\n")) == [1, 2]
    assert touches_app_state(ast.parse("x = request.state\nstate = api_state(app)\n")) == []


def builds_settings(tree: ast.Module) -> list[int]:
    """Lines that call ``Settings(...)``."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ((isinstance(node.func, ast.Name) and node.func.id == "Settings") or (isinstance(node.func, ast.Attribute) and node.func.attr == "Settings"))
    ]


def test_settings_are_built_only_at_a_process_entry():
    offenders = {str(path): lines for path, tree in sources() if path not in SETTINGS_ROOTS and (lines := builds_settings(tree))}
    assert not offenders, f"Settings() is built outside the composition roots {sorted(map(str, SETTINGS_ROOTS))} (take them as an argument): {offenders}"
    assert all(builds_settings(tree) for path, tree in sources() if path in SETTINGS_ROOTS), "a composition root no longer builds settings: update SETTINGS_ROOTS"


def test_the_scan_sees_settings_built():
    assert builds_settings(ast.parse("s = Settings()\nt = settings.Settings(x=1)\nu = Settings\n")) == [1, 2]


def test_every_service_of_the_api_state_is_typed_as_what_it_is():
    import typing

    from services.read_api.api_state import ApiState

    hints = typing.get_type_hints(ApiState)  # every annotation resolves: no type named only in a string
    vague = {name: hint for name, hint in hints.items() if hint is object or object in typing.get_args(hint)}
    assert vague == {}, "type each field as what it holds; a module below both breaks an import circle"
