"""Fuzz target: every registered handler, through the real `Dispatcher` of an embedded node.

Each input becomes one request: the bytes choose (through `ByteRandom`) the API, a version from
the advertised range, and every field of a schema-valid request whose names, numbers and record
batches are mostly ones the node knows (`requests.fuzz_vocabulary`); one input in eight is then
mutated byte by byte. The request goes to the dispatcher on the node's event loop as a
connection would hand it over.

Invariants:
- the dispatcher answers, or raises `CloseConnection`; a handler's failure is never anything but
  a `KafkaError` (the dispatcher turns others into UNKNOWN_SERVER_ERROR *and an ERROR log with a
  traceback*, which is what this target catches: no log record at ERROR, none with a traceback);
- every answer decodes as the response of the request's API and version, with its correlation id;
- an API that does not wait by design (all but Produce, Fetch, JoinGroup, SyncGroup) answers
  within `HANG_S`.

The node keeps its state from one input to the next, like a long-lived broker: a failure may
need the inputs before it, so the last `RECENT` frames are written beside the crash
(`fuzz-artifacts/handlers-recent-*`), and `replay(frames)` runs them on a fresh node.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import logging
import os
import shutil
import struct
import tempfile
import time
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kio.serial import entity_reader

from moldau.broker.dispatcher import Dispatcher
from moldau.broker.node import Node
from moldau.broker.registry import BROKER, HandlerSpec, load_handlers
from moldau.config.values import BrokerConfig
from moldau.net.connection import Applying, CloseConnection, ConnectionInfo
from moldau.net.deferred import Deferred
from moldau.protocol.adapter import (
    _skip_tagged_fields,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    millis,
    request_schema,
    response_schema,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.records import NewRecord, build_batch
from moldau.protocol.shape import check_shape
from tests.fuzz.entities import ByteRandom
from tests.fuzz.requests import TOPICS, encode_frame, fuzz_vocabulary, random_request

HANG_S = 5.0
WAITING_S = 0.05  # how long an API that may wait is given before the next input
RECENT = 200
ARTIFACTS = Path(os.environ.get("MOLDAU_FUZZ_ARTIFACTS", "fuzz-artifacts"))
MAY_WAIT = {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP}
CLIENT_IDS = ("fuzz", None, "", "rdkafka")


class Failure(AssertionError):
    """An invariant broken: the message says which, with the request that broke it."""


class _Collector(logging.Handler):
    """Keeps every log record at ERROR or above, and every record that carries a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info:
            self.records.append(record)


class FuzzNode:
    """An embedded node on an event loop this thread runs between inputs, and its dispatcher."""

    def __init__(self) -> None:
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.directory = tempfile.mkdtemp(prefix="moldau-fuzz-", dir=base)
        config = BrokerConfig.load(
            extra={
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": self.directory,
                "http.listeners": "",  # (9644 is one for the whole machine)
            },
            environ={},
        )
        self.loop = asyncio.new_event_loop()
        self.node = Node(config)
        self.collector = _Collector()
        logging.getLogger().addHandler(self.collector)
        self.loop.run_until_complete(self.node.start())
        self.dispatcher = Dispatcher(self.node, BROKER)
        # The APIs of a broker listener (the controller listener's are for other nodes).
        brokers = load_handlers()[BROKER].values()
        self.specs: list[HandlerSpec] = sorted(brokers, key=lambda s: s.api_key)
        self.late_failures: list[str] = []
        self.recent: collections.deque[bytes] = collections.deque(maxlen=RECENT)
        self.pending: dict[asyncio.Future[Any], tuple[bytes, float]] = {}
        self.longest_group_timeout_ms = 0
        self._correlation_id = 0
        self._prepare()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(self.node.stop())
        self.loop.close()
        logging.getLogger().removeHandler(self.collector)
        shutil.rmtree(self.directory, ignore_errors=True)

    def _prepare(self) -> None:
        """The topics, records, group offsets and producer id the vocabulary names."""
        topics = [{"name": name, "num_partitions": count, "replication_factor": 1}
                  for name, count in zip(TOPICS, (3, 1), strict=True)]  # fmt: skip
        self.request(ApiKey.CREATE_TOPICS, 7, {"topics": topics, "timeout": 10_000})
        batch = build_batch([NewRecord(key=b"k%d" % i, value=b"v" * i) for i in range(10)])
        for partition in range(3):
            self.request(ApiKey.PRODUCE, 9, {
                "acks": -1, "timeout": 10_000,
                "topic_data": [{"name": TOPICS[0],
                                "partition_data": [{"index": partition, "records": batch}]}],
            })  # fmt: skip
        for key_type in (0, 1):  # the internal topics are created by the first ask
            self._find_coordinator(key_type)
        self.request(ApiKey.OFFSET_COMMIT, 8, {
            "group_id": "fuzz-group", "generation_id_or_member_epoch": -1,
            "topics": [{"name": TOPICS[0], "partitions": [{"partition_index": 0,
                                                            "committed_offset": 3}]}],
        })  # fmt: skip
        self.request(ApiKey.INIT_PRODUCER_ID, 4, {"transactional_id": "fuzz-txn",
                                                   "transaction_timeout": 60_000})  # fmt: skip
        self.check_logs(b"(set-up)")

    def _find_coordinator(self, key_type: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = self.request(
                ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": ["x"]}
            )
            if found.coordinators[0].error_code == 0:
                return
            self.loop.run_until_complete(asyncio.sleep(0.05))  # the node creates the topic
        raise TimeoutError(f"no coordinator for key type {key_type} within 30 s")

    def request(self, api_key: int, version: int, body: Any) -> Any:
        """Send one well-formed request and return its decoded response (for the set-up)."""
        self._correlation_id += 1
        frame = encode_request(api_key, version, self._correlation_id, "fuzz-setup", body)
        response = self.loop.run_until_complete(self._dispatch(frame, deadline_s=30.0))
        if response is None:
            return None
        return decode_response(api_key, version, response[4:])[1]

    def run(self, frame: bytes) -> None:
        """One request through the dispatcher; raises `Failure` on a broken invariant."""
        self.recent.append(frame)
        self.loop.run_until_complete(self._dispatch(frame, deadline_s=None))
        self.check_logs(frame)
        self.check_pending()

    async def _dispatch(self, frame: bytes, *, deadline_s: float | None) -> bytes | None:
        info = ConnectionInfo(
            client_host="127.0.0.1",
            client_port=1,
            listener_name="PLAINTEXT",
            security_protocol="PLAINTEXT",
            zero_copy=False,
            state={},
            authenticated=True,  # a PLAINTEXT listener's connection
        )
        api = _api(frame)
        try:
            outcome = self.dispatcher(memoryview(frame)[4:].toreadonly(), info)
        except CloseConnection:
            return None
        except Exception as error:
            raise Failure(f"the dispatcher raised {error!r}\n{_frame_text(frame)}") from error
        if outcome is None or isinstance(outcome, bytes | list):
            return self._check_response(frame, outcome)
        future = self._future_of(outcome)
        if deadline_s is None:
            waits = api is not None and api[0] in MAY_WAIT
            deadline_s = WAITING_S if waits else HANG_S
        else:
            waits = False
        done, _ = await asyncio.wait({future}, timeout=deadline_s)
        if not done:
            if not waits:
                raise Failure(f"no answer within {deadline_s} s\n{_frame_text(frame)}")
            # Held as a connection holds it, and answered within what the request allows.
            self.pending[future] = (frame, time.monotonic() + self._wait_bound_s(frame))
            future.add_done_callback(lambda f: self._late(frame, f))
            return None
        return self._answer(frame, future)

    def _future_of(self, outcome: Any) -> asyncio.Future[Any]:
        if isinstance(outcome, Applying):
            return asyncio.ensure_future(self._applied(outcome))
        if isinstance(outcome, Deferred):
            future: asyncio.Future[Any] = self.loop.create_future()
            outcome.then(
                lambda value: future.done() or future.set_result(value),
                lambda error: future.done() or future.set_exception(error),
            )
            return future
        return asyncio.ensure_future(outcome)

    async def _applied(self, outcome: Applying) -> Any:
        """The answer of a request applied in order: what `pending` gives, or the value of the
        `Deferred` it gives when what is left is a wait."""
        value = await outcome.pending
        if isinstance(value, Deferred):
            return await self._future_of(value)
        return value

    def _answer(self, frame: bytes, future: asyncio.Future[Any]) -> bytes | None:
        error = future.exception()
        if isinstance(error, CloseConnection):
            return None
        if error is not None:
            text = "".join(traceback.format_exception(error))
            raise Failure(f"the request failed with {error!r}\n{text}\n{_frame_text(frame)}")
        return self._check_response(frame, future.result())

    def _wait_bound_s(self, frame: bytes) -> float:
        """How long a request that waits by design may take: its own timeout (Fetch's max_wait,
        Produce's timeout), or for group requests the longest timeout any member gave plus the
        initial rebalance delay; and `HANG_S` more."""
        request = decode_request(header := decode_request_header(frame[4:]), frame[4:])
        if header.api_key == ApiKey.FETCH:
            return millis(request.max_wait) / 1000 + HANG_S
        if header.api_key == ApiKey.PRODUCE:
            return millis(request.timeout) / 1000 + HANG_S
        if header.api_key == ApiKey.JOIN_GROUP:
            timeouts = [millis(request.session_timeout)]
            timeouts.append(millis(getattr(request, "rebalance_timeout", request.session_timeout)))
            self.longest_group_timeout_ms = max(self.longest_group_timeout_ms, *timeouts)
        return (self.longest_group_timeout_ms + 3000) / 1000 + HANG_S

    def check_pending(self) -> None:
        now = time.monotonic()
        for future, (frame, due) in list(self.pending.items()):
            if now > due:
                del self.pending[future]
                raise Failure(f"a request was never answered\n{_frame_text(frame)}")

    def _late(self, frame: bytes, future: asyncio.Future[Any]) -> None:
        self.pending.pop(future, None)
        try:
            self._answer(frame, future)
        except Failure as failure:
            self.late_failures.append(str(failure))

    def _check_response(self, frame: bytes, outcome: Any) -> bytes | None:
        if outcome is None:
            return None
        chunks = outcome if isinstance(outcome, list) else [outcome]
        response = b"".join(
            bytes(chunk) if isinstance(chunk, bytes | bytearray | memoryview) else
            chunk.read_bytes() for chunk in chunks
        )  # fmt: skip
        api = _api(frame)
        assert api is not None
        api_key, version = api
        spec = next((s for s in self.specs if s.api_key == api_key), None)
        if api_key == ApiKey.API_VERSIONS and (spec is None or version > spec.max_version):
            version = 0  # KIP-511: an unknown version is answered with a v0 response
        try:
            _check_answer(api_key, version, response)
        except Exception as error:
            raise Failure(
                f"the answer does not decode as API {api_key} v{version}: {error!r}\n"
                f"answer: {response[:200].hex()}\n{_frame_text(frame)}"
            ) from error
        if response[4:8] != frame[8:12]:
            raise Failure(f"wrong correlation id {response[4:8].hex()}\n{_frame_text(frame)}")
        return response

    def check_logs(self, frame: bytes) -> None:
        problems = self.late_failures[:]
        self.late_failures.clear()
        for record in self.collector.records:
            text = self.collector.format(record)
            problems.append(f"log record at {record.levelname}: {text}")
        self.collector.records.clear()
        if problems:
            raise Failure("\n".join(problems) + f"\nlast request: {_frame_text(frame)}")

    def save_recent(self) -> Path:
        directory = ARTIFACTS / f"handlers-recent-{time.strftime('%Y%m%d-%H%M%S')}"
        directory.mkdir(parents=True, exist_ok=True)
        for index, frame in enumerate(self.recent):
            (directory / f"{index:04d}").write_bytes(frame)
        return directory


def _check_answer(api_key: int, version: int, response: bytes) -> None:
    """The answer is one response of that API and version, to its last byte. kio's decoder
    refuses negative times, which Kafka does send (-1: no transaction start): tolerated."""
    size = int.from_bytes(response[:4], "big")
    if size != len(response) - 4:
        raise ValueError(f"size prefix {size} for {len(response) - 4} bytes")
    schema = response_schema(api_key, version)
    offset = 8
    if schema.__flexible__ and api_key != ApiKey.API_VERSIONS:
        offset = _skip_tagged_fields(response, offset)
    end = check_shape(schema, response, offset)
    if end != len(response):
        raise ValueError(f"{len(response) - end} bytes after the response")
    try:
        entity_reader(schema)(response, offset)
    except Exception as error:  # kio's OutOfBoundValue
        if "negative timestamp" not in str(error):
            raise


def _api(frame: bytes) -> tuple[int, int] | None:
    if len(frame) < 8:
        return None
    return int.from_bytes(frame[4:6], "big", signed=True), int.from_bytes(frame[6:8], "big")


def _frame_text(frame: bytes) -> str:
    api = _api(frame)
    name = f"API {api[0]} v{api[1]}" if api else "short frame"
    return f"request ({name}, {len(frame)} bytes): {frame[:400].hex()}"


def request_frame(data: bytes, specs: list[HandlerSpec]) -> bytes:
    """The request an input stands for: a schema-valid one, mutated for one input in eight."""
    rng = ByteRandom(data)
    spec = specs[rng.randrange(len(specs))]
    # The advertised range and one version past it; versions without a schema (Produce v0-2,
    # advertised and refused) get random bytes for a body.
    version = rng.randint(spec.advertised_min_version, spec.max_version + 1)
    client_id = rng.choice(CLIENT_IDS)
    correlation_id = rng.getrandbits(31)
    if request_schema(spec.api_key, version) is None:
        header = struct.pack(">hhih", spec.api_key, version, correlation_id, 4) + b"fuzz"
        body = header + rng.randbytes(rng.randint(0, 64))
        return struct.pack(">i", len(body)) + body
    request = random_request(spec.api_key, version, rng, _VOCABULARY)
    frame = encode_frame(spec.api_key, version, request, correlation_id=correlation_id,
                         client_id=client_id)  # fmt: skip
    if rng.random() < 0.125 and len(frame) > 8:
        mutated = bytearray(frame)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(8, len(mutated))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))
        frame = bytes(mutated)
    return frame


_VOCABULARY = fuzz_vocabulary()
_node: FuzzNode | None = None


def setup() -> None:
    global _node
    _node = FuzzNode()
    atexit.register(_node.close)


def test_one_input(data: bytes) -> None:
    assert _node is not None, "setup() first"
    frame = request_frame(data, _node.specs)
    try:
        _node.run(frame)
    except Failure:
        print(f"the last {len(_node.recent)} requests: {_node.save_recent()}", flush=True)
        raise


def replay(frames: Iterable[bytes]) -> None:
    """Run whole frames, in order, on a fresh node (a regression corpus, or a saved failure)."""
    node = FuzzNode()
    try:
        for frame in frames:
            node.run(frame)
    finally:
        node.close()
