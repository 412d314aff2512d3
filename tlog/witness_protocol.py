"""The bodies of C2SP tlog-witness v1.0.0 ``add-checkpoint``: ``old <size>``, proof lines, blank, checkpoint."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tlog.errors import TlogFormatError
from tlog.note import Signature, b64, parse_signature_line, unb64_hash

MAX_PROOF = 63
SIZE_TYPE = "text/x.tlog.size"  # the Content-Type of a 409's body: the witness's size


@dataclass(frozen=True)
class AddCheckpoint:
    """A request: the size the client believes the witness holds, a consistency proof, the signed checkpoint."""

    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: str

    def format(self) -> str:
        return "".join([f"old {self.old_size}\n", *(b64(h) + "\n" for h in self.proof), "\n", self.checkpoint])


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """A request body, or TlogFormatError naming the line that breaks it (the witness answers 400)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TlogFormatError(f"the request is not UTF-8: {error}") from None
    head, sep, checkpoint = text.partition("\n\n")
    if not sep:
        raise TlogFormatError("the request needs a blank line before the checkpoint")
    lines = head.split("\n")
    match = re.fullmatch(r"old (0|[1-9][0-9]*)", lines[0])
    if not match:
        raise TlogFormatError(f"the first line is 'old <size>', not {lines[0][:60]!r}")
    if len(lines) - 1 > MAX_PROOF:
        raise TlogFormatError(f"{len(lines) - 1} proof lines: at most {MAX_PROOF}")
    proof = tuple(unb64_hash(line, what=f"proof line {n}") for n, line in enumerate(lines[1:], start=1))
    return AddCheckpoint(int(match.group(1)), proof, checkpoint)


def format_signatures(signatures: Sequence[Signature]) -> str:
    """A 200 answer's body: one note signature line per cosignature."""
    return "".join(s.line() for s in signatures)


def parse_signatures(body: str) -> list[Signature]:
    """The cosignature lines of a 200 answer."""
    if not body.endswith("\n"):
        raise TlogFormatError("a witness's answer must end in a newline")
    return [parse_signature_line(line, number=n + 1) for n, line in enumerate(body[:-1].split("\n"))]


def parse_size(body: str) -> int:
    """The witness's size from a 409 answer's ``text/x.tlog.size`` body."""
    if not re.fullmatch(r"(0|[1-9][0-9]*)\n", body):
        raise TlogFormatError(f"a 409 body is a decimal size and a newline, not {body[:40]!r}")
    return int(body)
