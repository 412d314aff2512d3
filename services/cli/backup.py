"""``claimlog backup DIR`` and ``claimlog restore DIR``: the log and the registry's buckets (services/audit/backup.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from services.cli.audit_io import _bar, _progress, console, resume_hint
from services.cli.setup import command_settings
from services.runtime.from_settings import nats_replicas, open_log, run, signer_of, signing_key_file
from services.runtime.registry_key import registry_key_file
from services.runtime.settings import Settings


def register(app: typer.Typer) -> None:
    """Add ``backup`` and ``restore`` to the ``claimlog`` command."""
    app.command("backup")(backup)
    app.command("restore")(restore)


def backup(
    directory: Annotated[Path, typer.Argument(help="A new (or empty) directory to write the backup to.")],
    key: Annotated[list[Path] | None, typer.Option(help="A private key file to keep too (repeatable); CLAIMLOG_SIGNING_KEY always is.")] = None,
) -> None:
    """Back up what no replay can rebuild: the log, the token store and every other bucket of the registry, and key files."""
    raise typer.Exit(run(_backup(command_settings(), directory, key or [])))


async def _backup(settings: Settings, directory: Path, keys: list[Path]) -> int:
    from services.audit.backup import BackupRefused
    from services.audit.backup import backup as write_backup
    from services.tlog.keys import key_path

    log_key = key_path(settings.data_dir, settings.stream)  # the transparency log's key: a lost one ends the log
    keys = [*keys, *([log_key] if log_key.is_file() and log_key not in keys else [])]
    async with open_log(settings, client_name="claimlog-backup", role="admin", create=False) as claim_log:
        head = await claim_log.head()
        try:
            with _progress() as progress:
                made = await write_backup(
                    claim_log, directory, key_files=[*filter(None, [signing_key_file(settings)]), *keys], signer=signer_of(settings),
                    registry_key=registry_key_file(settings.data_dir, settings.stream), tlog_key=log_key,
                    log_progress=_bar(progress, "log", head), bucket_progress=_bar(progress, "buckets (bytes)", None)
                )
        except BackupRefused as error:
            console.print(f"[red]refused[/red]: {error}", highlight=False)
            return 1
    if made.signed_by is None:
        console.print("[yellow]unsigned[/yellow]: this process holds no current key of the registry (CLAIMLOG_SIGNING_KEY), so the "
                      "manifest is not signed and a restore cannot tell its buckets from swapped ones", highlight=False)
    console.print(f"backed up {made.events} events (through sequence {made.head}) and the buckets "
                  f"{', '.join(made.buckets) or '(none)'}{_keys(made.keys)} to {directory}", highlight=False)
    return 0


def restore(
    directory: Annotated[Path, typer.Argument(help="A directory written by `claimlog backup`.", exists=True, file_okay=False)],
    key_to: Annotated[list[Path] | None, typer.Option(
        "--key-to", help="A path outside the data directory a backed-up key may be written back to (repeatable).")] = None,
) -> None:
    """Restore a backup into a registry that holds nothing yet, or continue one that stopped; checks it all first and writes nothing if it is bad."""
    raise typer.Exit(run(_restore(command_settings(), directory, key_to or [])))


async def _restore(settings: Settings, directory: Path, key_to: list[Path]) -> int:
    from services.audit.backup import BackupRefused, read_manifest
    from services.audit.backup import restore as restore_backup
    from services.audit.export import ExportFileError, ImportRefused
    from services.log import LogError
    from services.tlog.keys import key_path

    try:
        events = read_manifest(directory)["events"]
    except BackupRefused as error:
        console.print(f"[red]refused[/red]: {error}; nothing was restored", highlight=False)
        return 1
    async with open_log(settings, client_name="claimlog-restore", role="admin") as claim_log:
        try:
            with _progress() as progress:
                restored = await restore_backup(
                    claim_log, directory, replicas=nats_replicas(settings), data_dir=settings.data_dir, key_to=key_to,
                    registry_key=registry_key_file(settings.data_dir, settings.stream),
                    tlog_key=key_path(settings.data_dir, settings.stream),
                    log_progress=_bar(progress, "log", events), bucket_progress=_bar(progress, "buckets (bytes)", None),
                )
        except (BackupRefused, ExportFileError, ImportRefused) as error:
            console.print(f"[red]refused[/red]: {error}; nothing was restored", highlight=False)
            return 1
        except LogError as error:
            console.print(f"[red]restore failed[/red]: {error} (the stream now ends at {await claim_log.head()})", highlight=False)
            console.print(resume_hint("restore", directory), highlight=False, markup=False, soft_wrap=True)
            return 1
    if restored.signed_by is None:
        console.print("[yellow]unsigned[/yellow]: the backup's manifest is not signed: its files match its digests, but "
                      "nothing proves the manifest itself", highlight=False)
    if restored.kept_key:
        console.print(f"kept this registry's own delegate key {restored.kept_key}, which its running API signs with: "
                      "it is added to the restored key registry beside the backup's keys", highlight=False)
    held = f" ({restored.held} were already there, from a restore that stopped)" if restored.held else ""
    console.print(f"restored {restored.events} events{held} and the buckets {', '.join(restored.buckets) or '(none)'}"
                  f"{_keys(restored.keys)} from {directory}; the owners of {restored.slugs} slugs rebuilt from the log",
                  highlight=False)
    return 0


def _keys(paths: tuple[str, ...]) -> str:
    return f", and the keys {', '.join(paths)}" if paths else ""
