"""``claimlog up``: start NATS (embedded by default, or a local cluster), migrate, supervise the projector and read API."""

from __future__ import annotations

import asyncio
import logging
import socket

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from sqlalchemy.engine import make_url

from services.identity.keys import FORGERY_WARNING
from services.ingest.cli import ingest_files
from services.ingest.pages import sample_pages
from services.log import LogConfigError
from services.log.servers import redact
from services.orchestration.local_witness import LocalWitness, local_witness
from services.orchestration.nats_children import nats_children
from services.orchestration.preflight import check_database, check_log
from services.orchestration.readiness import wait_ready
from services.orchestration.supervisor import Child, Supervisor, child_env, service_argv
from services.orchestration.trust import Trust, ensure_trust
from services.runtime.cluster import LocalCluster, cluster_nodes
from services.runtime.embedded import EmbeddedNats, EmbeddedNatsError, put_back, running_url
from services.runtime.from_settings import ensure_log, local_server, nats_replicas, nats_tls, tls_env
from services.runtime.nats_roles import USERS_FILE
from services.runtime.settings import Settings
from services.store.generations import Generations

log = logging.getLogger(__name__)
console = Console()


def run_up(
    settings: Settings, *, sample: bool, host: str, port: int, cluster: int | None = None, workers: int = 1, witness: bool = False,
) -> int:
    """Run claimlog until SIGINT or SIGTERM; returns the exit code. ``cluster``: run that many nats-servers;
    ``workers``: that many projector workers dividing the log's partitions; ``witness``: a witness of the
    transparency log in the data directory (``local_witness.py``)."""
    if workers > 1 and settings.partitions == 0:
        console.print("[red]--workers divides a partitioned log[/red]: with CLAIMLOG_PARTITIONS=0 the projector is one process")
        return 2
    if workers > 1 and settings.resolved_database_url().startswith("sqlite"):
        console.print(
            "[red]--workers needs PostgreSQL[/red]: SQLite has one write lock for the whole file, so workers would fold "
            "one at a time, each waiting on the others' commits; set CLAIMLOG_DATABASE_URL to a PostgreSQL database"
        )
        return 2
    if not _port_free(host, port):
        console.print(f"[red]{host}:{port} is already in use[/red]: stop what listens there, or pass --port")
        return 2
    check_database(settings)  # before NATS starts: every check that can refuse comes before any change
    try:
        local = _start_nats(settings, cluster)
    except EmbeddedNatsError as error:
        console.print(f"[red]{escape(str(error))}[/red]")
        return 2
    settings = settings.model_copy(update={"nats_replicas": nats_replicas(settings)})
    supervisor = None
    try:
        try:
            asyncio.run(check_log(settings))
        except LogConfigError:
            if local is not None:  # the refusal changes nothing: not even the servers' configuration files
                put_back(local.replaced_configs)
            raise
        generations = Generations(settings.resolved_database_url())
        generations.upgrade()
        generations.close()
        asyncio.run(ensure_log(settings))
        trust = asyncio.run(ensure_trust(settings))
        settings = settings.model_copy(update={"signing_key": trust.key_file})
        cosigner = local_witness(settings) if witness else None
        supervisor = Supervisor(_children(settings, host, port, workers, cosigner), running=nats_children(local))
        supervisor.start()
        base = f"http://{host}:{port}"
        if not wait_ready(base, supervisor, console) and not supervisor.stopping:
            return 1
        if sample and not supervisor.stopping:
            asyncio.run(ingest_files(as_role(settings, "writer"), sample_pages(), console))
        _announce(settings, base, local, sample=sample, trust=trust, witness=cosigner)
        supervisor.watch()
        return 0
    finally:
        if supervisor is not None:
            supervisor.stop()
        if local is not None:
            local.stop()
        console.print("claimlog stopped")


def _start_nats(settings: Settings, cluster: int | None) -> EmbeddedNats | LocalCluster | None:
    """Start the data directory's own NATS (one server, or a cluster) unless one runs or CLAIMLOG_NATS_URL names one."""
    if cluster and settings.nats_url:
        raise EmbeddedNatsError("--cluster runs NATS itself: unset CLAIMLOG_NATS_URL, or drop --cluster")
    kept = cluster_nodes(settings.data_dir)
    if cluster and kept not in (None, cluster):
        raise EmbeddedNatsError(f"{settings.data_dir.resolve()} holds a cluster of {kept} nodes: start it with --cluster {kept}")
    if cluster and (settings.data_dir / "jetstream").is_dir():
        raise EmbeddedNatsError(
            f"{settings.data_dir.resolve()} holds the log of a single embedded server: a cluster starts in another "
            "data directory (CLAIMLOG_DATA_DIR), and `claimlog export` / `claimlog import` carry the log over"
        )
    if settings.nats_url is not None or running_url(settings.data_dir, stream=settings.stream) is not None:
        return None
    local = local_server(settings, cluster=cluster)
    local.start()
    return local


def _children(settings: Settings, host: str, port: int, workers: int = 1, witness: LocalWitness | None = None) -> list[Child]:
    """The projector (``workers`` worker processes), the transparency log's integrator (and its local
    witness, first, when asked for) and the API, each with its own role's credentials and the replicas up
    settled on."""
    replicas = {"CLAIMLOG_NATS_REPLICAS": str(settings.nats_replicas)} | tls_env(settings)
    projector = child_env(role_url(settings, "projector")) | replicas
    base = settings.resolved_worker_name()  # this process's: its workers' names outlive their restarts
    projectors = [
        Child("projector" if workers == 1 else f"projector-{n}", service_argv("projector"), projector | {"CLAIMLOG_WORKER_NAME": f"{base}-w{n}"})
        for n in range(1, workers + 1)
    ]
    signing = {} if settings.signing_key is None else {"CLAIMLOG_SIGNING_KEY": str(settings.signing_key.resolve())}
    integrator = projector
    if witness is not None:
        integrator = projector | {"CLAIMLOG_TLOG_WITNESSES": witness.witnesses(settings.tlog_witnesses)}
    return [
        *([witness.child] if witness is not None else []),
        *projectors,
        Child("tlog", service_argv("tlog", "integrate"), integrator),  # the transparency log's integrator
        Child("api", service_argv("api", "--host", host, "--port", str(port)), child_env(role_url(settings, "writer")) | replicas | signing),
    ]


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def role_url(settings: Settings, role: str) -> str:
    """CLAIMLOG_NATS_URL as the operator gave it, else ``role``'s URL on the data directory's embedded server."""
    url = settings.nats_url or running_url(settings.data_dir, role, settings.stream)
    if url is None:
        raise EmbeddedNatsError(f"the embedded nats-server of {settings.data_dir} is not running")
    return url


def as_role(settings: Settings, role: str) -> Settings:
    """The settings, pointed at NATS with ``role``'s credentials (and the TLS it needs there)."""
    tls = nats_tls(settings)
    update = {"nats_url": role_url(settings, role)}
    if tls is not None:
        update |= {"nats_tls_ca": tls.ca, "nats_tls_cert": tls.cert, "nats_tls_key": tls.key}
    return settings.model_copy(update=update)


def _announce(
    settings: Settings, base: str, local: EmbeddedNats | LocalCluster | None, *, sample: bool, trust: Trust,
    witness: LocalWitness | None = None,
) -> None:
    where = "NATS"
    if isinstance(local, LocalCluster):
        where = f"local NATS cluster of {len(local.nodes)} nodes ({settings.nats_replicas} replicas)"
    elif local is not None:
        where = "embedded nats-server"
    users = "" if settings.nats_url else f"NATS users {(settings.data_dir / USERS_FILE).resolve()}\n"
    # The sample's claim exists only when the sample pages were loaded; the listing always does.
    claims = f"a claim    {base}/claims/CLM-0338" if sample else f"claims     {base}/claims  (none yet: --sample loads three)"
    if notes := _trust_notes(trust):
        console.print(notes, highlight=False, end="")
    console.print(
        Panel.fit(
            f"HTTP API   {base}  (docs: {base}/docs, events: {base}/asyncapi)\n"
            f"{claims}\n"
            f"to write   claimlog actors add NAME --kind person  (prints a bearer token)\n"
            f"log        {where} at {redact(role_url(settings, 'admin'))}\n"
            f"stream     {settings.stream}\n"
            f"{users}"
            f"signing    {_signing(trust)}\n"
            f"database   {make_url(settings.resolved_database_url()).render_as_string(hide_password=True)}\n"
            f"data dir   {settings.data_dir.resolve()}\n"
            f"{_witness_line(witness)}\n"
            "Ctrl-C stops everything.",
            title="claimlog is up",
        )
    )


def _trust_notes(trust: Trust) -> str:
    """What an operator must know about the registry's trust, printed just above the announcement: whoever
    reads the output (a person, a supervisor's log, a test) and finds the panel has these lines too."""
    notes = ""
    if trust.required_after is None:
        notes += f"[yellow]warning[/yellow]: {escape(FORGERY_WARNING)}\n"
    if trust.recorded is not None:
        notes += (f"key registry: recorded in the log its {trust.recorded} keys and its signing requirement, as its bucket held "
                  "them: it was made before the log kept its changes, which the log now holds from here on\n")
    return notes


def _witness_line(witness: LocalWitness | None) -> str:
    """The announcement's line on the local witness, which vouches for nothing beyond this machine."""
    if witness is None:
        return ""
    return (f"witness    {witness.url}  {witness.vkey}\n"
            "           (in this data directory: it shows the protocol, it assures nobody)\n")


def _signing(trust: Trust) -> str:
    """The announcement's line on signatures: which key the API signs with, and what the registry requires."""
    key = f"key {trust.key_file.resolve()}" if trust.key_file else "the API signs nothing (no CLAIMLOG_SIGNING_KEY)"
    if trust.required_after is None:
        return f"[yellow]not required: forgery possible[/yellow]; {key}"
    made = ", made at this first start" if trust.made else ""
    return f"required after sequence {trust.required_after}; {key}{made}"
