"""The layers hold and no module imports itself round a circle.

The graph comes from the source, not from running it: every ``import`` and ``from ... import`` in
``tlog/``, ``events/``, ``projections/`` and ``services/`` (at the top of a module or inside a function, since a
lazy import is a circle all the same) becomes an edge to the module it names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("tlog", "events", "projections", "services")
# A layer may import the layers before it in LAYERS, never one after it; the transparency log's formats
# (``tlog/``) import nothing of the project at all, so a witness or an auditor needs them alone.
FORBIDDEN = {
    "tlog": ("events", "projections", "services"),
    "events": ("projections", "services", "tlog"),
    "projections": ("services",),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports: ``from x import y`` is ``x.y`` when that is a module, else ``x``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imported(name, path, set(found)) for name, path in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def test_the_graph_is_read_from_the_source():
    graph = import_graph()
    assert "services.cli" in graph and "services.cli.actors" in graph["services.cli"]
    assert "services.runtime.from_settings" in graph["services.cli.serve"]  # a lazy import inside a function counts too
    assert "services.orchestration.up" in graph["services.cli.serve"]


def test_the_transparency_formats_are_in_the_graph():
    assert "tlog.proofs" in import_graph()["tlog.tiles"] or "tlog.hashes" in import_graph()["tlog.tiles"]


def test_no_module_imports_itself_round_a_circle():
    assert cycles(import_graph()) == []


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_of_the_layers_above_it(layer: str):
    wrong = sorted(
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        if source.split(".")[0] == layer
        for target in targets
        if target.split(".")[0] in FORBIDDEN[layer]
    )
    assert wrong == []


def test_nothing_outside_the_cli_imports_it():
    wrong = sorted(
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        if not source.startswith("services.cli")
        for target in targets
        if target == "services.cli" or target.startswith("services.cli.")
    )
    assert wrong == []


def test_a_cli_module_imports_nothing_back_from_the_package():
    wrong = sorted(
        m for m, targets in import_graph().items()
        if m.startswith("services.cli.") and m != "services.cli.__main__" and "services.cli" in targets
    )
    assert wrong == []


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
