"""The packages of ``services/`` read one way: no package imports itself round a circle.

``test_import_graph.py`` finds circles of modules; two packages can still need each other through
modules that never form one (``a.x`` imports ``b.y``, ``b.z`` imports ``a.w``). Here each package of
``services/`` (a folder, or a top-level module such as ``services/client.py``) is one node, and an
import between two of them, lazy ones inside functions included, is an edge.
"""

from __future__ import annotations

from collections import defaultdict

from tests.unit.test_import_graph import cycles, import_graph


def package_of(module: str) -> str | None:
    """``services.log.writer`` -> ``services.log``; ``services.client`` -> itself; ``services`` -> None."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "services" and len(parts) > 1 else None


def package_imports() -> dict[tuple[str, str], list[str]]:
    """Each edge between two packages, with the module imports that make it."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for source, targets in import_graph().items():
        for target in targets:
            ends = package_of(source), package_of(target)
            if None not in ends and ends[0] != ends[1]:
                edges[ends].append(f"{source} -> {target}")
    return {edge: sorted(found) for edge, found in edges.items()}


def package_graph(edges: dict[tuple[str, str], list[str]]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
        graph[target]
    return dict(graph)


def circles_described(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """Each circle of packages, with the imports between its members."""
    found = []
    for group in cycles(package_graph(edges)):
        members = set(group)
        ties = [
            f"  {imp}"
            for (source, target), imports in sorted(edges.items())
            if source in members and target in members
            for imp in imports
        ]
        found.append("circle of " + ", ".join(group) + ":\n" + "\n".join(ties))
    return found


def test_every_package_is_a_node():
    graph = package_graph(package_imports())
    assert {"services.log", "services.cli", "services.identity", "services.client"} <= set(graph)
    assert "services.log" in graph["services.cli"]


def test_no_package_of_services_imports_itself_round_a_circle():
    circles = circles_described(package_imports())
    assert not circles, "\n".join(circles)


def test_a_circle_of_packages_is_found_through_modules_that_form_none():
    edges = {
        ("services.a", "services.b"): ["services.a.x -> services.b.y"],
        ("services.b", "services.a"): ["services.b.z -> services.a.w"],
    }
    assert circles_described(edges) == [
        "circle of services.a, services.b:\n  services.a.x -> services.b.y\n  services.b.z -> services.a.w"
    ]


def test_the_witness_and_the_auditor_know_only_the_formats():
    """What a witness vouches for, and what an auditor finds, follow from ``tlog/`` (and, for the auditor, the
    entry format of ``events/``): neither imports a package of ``services/`` that reads NATS or a database.
    The auditor's replay alone folds the entries, with the projector's own code into its own SQLite: it
    imports the fold and the read models' queries, never the modules that connect to a registry or read its settings."""
    wrong = sorted(
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        if source.startswith(("services.witness", "services.auditor")) and source != REPLAY
        for target in targets
        if target.startswith("services.") and package_of(target) != package_of(source)
    )
    assert wrong == []
    modules = import_graph()
    assert "tlog.proofs" in modules["services.witness.rules"] and "tlog.builder" in modules["services.auditor.audit"]
    direct = modules[REPLAY]
    assert not direct & {"services.log.servers", "services.log.claim_log", "services.runtime.settings", "services.runtime.from_settings"}
    assert "services.projector.projector" in reachable(modules, REPLAY) and "services.admission.verdicts" in reachable(modules, REPLAY)


REPLAY = "services.auditor.replay"


def reachable(modules: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for target in modules.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen
