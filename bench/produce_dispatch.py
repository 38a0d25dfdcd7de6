"""The broker's own time for one Produce request, without sockets: an embedded node's
dispatcher takes a Produce v9 frame (one partition, one batch of one 100 B record, acks=1) and
answers it, 20,000 times a round; prints the CPU time of the node's thread per request (its
thread time: other processes on the machine stretch the wall clock, much less this) for each
round, and their median.

    .venv/bin/python bench/produce_dispatch.py [--rounds 7] [--requests 20000] [--paired 200]

The frame goes through what a connection calls for every request (`Dispatcher.__call__`: header
decode, the handler, `ReplicaManager.append_records`, the log's append to the page cache, the
answer's encoding); what the connection and the socket cost is left out, so a change to the
dispatcher or the produce path shows here without the noise of a client process. To compare two
checkouts, run it with PYTHONPATH set to each in turn.

`--paired N` measures what the node's metrics add instead: N pairs of 1,000 requests, one
through the dispatcher as it is and one with its `RequestMetrics` and the data path's per-topic
counters (`ReplicationStats.traffic`) swapped for do-nothing stand-ins, in alternating order;
prints both medians and the median of the pairs' differences.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time

from moldau.broker.dispatcher import Dispatcher
from moldau.broker.node import Node
from moldau.broker.registry import BROKER
from moldau.config.values import BrokerConfig
from moldau.controller.operations import NewTopic
from moldau.net.connection import ConnectionInfo
from moldau.protocol.adapter import encode_request
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.records import NewRecord, build_batch
from moldau.replication.stats import ReplicationStats, TopicTraffic

PAIR_REQUESTS = 1000


class _NoRequestMetrics:
    def taken(self, api_key: int) -> float:
        return 0.0

    def answered(self, api_key: int, started: float) -> None:
        pass


async def measure(rounds: int, requests: int, paired: int) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="moldau-dispatch-") as directory:
        config = BrokerConfig.load(
            extra={
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "log.dirs": directory,
                "schema.registry.listeners": "",
                "http.listeners": "",
            },
            environ={},
        )
        node = Node(config)
        await node.start()
        try:
            await node.create_topics_via_controller([NewTopic(name="bench", num_partitions=1)])
            await node.wait_for_partitions(["bench"])
            batch = build_batch([NewRecord(key=None, value=b"x" * 100)])
            produce = {
                "transactional_id": None,
                "acks": 1,
                "timeout": 30_000,
                "topic_data": [
                    {"name": "bench", "partition_data": [{"index": 0, "records": batch}]}
                ],
            }
            frame = encode_request(ApiKey.PRODUCE, 9, 1, "bench", produce)[4:]
            dispatcher = Dispatcher(node, BROKER)
            info = ConnectionInfo(
                client_host="127.0.0.1",
                client_port=1,
                listener_name="PLAINTEXT",
                security_protocol="PLAINTEXT",
                zero_copy=False,
                authenticated=True,
                state={},
            )
            assert isinstance(dispatcher(frame, info), bytes)
            if paired:
                await _paired(node, frame, info, paired)
                return []
            per_request = []
            for _ in range(rounds):
                started = time.thread_time()
                for _ in range(requests):
                    dispatcher(frame, info)
                per_request.append((time.thread_time() - started) / requests)
                await asyncio.sleep(0)  # (the node's own work between rounds)
            return per_request
        finally:
            await node.stop()


def _cpu_per_request(dispatcher: Dispatcher, frame: bytes, info: ConnectionInfo) -> float:
    started = time.thread_time()
    for _ in range(PAIR_REQUESTS):
        dispatcher(frame, info)
    return (time.thread_time() - started) / PAIR_REQUESTS


async def _paired(node: Node, frame: bytes, info: ConnectionInfo, pairs: int) -> None:
    counted = Dispatcher(node, BROKER)
    bare = Dispatcher(node, BROKER)
    bare._metrics = _NoRequestMetrics()  # type: ignore[assignment]
    traffic = ReplicationStats.traffic
    nowhere = TopicTraffic()

    def without_counters() -> float:
        ReplicationStats.traffic = lambda _stats, _topic: nowhere  # type: ignore[method-assign]
        try:
            return _cpu_per_request(bare, frame, info)
        finally:
            ReplicationStats.traffic = traffic  # type: ignore[method-assign]

    with_them, without, differences = [], [], []
    for pair in range(pairs):
        if pair % 2:
            without.append(without_counters())
            with_them.append(_cpu_per_request(counted, frame, info))
        else:
            with_them.append(_cpu_per_request(counted, frame, info))
            without.append(without_counters())
        differences.append(with_them[-1] - without[-1])
        await asyncio.sleep(0)
    print(
        f"CPU µs per request, median of {pairs} pairs of {PAIR_REQUESTS}: with the metrics "
        f"{statistics.median(with_them) * 1e6:.2f}, with stand-ins "
        f"{statistics.median(without) * 1e6:.2f}; the pairs' difference "
        f"{statistics.median(differences) * 1e6:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--paired", type=int, default=0)
    args = parser.parse_args()
    per_request = asyncio.run(measure(args.rounds, args.requests, args.paired))
    if not per_request:
        return
    rounds = " ".join(f"{seconds * 1e6:.1f}" for seconds in per_request)
    median = statistics.median(per_request) * 1e6
    print(f"Produce through the dispatcher, CPU µs per request: {rounds} (median {median:.1f})")


if __name__ == "__main__":
    sys.exit(main())
