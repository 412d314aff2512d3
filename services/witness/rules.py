"""``add-checkpoint`` decided: the answer to a request, given the log's keys and what the witness holds. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tlog.checkpoint import Checkpoint, parse_checkpoint
from tlog.errors import TlogFormatError, VerificationError
from tlog.hashes import EMPTY_ROOT
from tlog.note import Verifier, open_note, parse_note
from tlog.proofs import verify_consistency
from tlog.witness_protocol import AddCheckpoint, parse_add_checkpoint


class Refusal(Exception):
    """A request answered with ``status`` and a sentence (409's body is the held size, as the spec says)."""

    def __init__(self, status: int, message: str, *, evidence: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.evidence = status, message, evidence


@dataclass(frozen=True)
class Submitted:
    """A parsed request: the request, its checkpoint and the note's text (without signatures)."""

    request: AddCheckpoint
    checkpoint: Checkpoint


def parse(body: bytes) -> Submitted:
    """The request, or a 400 saying what is malformed."""
    try:
        request = parse_add_checkpoint(body)
        return Submitted(request, parse_checkpoint(parse_note(request.checkpoint).text))
    except TlogFormatError as error:
        raise Refusal(400, str(error)) from None


def check(submitted: Submitted, keys: Sequence[Verifier] | None, held: Checkpoint | None) -> Checkpoint:
    """The checkpoint to cosign, or a ``Refusal`` with the status tlog-witness v1.0.0 gives its reason."""
    request, new = submitted.request, submitted.checkpoint
    if keys is None:
        raise Refusal(404, f"this witness knows no log of origin {new.origin!r}")
    try:
        open_note(request.checkpoint, keys)
    except VerificationError as error:
        raise Refusal(403, str(error)) from None
    if request.old_size > new.size:
        raise Refusal(400, f"old size {request.old_size} is larger than the checkpoint's {new.size}")
    held_size = held.size if held is not None else 0
    if request.old_size != held_size:
        raise Refusal(409, f"{held_size}\n")
    if new.size == 0 and new.root != EMPTY_ROOT:
        raise Refusal(422, "a checkpoint of size 0 must have the empty tree's root")
    if held is None or held_size == 0:
        if request.proof:
            raise Refusal(422, "a proof from size 0 must be empty")
        return new
    try:
        verify_consistency(held.size, new.size, held.root, new.root, request.proof)
    except VerificationError as error:
        raise Refusal(422, f"not consistent with the cosigned checkpoint of size {held.size}: {error}",
                      evidence=str(error)) from None
    return new
