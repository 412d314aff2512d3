"""Write ``claimlog_vectors.json``: checkpoints, cosignatures and proofs claimlog makes, for ``main.go`` to verify."""

from __future__ import annotations

import json
from pathlib import Path

from tests.interop import fixed
from tlog.builder import TreeBuilder
from tlog.checkpoint import Checkpoint
from tlog.note import b64
from tlog.proofs import consistency_proof, inclusion_proof, subtrees_of


def vectors() -> dict:
    subtree = subtrees_of(fixed.leaf_hashes())
    signer, witness = fixed.log_signer(), fixed.cosigner()
    checkpoints = []
    for size in fixed.SIZES:
        builder = TreeBuilder()
        for i in range(size):
            builder.append(fixed.entry(i))
        text = Checkpoint(fixed.LOG_NAME, size, builder.root()).text()
        note = text + "\n" + signer.sign(text.encode()).line() + witness.cosign(text, fixed.TIMESTAMP).line()
        checkpoints.append({"size": size, "note": note})
    return {
        "log_vkey": signer.vkey(),
        "witness_vkey": witness.vkey(),
        "checkpoints": checkpoints,
        "inclusion": [
            {"index": i, "size": n, "proof": [b64(h) for h in inclusion_proof(i, n, subtree)]} for i, n in fixed.INCLUSIONS
        ],
        "consistency": [
            {"old": m, "new": n, "proof": [b64(h) for h in consistency_proof(m, n, subtree)]}
            for m, n in fixed.CONSISTENCIES
        ],
    }


if __name__ == "__main__":
    out = Path(__file__).with_name("claimlog_vectors.json")
    out.write_text(json.dumps(vectors(), indent=1) + "\n")
    print(f"wrote {out}")
