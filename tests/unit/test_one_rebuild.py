"""Read models are rebuilt in one package, ``services/rebuild/``: ``claimlog verify`` compares with its scratch
fold (``services/rebuild/scratch.py``) instead of folding the log with the projector's parts itself. (The
outsider's replay, ``services/auditor/replay.py``, folds the public entries of the transparency log with the
projector: it has no NATS log for the rebuild package to read.)"""

from __future__ import annotations

from tests.unit.test_import_graph import import_graph


def test_the_audit_folds_the_log_only_through_the_rebuild_package():
    folding = {
        f"{source} -> {target}"
        for source, targets in import_graph().items() if source == "services.audit" or source.startswith("services.audit.")
        for target in targets if target.startswith("services.projector")
    }
    assert folding == set(), "fold the log with services.rebuild (scratch.py), not with the projector's runner"
