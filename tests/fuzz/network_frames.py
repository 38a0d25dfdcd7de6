"""The network fuzzer's frames: requests recorded from real clients and generated from the
schemas for every advertised version, and their mutations (bytes flipped, integers overwritten,
bodies cut, grown or spliced, versions swapped, size prefixes that lie)."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from moldau.protocol.adapter import request_schema
from moldau.protocol.api_keys import ApiKey
from tests.fuzz.requests import encode_frame, fuzz_vocabulary, random_request

CORPUS = Path(__file__).parent / "corpus" / "requests"

INTERESTING_16 = (0, 1, -1, 0x7FFF, -0x8000, 2, 0x100)
INTERESTING_32 = (0, 1, -1, 0x7FFFFFFF, -0x80000000, 0xFFFF, 0x10000, 1 << 20)
GENERATED_PER_VERSION = 3


def recorded_frames() -> list[bytes]:
    return [path.read_bytes() for path in sorted(CORPUS.iterdir()) if path.is_file()]


def generated_frames(versions: list[tuple[int, int, int]], rng: random.Random) -> list[bytes]:
    """Schema-valid requests for every advertised API and version."""
    vocabulary = fuzz_vocabulary()
    frames = []
    for api_key, low, high in versions:
        for version in range(low, high + 1):
            if request_schema(api_key, version) is None:
                continue
            for _ in range(GENERATED_PER_VERSION):
                request = random_request(api_key, version, rng, vocabulary)
                frames.append(encode_frame(api_key, version, request, correlation_id=1))
    return frames


def with_size(body: bytes | bytearray) -> bytes:
    return struct.pack(">i", len(body)) + bytes(body)


def mutate(frame: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    """One to three mutations of a whole frame; the size prefix is kept right unless a mutation
    is about the prefix itself."""
    body = bytearray(frame[4:])
    wrong_prefix = None
    for _ in range(rng.randint(1, 3)):
        choice = rng.randrange(10)
        if choice <= 2 and len(body) > 8:  # bytes flipped or set to edge values
            for _ in range(rng.randint(1, 8)):
                position = rng.randrange(len(body))
                body[position] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif choice == 3 and len(body) > 10:  # an integer overwritten
            position = rng.randrange(len(body) - 4)
            if rng.random() < 0.5:
                struct.pack_into(">h", body, position, rng.choice(INTERESTING_16))
            else:
                value = rng.choice(INTERESTING_32)
                struct.pack_into(">I", body, position, value & 0xFFFFFFFF)
        elif choice == 4 and body:  # cut
            del body[rng.randrange(len(body)) :]
        elif choice == 5:  # grown
            body += rng.randbytes(rng.randint(1, 64))
        elif choice == 6 and len(body) > 8:  # a chunk inserted or removed
            position = rng.randrange(len(body))
            if rng.random() < 0.5:
                body[position:position] = body[: rng.randint(1, 32)]
            else:
                del body[position : position + rng.randint(1, 16)]
        elif choice == 7 and len(body) >= 4:  # another version, in range or not
            struct.pack_into(">h", body, 2, rng.choice((-1, 0, 1, 3, 9, 13, 17, 18, 0x7FFF)))
        elif choice == 8:  # the header of one request, the body of another
            other = rng.choice(seeds)
            cut = rng.randint(8, 24)
            body = bytearray(body[:cut] + other[4 + cut :])
        elif choice == 9:  # a size prefix that lies
            wrong_prefix = max(0, len(body) + rng.choice((-8, -1, 1, 2, 100)))
    if wrong_prefix is not None:
        return struct.pack(">i", wrong_prefix) + bytes(body)
    return with_size(body)


def frame_label(frame: bytes) -> str:
    """The API a frame claims (what the server sees), as Kafka's name where there is one."""
    if len(frame) < 8:
        return "short"
    (api_key,) = struct.unpack_from(">h", frame, 4)
    try:
        return ApiKey(api_key).name
    except ValueError:
        return "unknown-key"
