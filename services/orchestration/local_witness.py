"""``claimlog up --witness``: a witness of the registry's own transparency log, beside it in its data directory.

It runs the same ``claimlog witness`` server anyone would run (C2SP tlog-witness), keyed once in
``<data dir>/witness/``, and the integrator pushes every checkpoint to it, so the embedded default shows
the whole protocol: checkpoints served with a cosignature, an audit that requires it (``claimlog audit
--witness VKEY``). It assures nobody: whoever runs the registry holds the witness's key too, so it would
cosign a split view as readily as the log signs one. Real witnesses are run by others
(docs/transparency.md#witnesses).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from services.orchestration.supervisor import Child, service_argv
from services.runtime.cluster import free_ports
from services.runtime.settings import Settings
from services.tlog.keys import ensure_signer, key_path
from services.witness.keys import KEY_FILE, witness_key

WITNESS_DIR = "witness"


@dataclass(frozen=True)
class LocalWitness:
    """Where the local witness answers, its verifier key, and the child process that runs it."""

    url: str
    vkey: str
    child: Child

    def witnesses(self, configured: str) -> str:
        """``CLAIMLOG_TLOG_WITNESSES`` with this witness after the ones configured."""
        return ", ".join(part for part in (configured.strip(), f"{self.url} {self.vkey}") if part)


def local_witness(settings: Settings) -> LocalWitness:
    """The data directory's witness of its own log: its key made at the first start (a unique name), kept after."""
    log_key = ensure_signer(key_path(settings.data_dir, settings.stream), settings.stream, None)  # the integrator's own
    directory = settings.data_dir / WITNESS_DIR
    name = None if (directory / KEY_FILE).exists() else f"localhost/claimlog-witness-{uuid.uuid4().hex[:12]}"
    cosigner = witness_key(directory, name)
    (port,) = free_ports(1)
    argv = service_argv("witness", "--dir", str(directory.resolve()), "--log", log_key.vkey(), "--port", str(port))
    return LocalWitness(f"http://127.0.0.1:{port}", cosigner.vkey(), Child("witness", argv, dict(os.environ)))
