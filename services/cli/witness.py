"""``claimlog witness``: a C2SP tlog-witness for claimlog's transparency log, or any other log."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

out = Console(stderr=True)


def register(app: typer.Typer) -> None:
    """Add ``witness`` to the ``claimlog`` command."""
    app.command("witness")(witness)


def witness(
    directory: Annotated[Path, typer.Option("--dir", help="The witness's own directory: its key and its state.")],
    log: Annotated[list[str], typer.Option("--log", help="A log to witness: its verifier key ([<origin>=]<vkey>); repeatable.")],
    name: Annotated[str | None, typer.Option(help="The witness's name (a schema-less URL), to make its key on first start.")] = None,
    host: Annotated[str, typer.Option(help="Host to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to bind.")] = 7380,
) -> None:
    """Cosign each log's checkpoints that extend the last one this witness cosigned (tlog-witness v1.0.0), with an
    Ed25519 and an ML-DSA-44 key (tlog-cosignature types 0x04 and 0x06); print both verifier keys."""
    import uvicorn

    from services.witness.keys import witness_keys, witnessed_logs
    from services.witness.server import create_witness_app
    from services.witness.state import WitnessState

    try:
        keys = witness_keys(directory, name)
        logs = witnessed_logs(log)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    for key, kind in ((keys.ed25519, "Ed25519"), (keys.mldsa44, "ML-DSA-44")):  # one line each: a vkey is one word
        out.print(f"witness {key.vkey()} ({kind}) of {', '.join(sorted(logs))}", highlight=False, soft_wrap=True)
    app = create_witness_app(keys.cosigners, logs, WitnessState(directory / "witness.sqlite3"))
    uvicorn.run(app, host=host, port=port, log_level="warning")
