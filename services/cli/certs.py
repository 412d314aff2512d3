"""``claimlog certs DIR HOST...``: an authority and a server certificate per NATS host, for a deployment's TLS."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from services.runtime.local_ca import CA_FILE, issue_certificates

console = Console()


def register(app: typer.Typer) -> None:
    """Add ``certs`` to the ``claimlog`` command."""
    app.command("certs")(certs)


def certs(
    directory: Annotated[Path, typer.Argument(file_okay=False, help="Where the files go (made owner-only; kept ones are reused).")],
    hosts: Annotated[list[str], typer.Argument(help="The NATS servers' host names, as clients and the other servers reach them.")],
) -> None:
    """Make (or renew) a certificate authority in DIR and a certificate of it for each NATS host (DIR/HOST.crt
    and DIR/HOST.key), for nats-server's `tls` blocks; clients trust DIR/ca.pem (CLAIMLOG_NATS_TLS_CA).
    An authority of one's own organisation serves as well: this is for deployments that have none."""
    made = issue_certificates(directory, hosts)
    (directory / CA_FILE).chmod(0o644)  # public: the services' containers read it as another user (deploy/Dockerfile)
    directory.chmod(0o755)  # the keys in it stay owner-only
    for host, certificate in made.items():
        console.print(f"{host}: {certificate.cert} {certificate.key}", highlight=False)
    console.print(f"authority: {directory / CA_FILE} (CLAIMLOG_NATS_TLS_CA); keep {directory / 'ca-key.pem'} private", highlight=False)
