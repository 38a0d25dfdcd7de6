"""Write the generated seed corpora: `python -m tests.fuzz.seeds` (the files are committed).

- `corpus/records/`: batches of every codec, with keys, nulls and headers, transactional and
  control batches, each behind the mode byte of `fuzz_records` (0 as is, 2 records section).
- `corpus/handlers/`: random inputs of `fuzz_handlers` (every byte is a choice: random bytes
  reach every API).
- `corpus/requests/generated-*`: a schema-valid request of every API and version Moldau serves,
  with a vocabulary of the names the fuzzers' nodes create (see `recording.py` for the frames
  of real clients).
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

from moldau.protocol.batch_layout import HEADER_SIZE
from moldau.protocol.compression import CompressionType
from moldau.protocol.records import ControlRecordType, NewRecord, build_batch, build_control_batch

CORPUS = Path(__file__).parent / "corpus"


def record_seeds() -> list[bytes]:
    seeds = []
    records = [
        NewRecord(key=b"key", value=b"value" * 20, headers=(("h", b"1"), ("n", None))),
        NewRecord(key=None, value=None),
        NewRecord(value=b"\x00" * 300, timestamp=1_700_000_000_000),
    ]
    for codec in CompressionType:
        batch = build_batch(records, compression=codec, producer_id=7, base_sequence=0)
        seeds += [b"\x00" + batch, b"\x02" + bytes([codec, 3]) + batch[HEADER_SIZE:]]
    seeds.append(b"\x00" + build_batch(records[:1], transactional=True, producer_id=3))
    for marker in ControlRecordType:
        seeds.append(b"\x00" + build_control_batch(marker, producer_id=3, producer_epoch=0))
    two = build_batch(records[:1]) + build_batch(records[1:], base_offset=1)
    seeds.append(b"\x01" + two)
    return seeds


def write(directory: Path, seeds: list[bytes], prefix: str = "") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        name = prefix + hashlib.sha1(seed).hexdigest()[:16]
        (directory / name).write_bytes(seed)


def request_seeds() -> list[tuple[str, bytes]]:
    """(name, whole frame) of one random schema-valid request per API and version served."""
    from moldau.broker.registry import BROKER, load_handlers
    from moldau.protocol.adapter import request_schema
    from tests.fuzz.requests import encode_frame, fuzz_vocabulary, random_request

    rng = random.Random(2)
    vocabulary = fuzz_vocabulary()
    seeds = []
    for spec in sorted(load_handlers()[BROKER].values(), key=lambda s: s.api_key):
        for version in range(spec.min_version, spec.max_version + 1):
            if request_schema(spec.api_key, version) is None:
                continue
            request = random_request(spec.api_key, version, rng, vocabulary)
            frame = encode_frame(spec.api_key, version, request, correlation_id=1)
            seeds.append((f"generated-{spec.api_key:02d}-v{version}", frame))
    return seeds


def handler_seeds() -> list[bytes]:
    """Random inputs for `fuzz_handlers`: each is a request of a random API, all fields drawn."""
    rng = random.Random(3)
    return [rng.randbytes(rng.choice((256, 1024, 2048))) for _ in range(300)]


def main() -> None:
    write(CORPUS / "records", record_seeds())
    write(CORPUS / "handlers", handler_seeds())
    requests = CORPUS / "requests"
    requests.mkdir(parents=True, exist_ok=True)
    for name, frame in request_seeds():
        (requests / name).write_bytes(frame)


if __name__ == "__main__":
    main()
