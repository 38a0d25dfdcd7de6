"""A well-behaved client that keeps asking while an attack runs, timing every answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from moldau.protocol.records import NewRecord, build_batch

from .wire import Connection, produce


class HealthyClient(threading.Thread):
    """ApiVersions and a one-record produce to `topic`, back to back, on a connection of its
    own; `slowest` is the longest an answer took. A context manager: runs while inside."""

    def __init__(self, host: str, port: int, topic: str) -> None:
        super().__init__(daemon=True)
        self.connection = Connection(host, port, timeout=30)
        self.topic = topic
        self.done = threading.Event()
        self.slowest = 0.0
        self.answers = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        record = build_batch(
            [NewRecord(key=b"k", value=b"healthy")], timestamp=int(time.time() * 1000)
        )
        calls: list[Callable[[], Any]] = [
            lambda: self.connection.request(18, 3, {"client_software_name": "healthy"}),
            lambda: produce(self.connection, self.topic, 0, record),
        ]
        try:
            while not self.done.is_set():
                for call in calls:
                    started = time.perf_counter()
                    call()
                    self.slowest = max(self.slowest, time.perf_counter() - started)
                    self.answers += 1
                time.sleep(0.005)
        except BaseException as error:  # reported by check()
            self.failure = error

    def __enter__(self) -> HealthyClient:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.done.set()
        self.join(120)
        self.connection.__exit__(None, None, None)

    def check(self, bound_s: float) -> None:
        """Every answer came, each within `bound_s`."""
        assert self.failure is None, f"the healthy client failed: {self.failure!r}"
        assert self.answers >= 4, "the healthy client was hardly answered"
        assert self.slowest < bound_s, f"a healthy request took {self.slowest:.2f} s"
