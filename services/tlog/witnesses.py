"""The registry's witnesses: each new checkpoint pushed to them (C2SP tlog-witness v1.0.0), their
cosignatures kept beside the checkpoint, and a fresh tree refused when a witness holds the log already.

``CLAIMLOG_TLOG_WITNESSES`` names them: ``<url> <vkey>`` pairs separated by commas, the vkey a witness's
cosigning key, Ed25519 (type 0x04) or ML-DSA-44 (type 0x06): only the cosignature of that key is kept.
The push is best effort and never holds integration up: a witness that is down is asked again with the
next checkpoint.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx

from services.log.tlog_store import TlogStore
from services.tlog.tree import consistency
from tlog.checkpoint import Checkpoint
from tlog.cosignature import CosignatureVerifier, MLDSA44CosignatureVerifier
from tlog.errors import TlogFormatError
from tlog.note import Signature
from tlog.vkeys import parse_vkey
from tlog.witness_protocol import SIZE_TYPE, AddCheckpoint, parse_signatures, parse_size

log = logging.getLogger(__name__)
TIMEOUT = 5.0


@dataclass
class Witness:
    """A witness: where it listens, its key, and the size it is believed to hold for this log."""

    url: str
    verifier: CosignatureVerifier | MLDSA44CosignatureVerifier
    size: int = 0


def parse_witnesses(text: str) -> list[Witness]:
    """``<url> <vkey>[, <url> <vkey>...]``, or ValueError naming the pair that is wrong."""
    found = []
    for n, pair in enumerate(p.strip() for p in text.split(",") if p.strip()):
        parts = pair.split()
        if len(parts) != 2 or not parts[0].startswith(("http://", "https://")):
            raise ValueError(f"CLAIMLOG_TLOG_WITNESSES pair {n + 1} {pair!r}: want '<http(s) url> <vkey>'")
        try:
            verifier = parse_vkey(parts[1])
        except TlogFormatError as error:
            raise ValueError(f"CLAIMLOG_TLOG_WITNESSES pair {n + 1}: {error}") from None
        if not isinstance(verifier, CosignatureVerifier | MLDSA44CosignatureVerifier):
            raise ValueError(f"CLAIMLOG_TLOG_WITNESSES pair {n + 1}: {parts[1]} is not a witness's cosignature key "
                             "(Ed25519, type 0x04, or ML-DSA-44, type 0x06)")
        found.append(Witness(parts[0].rstrip("/"), verifier))
    return found


class Witnesses:
    """Pushes checkpoints to the witnesses and keeps what they cosigned."""

    def __init__(self, witnesses: list[Witness], store: TlogStore, *, http: httpx.AsyncClient | None = None) -> None:
        self.witnesses, self.store = witnesses, store
        self._http = http or httpx.AsyncClient(timeout=TIMEOUT)

    async def close(self) -> None:
        await self._http.aclose()

    async def held_sizes(self, note: str) -> dict[str, int]:
        """The size each witness holds of this origin, asked to cosign ``note`` (a fresh tree's size-0 checkpoint,
        or the stored one) from size 0: a witness holding a tree answers 409 with its size; one down is left out."""
        held = {}
        for witness in self.witnesses:
            answer = await self._post(witness, AddCheckpoint(0, (), note))
            if answer is not None and answer.status_code == 409:
                held[witness.url] = parse_size(answer.text)
        return held

    async def push(self, note: str, checkpoint: Checkpoint) -> list[Signature]:
        """Ask every witness to cosign ``note``; keep the note with the cosignatures that verify."""
        cosigned: list[Signature] = []
        for witness in self.witnesses:
            for _ in range(2):  # a 409 tells the size the witness holds: ask again from there
                proof = await consistency(self.store, witness.size, checkpoint.size) if witness.size else []
                answer = await self._post(witness, AddCheckpoint(witness.size, tuple(proof), note))
                if answer is None:
                    break
                if answer.status_code == 409 and answer.headers.get("content-type", "").startswith(SIZE_TYPE):
                    witness.size = parse_size(answer.text)
                    continue
                if answer.status_code == 200:
                    cosigned += self._verified(witness, answer.text, checkpoint)
                    witness.size = checkpoint.size
                else:
                    log.warning("witness %s refused size %d: %s %s", witness.url, checkpoint.size, answer.status_code, answer.text.strip())
                break
        if cosigned:
            await self.store.set_cosigned(note + "".join(s.line() for s in cosigned))
        return cosigned

    def _verified(self, witness: Witness, body: str, checkpoint: Checkpoint) -> list[Signature]:
        good = []
        for signature in parse_signatures(body):
            ours = (signature.name, signature.key_id) == (witness.verifier.name, witness.verifier.key_id)
            if ours and witness.verifier.verify(checkpoint.text().encode(), signature.signature):
                good.append(signature)
        if not good:
            log.warning("witness %s answered no cosignature of its key", witness.url)
        return good

    async def _post(self, witness: Witness, request: AddCheckpoint) -> httpx.Response | None:
        try:
            return await self._http.post(f"{witness.url}/add-checkpoint", content=request.format().encode())
        except httpx.HTTPError as error:
            log.warning("witness %s cannot be reached: %s", witness.url, error)
            return None
