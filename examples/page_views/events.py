"""The event generator: page views and clicks on a small site, as JSON records.

Each event is `{"event_time": ISO-8601 UTC, "user": "u17", "page": "/pricing", "action": "view"}`,
keyed by user so one user's events stay in order in one partition. Pages follow a skewed
popularity (a few pages get most views), as on a real site; about one event in five is a click.
"""

from __future__ import annotations

import datetime
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.client import SyncProducer

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup", "/about")
PAGE_WEIGHTS = (40, 20, 15, 12, 8, 5)
WINDOW_SECONDS = 10


@dataclass
class GeneratedEvents:
    """What the generator sent: totals, and views per (window start, page) for checking."""

    events: int = 0
    views: Counter[tuple[str, str]] = field(default_factory=Counter)
    seconds: float = 0.0


def window_start(moment: datetime.datetime) -> str:
    epoch = int(moment.timestamp()) // WINDOW_SECONDS * WINDOW_SECONDS
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%H:%M:%S")


def generate(
    bootstrap: str,
    topic: str,
    *,
    seconds: float,
    events_per_second: int,
    seed: int = 7,
    progress: Callable[[GeneratedEvents], None] | None = None,
) -> GeneratedEvents:
    """Send events in real time for `seconds`, a burst every 100 ms."""
    rng = random.Random(seed)
    sent = GeneratedEvents()
    started = time.monotonic()
    per_tick = max(1, events_per_second // 10)
    with SyncProducer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as producer:
        tick = 0
        while time.monotonic() - started < seconds:
            now = datetime.datetime.now(datetime.UTC)
            for _ in range(per_tick):
                user = f"u{rng.randint(1, 50)}"
                page = rng.choices(PAGES, PAGE_WEIGHTS)[0]
                action = "click" if rng.random() < 0.2 else "view"
                event = {
                    "event_time": now.isoformat(timespec="milliseconds"),
                    "user": user,
                    "page": page,
                    "action": action,
                }
                producer.produce(topic, json.dumps(event).encode(), user.encode())
                sent.events += 1
                if action == "view":
                    sent.views[(window_start(now), page)] += 1
            tick += 1
            if tick % 10 == 0:
                producer.flush()
                if progress is not None:
                    progress(sent)
            time.sleep(max(0.0, started + tick * 0.1 - time.monotonic()))
        producer.flush()
    sent.seconds = time.monotonic() - started
    return sent
