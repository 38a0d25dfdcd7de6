"""The quorum fuzzer: schema-valid Raft RPCs with hostile field values, sent to the controller
listeners of a live cluster of three combined nodes that it starts and stops itself.

    python -m tests.fuzz.quorum --messages 20000 --seed 1          # figures on the way out
    python -m tests.fuzz.quorum --messages 2000 --seed 1 --json    # figures as one JSON line

Each message is Vote (v0-2), BeginQuorumEpoch (v0-1), EndQuorumEpoch (v0-1), FetchSnapshot
(v0-1) or Fetch of `__cluster_metadata` (v4-18) to a random node, every field of its type and
range, and lying: the cluster id (null, empty, another one, the real one), the sender (another
voter, the receiver itself, a stranger, a negative id), the receiver's voter key and directory
id, the epoch (the current one, the one before, the last int32 one; random int32 epochs on the
fetches), offsets, sizes and waits of any int64/int32, snapshot ids that do not exist. One in a
hundred names a later epoch (a vote or a leader's claim): Raft takes those, at the cost of an
election. Epochs further ahead are left out: each accepted one brings the quorum nearer the end
of the epoch space (see FUZZING.md).

Checked throughout: every request is answered within `ANSWER_TIMEOUT_S` by a response that
decodes as its API and version; every node process stays alive; every `--check-every`
messages the quorum has a leader and a CreateTopics through a broker commits within
`COMMIT_TIMEOUT_S`. At the end every node stops cleanly (exit 0) and its output holds no
traceback and no ERROR line. A failure saves the last `RECENT` messages and the nodes' output
under `--artifacts` and stops the run.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from moldau.broker.quorum_rpc import METADATA_TOPIC, METADATA_TOPIC_ID
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.integration.cluster import COMBINED, LOOPBACK, Cluster, build_cluster
from tests.integration.conftest import _server_factory
from tests.integration.wire import Connection

ANSWER_TIMEOUT_S = 10.0
COMMIT_TIMEOUT_S = 30.0
RECENT = 200
LAST_EPOCH = 2**31 - 1
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
VERSIONS = {
    ApiKey.VOTE: (0, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 1),
    ApiKey.END_QUORUM_EPOCH: (0, 1),
    ApiKey.FETCH_SNAPSHOT: (0, 1),
    ApiKey.FETCH: (4, 18),
}
FAST = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}


@dataclasses.dataclass
class Figures:
    messages: int = 0
    by_api: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    answers: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    commits: int = 0
    epochs_seen: list[int] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    failure: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "by_api": dict(self.by_api),
            "answers": dict(self.answers.most_common()),
            "commits": self.commits,
            "elections": len(set(self.epochs_seen)) - 1 if self.epochs_seen else 0,
            "seconds": round(self.seconds, 1),
            "failure": self.failure,
        }


class QuorumView:
    """What anyone can read of the quorum (DescribeQuorum through a broker)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.leader_id: int | None = None
        self.epoch = 0
        self.high_watermark = 0
        self.voters: list[int] = sorted(cluster.nodes)

    def refresh(self) -> None:
        for node in self.cluster.nodes.values():
            host, port = node.bootstrap.split(":")
            try:
                with Connection(host, int(port), timeout=5) as connection:
                    response = connection.request(
                        55, 2, {"topics": [{"topic_name": METADATA_TOPIC, "partitions": [{}]}]}
                    )
            except OSError:
                continue
            partition = response.topics[0].partitions[0]
            if partition.error_code == 0 and partition.leader_id >= 0:
                self.leader_id = int(partition.leader_id)
                self.epoch = int(partition.leader_epoch)
                self.high_watermark = int(partition.high_watermark)
                return
        self.leader_id = None


class Liar:
    """Builds the hostile requests, from one seeded random source."""

    def __init__(self, rng: random.Random, view: QuorumView, cluster_id: str) -> None:
        self.random = rng
        self.view = view
        self.cluster_id = cluster_id

    def message(self, receiver: int) -> tuple[int, int, dict[str, Any]]:
        api_key = self.random.choice(list(VERSIONS))
        low, high = VERSIONS[api_key]
        version = self.random.randint(low, high)
        build = {
            ApiKey.VOTE: self._vote,
            ApiKey.BEGIN_QUORUM_EPOCH: self._begin,
            ApiKey.END_QUORUM_EPOCH: self._end,
            ApiKey.FETCH_SNAPSHOT: self._fetch_snapshot,
            ApiKey.FETCH: self._fetch,
        }[api_key]
        return api_key, version, build(receiver)

    # Field values.

    def _cluster_id(self) -> str | None:
        return self.random.choice([None, "", "another-cluster", self.cluster_id, self.cluster_id])

    def _sender(self, receiver: int) -> int:
        others = [v for v in self.view.voters if v != receiver]
        return self.random.choice(
            [*others, *others, receiver, -1, -(2**31), 99, self.random.randint(*INT32)]
        )

    def _election_epoch(self) -> int:
        """An epoch for Vote and the leader's RPCs: one in a hundred a later one."""
        current = self.view.epoch
        if self.random.random() < 0.01:
            return current + self.random.randint(1, 2)
        return self.random.choice([current, current, max(current - 1, 0), LAST_EPOCH, -1, 0])

    def _any_epoch(self) -> int:
        current = self.view.epoch
        return self.random.choice(
            [
                current,
                current,
                current + 1,
                current - 1,
                LAST_EPOCH,
                -1,
                self.random.randint(*INT32),
            ]
        )

    def _offset(self) -> int:
        end = self.view.high_watermark
        return self.random.choice(
            [0, end, end + 1, max(end - 1, 0), -1, self.random.randint(*INT64), 2**63 - 1]
        )

    def _directory(self) -> uuid.UUID | None:
        return self.random.choice(
            [None, uuid.UUID(int=0), uuid.UUID(int=self.random.getrandbits(128))]
        )

    def _voter_id(self, receiver: int) -> int:
        return self.random.choice([receiver, receiver, -1, self._sender(receiver)])

    # Requests.

    def _vote(self, receiver: int) -> dict[str, Any]:
        epoch = self._election_epoch()
        return {
            "cluster_id": self._cluster_id(),
            "voter_id": self._voter_id(receiver),
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "replica_epoch": epoch,
                            "replica_id": self._sender(receiver),
                            "replica_directory_id": self._directory(),
                            "voter_directory_id": self._directory(),
                            "last_offset_epoch": self.random.choice([epoch - 1, epoch, 0, -1]),
                            "last_offset": self._offset(),
                            "pre_vote": self.random.random() < 0.5,
                        }
                    ],
                }
            ],
        }

    def _begin(self, receiver: int) -> dict[str, Any]:
        return {
            "cluster_id": self._cluster_id(),
            "voter_id": self._voter_id(receiver),
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "voter_directory_id": self._directory(),
                            "leader_id": self._sender(receiver),
                            "leader_epoch": self._election_epoch(),
                        }
                    ],
                }
            ],
            "leader_endpoints": [],
        }

    def _end(self, receiver: int) -> dict[str, Any]:
        candidates = self.random.sample([*self.view.voters, 99, -1], k=self.random.randint(0, 3))
        return {
            "cluster_id": self._cluster_id(),
            "topics": [
                {
                    "topic_name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_id": self._sender(receiver),
                            "leader_epoch": self._election_epoch(),
                            "preferred_successors": candidates,
                            "preferred_candidates": [
                                {"candidate_id": c, "candidate_directory_id": self._directory()}
                                for c in candidates
                            ],
                        }
                    ],
                }
            ],
            "leader_endpoints": [],
        }

    def _fetch_snapshot(self, receiver: int) -> dict[str, Any]:
        return {
            "cluster_id": self._cluster_id(),
            "replica_id": self._sender(receiver),
            "max_bytes": self.random.choice([0, -1, 1, 1 << 20, self.random.randint(*INT32)]),
            "topics": [
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": self._any_epoch(),
                            "snapshot_id": {
                                "end_offset": self._offset(),
                                "epoch": self._any_epoch(),
                            },
                            "position": self._offset(),
                            "replica_directory_id": self._directory(),
                        }
                    ],
                }
            ],
        }

    def _fetch(self, receiver: int) -> dict[str, Any]:
        sender = self._sender(receiver)
        return {
            "cluster_id": self._cluster_id(),
            "replica_id": sender,
            "replica_state": {"replica_id": sender, "replica_epoch": self._any_epoch()},
            "max_wait": self.random.choice([0, 0, 0, -1, 10, 500]),
            "min_bytes": self.random.choice([0, 1, -1]),
            "max_bytes": self.random.choice([0, -1, 1 << 20, self.random.randint(*INT32)]),
            "isolation_level": self.random.choice([0, 1]),
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": METADATA_TOPIC,
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": self._any_epoch(),
                            "fetch_offset": self._offset(),
                            "last_fetched_epoch": self._any_epoch(),
                            "log_start_offset": self._offset(),
                            "partition_max_bytes": self.random.choice([0, -1, 1 << 20]),
                            "high_watermark": self._offset(),
                            "replica_directory_id": self._directory(),
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }


def answer_errors(answer: Any) -> list[str]:
    """The error names an answer carries (top level and partition)."""
    names = []
    top = getattr(answer, "error_code", None)
    if top is not None:
        names.append(ErrorCode(int(top)).name)
    for topic in getattr(answer, "topics", None) or getattr(answer, "responses", None) or ():
        for partition in topic.partitions:
            names.append(ErrorCode(int(partition.error_code)).name)
    return names


def fuzz(cluster: Cluster, *, messages: int, seed: int, check_every: int) -> Figures:
    figures = Figures()
    started = time.monotonic()
    rng = random.Random(seed)
    view = QuorumView(cluster)
    liar = Liar(rng, view, cluster.cluster_id)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    connections: dict[int, Connection] = {}
    recent: collections.deque[str] = collections.deque(maxlen=RECENT)
    try:
        for index in range(messages):
            if index % check_every == 0:
                failure = _check_quorum(cluster, admin, view, figures, f"fuzz-{seed}-{index}")
                if failure is not None:
                    figures.failure = failure
                    break
            receiver = rng.choice(sorted(cluster.nodes))
            api_key, version, body = liar.message(receiver)
            recent.append(f"to {receiver}: {ApiKey(api_key).name} v{version} {body}")
            figures.by_api[ApiKey(api_key).name] += 1
            try:
                connection = connections.get(receiver)
                if connection is None:
                    port = cluster.nodes[receiver].controller_port
                    assert port is not None
                    connection = Connection(LOOPBACK, port, timeout=ANSWER_TIMEOUT_S)
                    connections[receiver] = connection
                answer = connection.request(api_key, version, body)
            except (OSError, AssertionError, ValueError) as error:
                connections.pop(receiver, None)
                figures.failure = (
                    f"node {receiver} did not answer {ApiKey(api_key).name} v{version}: "
                    f"{type(error).__name__}: {error}"
                )
                break
            figures.messages += 1
            for name in answer_errors(answer):
                figures.answers[name] += 1
            dead = _dead_nodes(cluster)
            if dead:
                figures.failure = f"node(s) {dead} exited"
                break
        else:
            figures.failure = _check_quorum(cluster, admin, view, figures, f"fuzz-{seed}-end")
    finally:
        for connection in connections.values():
            connection.__exit__(None, None, None)
        figures.seconds = time.monotonic() - started
    if figures.failure is not None:
        figures.failure += "\nlast messages:\n" + "\n".join(list(recent)[-20:])
    return figures


def _dead_nodes(cluster: Cluster) -> list[int]:
    return [
        node.node_id
        for node in cluster.nodes.values()
        if node.server is None
        or node.server.process is None
        or node.server.process.poll() is not None
    ]


def _check_quorum(
    cluster: Cluster, admin: AdminClient, view: QuorumView, figures: Figures, topic: str
) -> str | None:
    """A leader, and a CreateTopics committed: None, or what failed."""
    deadline = time.monotonic() + COMMIT_TIMEOUT_S
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin.create_topics([NewTopic(topic, 1, 3)], operation_timeout=10)[topic].result(15)
            figures.commits += 1
            view.refresh()
            if view.leader_id is not None:
                figures.epochs_seen.append(view.epoch)
                return None
        except Exception as failure:  # a leader change under way: retried
            if "TOPIC_ALREADY_EXISTS" in str(failure):
                figures.commits += 1
                view.refresh()
                figures.epochs_seen.append(view.epoch)
                return None
            error = failure
        time.sleep(0.5)  # (the fuzzer's own pacing between attempts, not a synchronization)
    return f"no commit within {COMMIT_TIMEOUT_S:.0f} s: {error}"


def output_problems(cluster: Cluster) -> list[str]:
    """Tracebacks and ERROR lines in the nodes' output."""
    problems = []
    for node in cluster.nodes.values():
        if node.server is None:
            continue
        text = node.server.log_path.read_text(encoding="utf-8", errors="replace")
        for line in text.splitlines():
            if "Traceback" in line or " ERROR " in line or " CRITICAL " in line:
                problems.append(f"node {node.node_id}: {line}")
    return problems


def run(
    *, messages: int, seed: int, check_every: int, base: Path, artifacts: Path | None
) -> Figures:
    """Start the cluster under `base`, fuzz it, stop it; a failure keeps its output."""
    factory = _server_factory(base)
    start = next(factory)
    figures = Figures()
    try:
        cluster = build_cluster(start, base, roles=[COMBINED] * 3, extra=FAST)
        figures = fuzz(cluster, messages=messages, seed=seed, check_every=check_every)
    finally:
        try:
            factory.close()  # stops every node; raises when one did not exit cleanly
        except BaseException as error:
            figures.failure = (figures.failure or "") + f"\nstopping the cluster: {error}"
    if figures.failure is None:
        problems = output_problems(cluster)
        if problems:
            figures.failure = "the nodes logged:\n" + "\n".join(problems[:20])
    if figures.failure is not None and artifacts is not None:
        artifacts.mkdir(parents=True, exist_ok=True)
        for log in base.glob("server-*/server.log"):
            shutil.copy(log, artifacts / f"{log.parent.name}.log")
        (artifacts / "failure.txt").write_text(figures.failure, encoding="utf-8")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check-every", type=int, default=500)
    parser.add_argument("--artifacts", type=Path, default=Path("fuzz-artifacts/quorum"))
    parser.add_argument("--json", action="store_true")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="moldau-quorum-fuzz-") as scratch:
        figures = run(
            messages=arguments.messages,
            seed=arguments.seed,
            check_every=arguments.check_every,
            base=Path(scratch),
            artifacts=arguments.artifacts,
        )
    if arguments.json:
        print(json.dumps(figures.as_json()))
    else:
        for key, value in figures.as_json().items():
            print(f"{key}: {value}")
    return 0 if figures.failure is None else 1


if __name__ == "__main__":
    sys.exit(main())
