"""C2SP tlog-checkpoint v1.0.0: the note text of a tree head (origin, size, base64 root, extension lines)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tlog.errors import TlogFormatError
from tlog.note import b64, check_name, unb64_hash


@dataclass(frozen=True)
class Checkpoint:
    """A tree head: the log's origin, the tree's size, its root, and any extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def text(self) -> str:
        """The checkpoint's note text, ending in a newline."""
        check_name(self.origin, what="origin")
        lines = [self.origin, str(self.size), b64(self.root), *self.extensions]
        return "\n".join(lines) + "\n"


def parse_checkpoint(text: str) -> Checkpoint:
    """A checkpoint from its note text (without signatures), or TlogFormatError naming the bad line."""
    if not text.endswith("\n"):
        raise TlogFormatError("a checkpoint's text must end in a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise TlogFormatError(f"a checkpoint has at least three lines (origin, size, root), not {len(lines)}")
    origin, size, root, *extensions = lines
    if not origin:
        raise TlogFormatError("a checkpoint's origin line (line 1) is empty")
    if not re.fullmatch(r"0|[1-9][0-9]*", size) or int(size) >= 1 << 63:
        raise TlogFormatError(f"a checkpoint's size (line 2) {size!r} is not a decimal without leading zeroes")
    raw = unb64_hash(root, what="a checkpoint's root (line 3)")
    if any(not line for line in extensions):
        raise TlogFormatError("a checkpoint's extension lines must not be empty")
    return Checkpoint(origin, int(size), raw, tuple(extensions))
