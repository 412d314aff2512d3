"""What signing and checking signatures cost per event, from memory (no server: the CPU of it alone).

    python bench/signing.py [--events 20000] [--append 1,10,100,1000]

Events of the backlog workload, linked as the writer links them, are signed as appends of each size
(one Ed25519 signature over the Merkle root of the append's event hashes, services/log/signing.py), then
checked one event at a time as the projector and verify check them (each event's proof to the root;
the root's signature verified once per append). The peers, in the same run: decoding the same events
(what every reader already pays per event), and, for signing, one signature per event.
"""

from __future__ import annotations

import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import arguments  # noqa: E402
from bench.results import record  # noqa: E402
from events import decode  # noqa: E402
from services.log.chain import chain  # noqa: E402
from services.log.signing import Attribution, Signer, SigningKey  # noqa: E402
from tests.builders.workload import claim_events  # noqa: E402

console = Console()


def stored_bytes(events: int, seed: int = 1) -> list[tuple[bytes, str]]:
    """The events' stored bytes and their actors' ids, ten events a claim."""
    rng, out = random.Random(seed), []
    for number in range(max(1, events // 10)):
        out.extend((data, event.actor.id) for event, data in chain(claim_events(number, 10, rng), None))
    return out[:events]


def per_event(seconds: float, events: int) -> float:
    return seconds / events * 1e6


def measure(datas: list[tuple[bytes, str]], size: int, signer: Signer, rules: Attribution) -> tuple[float, float]:
    """Microseconds of CPU per event to sign appends of ``size`` events, and to check each of them."""
    appends = [datas[i : i + size] for i in range(0, len(datas), size)]
    started = time.process_time()
    signed = [signer.headers([data for data, _ in append]) for append in appends]
    sign = per_event(time.process_time() - started, len(datas))
    now = datetime.now(UTC)
    started = time.process_time()
    for append, headers in zip(appends, signed, strict=True):
        for (data, actor), header in zip(append, headers, strict=True):
            rules.check(10**9, header, data, now, actor)
    check = per_event(time.process_time() - started, len(datas))
    return sign, check


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--append", default="1,10,100,1000", help="append sizes (events under one signature), comma separated")
    args = parser.parse_args()
    datas = stored_bytes(args.events)
    signer = Signer.generate()
    rules = Attribution({signer.key_id: SigningKey(signer.key_id, "claimlog-api", signer.public_key, True, datetime.now(UTC))}, None)

    started = time.process_time()
    for data, _ in datas:
        decode(data)
    decoding = per_event(time.process_time() - started, len(datas))
    started = time.process_time()
    for data, _ in datas:
        signer.private_key.sign(data)
    alone = per_event(time.process_time() - started, len(datas))

    table = Table("events per signature", "sign µs/event", "check µs/event", "decode µs/event (peer)", title=f"{len(datas):,} events")
    for size in (int(part) for part in args.append.split(",")):
        sign, check = measure(datas, size, signer, rules)
        table.add_row(f"{size:,}", f"{sign:.1f}", f"{check:.1f}", f"{decoding:.1f}")
        record(f"sign, {size} events per signature", sign, unit="µs/event", peer=alone, note="peer: one Ed25519 signature per event")
        record(f"check signature, {size} events per signature", check, unit="µs/event", peer=decoding, note="peer: decoding the event")
    console.print(table)
    console.print(f"one signature per event: {alone:.1f} µs/event to sign")


if __name__ == "__main__":
    main()
