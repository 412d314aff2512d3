"""C2SP tlog-proof (``c2sp.org/tlog-proof@v1``): an entry's index and inclusion proof with the checkpoint."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tlog.checkpoint import Checkpoint, parse_checkpoint
from tlog.errors import TlogFormatError, VerificationError
from tlog.hashes import leaf_hash
from tlog.note import Verifier, b64, open_note, unb64, unb64_hash
from tlog.proofs import verify_inclusion

HEADER = "c2sp.org/tlog-proof@v1"


@dataclass(frozen=True)
class TlogProof:
    """An entry's index, its inclusion proof, the signed checkpoint (verbatim), and optional extra data."""

    index: int
    proof: tuple[bytes, ...]
    checkpoint: str
    extra: bytes | None = None

    def format(self) -> str:
        lines = [HEADER]
        if self.extra is not None:
            lines.append(f"extra {b64(self.extra)}")
        lines.append(f"index {self.index}")
        lines.extend(b64(h) for h in self.proof)
        return "\n".join(lines) + "\n\n" + self.checkpoint


def parse_proof(text: str) -> TlogProof:
    """A tlog-proof, or TlogFormatError naming the line that breaks it."""
    head, sep, checkpoint = text.partition("\n\n")
    if not sep:
        raise TlogFormatError("a tlog-proof needs a blank line before its checkpoint")
    lines = head.split("\n")
    if lines[0] != HEADER:
        raise TlogFormatError(f"a tlog-proof starts with {HEADER!r}, not {lines[0][:60]!r}")
    rest, extra = lines[1:], None
    if rest and rest[0].startswith("extra "):
        extra = unb64(rest[0][6:], what="the proof's extra line")
        rest = rest[1:]
    if not rest or not re.fullmatch(r"index (0|[1-9][0-9]*)", rest[0]):
        raise TlogFormatError("a tlog-proof's index line is 'index <decimal without leading zeroes>'")
    hashes = tuple(unb64_hash(line, what=f"proof hash {n}") for n, line in enumerate(rest[1:]))
    return TlogProof(int(rest[0][6:]), hashes, checkpoint, extra)


def verify_proof(
    text: str, entry: bytes, *, log: Sequence[Verifier], witnesses: Sequence[Verifier] = (), quorum: int = 0
) -> Checkpoint:
    """Check a tlog-proof of ``entry``: the log's signature, ``quorum`` witnesses' cosignatures, inclusion."""
    proof = parse_proof(text)
    note, _ = open_note(proof.checkpoint, log)
    checkpoint = parse_checkpoint(note.text)
    if quorum:
        known = {(w.name, w.key_id): w for w in witnesses}
        cosigned = {
            (s.name, s.key_id)
            for s in note.signatures
            if (s.name, s.key_id) in known and known[(s.name, s.key_id)].verify(note.text.encode(), s.signature)
        }
        if len(cosigned) < quorum:
            raise VerificationError(f"the checkpoint carries {len(cosigned)} valid cosignatures, {quorum} required")
    verify_inclusion(proof.index, checkpoint.size, leaf_hash(entry), proof.proof, checkpoint.root)
    return checkpoint
