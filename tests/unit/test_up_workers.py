"""`claimlog up --workers N`: N projector worker processes under the supervisor, each named for life."""

from __future__ import annotations

from services.orchestration.up import _children, run_up
from services.runtime.settings import Settings


def test_up_runs_n_workers_each_under_a_name_that_outlives_its_restarts():
    settings = Settings(nats_url="nats://127.0.0.1:4222", worker_name="box")
    children = _children(settings, "127.0.0.1", 8000, workers=3)
    projectors = [child for child in children if child.argv[-1] == "projector"]
    assert [child.name for child in projectors] == ["projector-1", "projector-2", "projector-3"]
    assert [child.env["CLAIMLOG_WORKER_NAME"] for child in projectors] == ["box-w1", "box-w2", "box-w3"]
    assert [child.name for child in children if child not in projectors] == ["tlog", "api"]  # one integrator however many workers
    tlog = next(child for child in children if child.name == "tlog")
    assert tlog.argv[-2:] == ["tlog", "integrate"] and "CLAIMLOG_WORKER_NAME" not in tlog.env
    Settings(worker_name=projectors[0].env["CLAIMLOG_WORKER_NAME"])  # a name the setting accepts
    (alone,) = [child for child in _children(settings, "127.0.0.1", 8000) if child.argv[-1] == "projector"]
    assert alone.name == "projector" and alone.env["CLAIMLOG_WORKER_NAME"] == "box-w1"


def test_workers_on_an_unpartitioned_log_are_refused_with_why(capsys):
    assert run_up(Settings(partitions=0), sample=False, host="127.0.0.1", port=0, workers=2) == 2
    assert "--workers divides a partitioned log" in capsys.readouterr().out


def test_workers_on_sqlite_are_refused_with_why(capsys, tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'read-models.sqlite3'}")
    assert run_up(settings, sample=False, host="127.0.0.1", port=0, workers=2) == 2
    assert "one write lock for the whole file" in capsys.readouterr().out


def test_the_default_worker_name_is_the_hosts_and_the_processs():
    import os

    name = Settings().resolved_worker_name()
    assert name.endswith(f"-{os.getpid()}")
    Settings(worker_name=name)
