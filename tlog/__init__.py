"""The transparency log's formats: pure, without I/O, importing nothing of the project.

The formats are the API, as the events are: the integrator, the witness and the auditor need them
and nothing else of the log's machinery. Each module pins the C2SP specification it implements
(https://github.com/C2SP/C2SP, read at commit 5ba5ee830903e91240fc6f9f3a7a9293d49e69c9):

- ``hashes``, ``proofs``: RFC 6962 Merkle trees (SHA-256, leaf prefix 0x00, node prefix 0x01), with the
  proof verification of RFC 9162, sections 2.1.3.2 and 2.1.4.2;
- ``tiles``: tlog-tiles v0.1.0 (hash tiles of height 8, entry bundles, paths);
- ``note``: signed-note v1.0.0 (Ed25519 signatures, key ids, verifier keys);
- ``checkpoint``: tlog-checkpoint v1.0.0;
- ``cosignature``: tlog-cosignature v1.0.1 (Ed25519 ``cosignature/v1``, signature type 0x04) and, as read at
  commit 01194db11950a0ae2b2b2401afa0a4063a822458, ML-DSA-44 (``subtree/v1``, signature type 0x06);
- ``proof``: tlog-proof (``c2sp.org/tlog-proof@v1``);
- ``witness_protocol``: the request and answer bodies of tlog-witness v1.0.0 ``add-checkpoint``.
"""

from tlog.errors import TlogFormatError, VerificationError

__all__ = ["TlogFormatError", "VerificationError"]
