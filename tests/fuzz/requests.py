"""Requests for the fuzzers: schema-valid ones of any API and version, and the names they use.

The fuzzers' nodes create the topics, group and transactional id of `fuzz_vocabulary()`, so that
random requests name things that exist (and some that do not, or cannot).
"""

from __future__ import annotations

import random
import struct
from typing import Any

from moldau.protocol.adapter import encode_request, request_schema
from moldau.protocol.compression import CompressionType
from moldau.protocol.records import ControlRecordType, NewRecord, build_batch, build_control_batch
from tests.fuzz.entities import Vocabulary, random_entity

TOPICS = ("fuzz-a", "fuzz-b")  # created by the fuzzers' set-up, 3 and 1 partitions
GROUP = "fuzz-group"
TRANSACTIONAL_ID = "fuzz-txn"


def fuzz_vocabulary() -> Vocabulary:
    value = NewRecord(key=b"k", value=b"v" * 40, headers=(("h", b"x"),))
    return Vocabulary(
        topics=(*TOPICS, "__consumer_offsets", "__transaction_state", "fuzz-new", "", "bad/name"),
        groups=(GROUP, "fuzz-other-group", ""),
        transactional_ids=(TRANSACTIONAL_ID, ""),
        strings=(
            "cleanup.policy",
            "retention.ms",
            "segment.bytes",
            "max.message.bytes",
            "compact",
            "delete",
            "-1",
            "1000",
            "User:ANONYMOUS",
            "consumer",
            "range",
            "member-1",
            "PLAIN",
            "0",
        ),
        record_batches=(
            build_batch([value]),
            build_batch([value, value], compression=CompressionType.GZIP),
            build_batch([value], compression=CompressionType.ZSTD, producer_id=0, base_sequence=0),
            build_batch([value], producer_id=1, producer_epoch=0, base_sequence=0),
            build_batch([value], transactional=True, producer_id=1, producer_epoch=0),
            build_control_batch(ControlRecordType.COMMIT, producer_id=1, producer_epoch=0),
            build_batch([value])[:-1] + b"\x00",  # a CRC that does not match
        ),
    )


def random_request(api_key: int, version: int, rng: random.Random, vocabulary: Vocabulary) -> Any:
    """A kio request entity of that API and version with random, mostly realistic, fields."""
    schema = request_schema(api_key, version)
    if schema is None:
        raise ValueError(f"no schema for API {api_key} v{version}")
    return random_entity(schema, rng, vocabulary=vocabulary)


def encode_frame(
    api_key: int,
    version: int,
    request: Any,
    *,
    correlation_id: int,
    client_id: str | None = "fuzz",
) -> bytes:
    """The whole frame (size prefix, header, body) of a request entity or dict."""
    return encode_request(api_key, version, correlation_id, client_id, request)


def frame_api(frame: bytes) -> tuple[int, int] | None:
    """(api_key, api_version) of a whole frame, or None for one too short to say."""
    if len(frame) < 8:
        return None
    api_key, version = struct.unpack_from(">hh", frame, 4)
    return api_key, version
