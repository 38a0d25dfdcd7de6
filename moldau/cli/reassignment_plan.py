"""The files of `moldau cluster reassign`, in the JSON formats of Kafka's
kafka-reassign-partitions.sh (ReassignPartitionsCommand), and the pure decisions behind them.

Topics to move: `{"version":1,"topics":[{"topic":"t"}]}`. A reassignment:
`{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}`
(`log_dirs` may be left out; a path other than "any" is the log dir the replica moves to on its
broker, with AlterReplicaLogDirs, and `move_state` is verify's verdict on that move). `propose`
places replicas as Kafka's AdminUtils.assignReplicasToBrokers does (rack-aware when every broker
has a rack), with a start index taken from the topic's name instead of a random one, so the same
input always gives the same proposal. `throttled_replicas` are the topic configs Kafka's tool
sets: the leader side every current replica of a moving partition, the follower side the
replicas it gains. Nothing here does I/O.
"""

from __future__ import annotations

import json
import posixpath
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from moldau.client.log_dirs import ReplicaLogDirInfo, TopicPartitionReplica
from moldau.types import TopicPartition

VERSION: Final = 1
ANY_LOG_DIR: Final = "any"
LEADER_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE: Final = "follower.replication.throttled.rate"

Assignment = Mapping[TopicPartition, Sequence[int]]


class PlanError(ValueError):
    """A reassignment or topics file that cannot be used; the message says what to fix."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Reassignment:
    """A reassignment file: the target replicas of each partition, in file order, and the log
    dir named for a replica (the entries of `log_dirs` other than "any")."""

    replicas: dict[TopicPartition, tuple[int, ...]]
    log_dirs: dict[TopicPartitionReplica, str]


@dataclass(frozen=True, slots=True)
class PartitionShape:
    """What placement needs of a topic: its partition count and replication factor."""

    topic: str
    partitions: int
    replication_factor: int


# --- reading ---------------------------------------------------------------------------------


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"the {what} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PlanError(f"the {what} must be a JSON object with a version field")
    version = data.get("version", VERSION)
    if version != VERSION:
        raise PlanError(f"the {what} has version {version!r}; only version 1 is supported")
    return data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_topics_to_move(text: str) -> list[str]:
    """Topic names from `{"version":1,"topics":[{"topic":"t"},...]}`, in file order."""
    what = "topics-to-move JSON"
    data = _load(text, what)
    entries = data.get("topics")
    if not isinstance(entries, list) or not entries:
        raise PlanError(f'the {what} needs a non-empty "topics" list, e.g. {{"topic":"orders"}}')
    names: list[str] = []
    for entry in entries:
        name = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise PlanError(f'each entry of "topics" needs a "topic" name, not {entry!r}')
        if name in names:
            raise PlanError(f"topic '{name}' is listed twice in the {what}")
        names.append(name)
    return names


def parse_reassignment(text: str) -> Reassignment:
    """The target replicas of each partition of a reassignment JSON, in file order, and the log
    dirs it names."""
    what = "reassignment JSON"
    data = _load(text, what)
    entries = data.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise PlanError(f'the {what} needs a non-empty "partitions" list')
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    log_dirs: dict[TopicPartitionReplica, str] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise PlanError(f'each entry of "partitions" must be an object, not {entry!r}')
        topic, partition, replicas = (entry.get(k) for k in ("topic", "partition", "replicas"))
        if not isinstance(topic, str) or not topic:
            raise PlanError(f'an entry of "partitions" has no "topic" name: {_compact(entry)}')
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise PlanError(
                f'{topic}: "partition" must be a non-negative integer, not {partition!r}'
            )
        tp = TopicPartition(topic, partition)
        if tp in targets:
            raise PlanError(f"partition {tp} is listed twice in the {what}")
        if (
            not isinstance(replicas, list)
            or not replicas
            or not all(_is_int(r) and r >= 0 for r in replicas)
        ):
            raise PlanError(f'{tp}: "replicas" must be a non-empty list of broker ids')
        if len(set(replicas)) != len(replicas):
            raise PlanError(f"{tp}: duplicate replicas in {replicas}; name each broker once")
        log_dirs.update(_log_dirs(tp, entry.get("log_dirs"), replicas))
        targets[tp] = tuple(replicas)
    return Reassignment(replicas=targets, log_dirs=log_dirs)


def _log_dirs(
    tp: TopicPartition, log_dirs: Any, replicas: list[int]
) -> dict[TopicPartitionReplica, str]:
    if log_dirs is None:
        return {}
    if not isinstance(log_dirs, list) or not all(isinstance(d, str) and d for d in log_dirs):
        raise PlanError(f'{tp}: "log_dirs" must be a list of paths (or "any")')
    if len(log_dirs) != len(replicas):
        raise PlanError(
            f'{tp}: "log_dirs" has {len(log_dirs)} entries for {len(replicas)} replicas'
        )
    chosen = {
        TopicPartitionReplica(tp.topic, tp.partition, broker): log_dir
        for broker, log_dir in zip(replicas, log_dirs, strict=True)
        if log_dir != ANY_LOG_DIR
    }
    for replica, log_dir in chosen.items():
        if not log_dir.startswith("/"):
            raise PlanError(
                f"{replica}: log dir {log_dir!r} must be an absolute path, as "
                '`moldau cluster log-dirs describe` lists them (or "any")'
            )
    return chosen


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def parse_broker_list(text: str) -> list[int]:
    """`--broker-list 1,2,3` as broker ids, each once."""
    brokers: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit():
            raise PlanError(
                f"broker list '{text}' must be broker ids separated by commas, e.g. 1,2,3"
            )
        if int(item) in brokers:
            raise PlanError(f"broker {item} is listed twice in '{text}'")
        brokers.append(int(item))
    return brokers


# --- writing ---------------------------------------------------------------------------------


def reassignment_data(assignment: Assignment) -> dict[str, Any]:
    """An assignment in the reassignment format, partitions sorted by topic and partition."""
    return {
        "version": VERSION,
        "partitions": [
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "replicas": list(replicas),
                "log_dirs": [ANY_LOG_DIR] * len(replicas),
            }
            for tp, replicas in sorted(assignment.items())
        ],
    }


def reassignment_json(assignment: Assignment) -> str:
    """One line, as Kafka's tool prints it (and reads it back)."""
    return _compact(reassignment_data(assignment))


# --- placement -------------------------------------------------------------------------------


def propose(
    shapes: Iterable[PartitionShape],
    brokers: Sequence[int],
    racks: Mapping[int, str | None] | None = None,
) -> dict[TopicPartition, tuple[int, ...]]:
    """Replicas for every partition of each topic over `brokers` (Kafka's round-robin with a
    shifting second replica; rack-aware when `racks` gives every broker a rack)."""
    proposal: dict[TopicPartition, tuple[int, ...]] = {}
    for shape in shapes:
        if shape.replication_factor > len(brokers):
            raise PlanError(
                f"topic '{shape.topic}' has {shape.replication_factor} replicas per partition "
                f"but only {len(brokers)} brokers were given; list more brokers"
            )
        start = zlib.crc32(shape.topic.encode()) % len(brokers)
        aware = racks if racks and all(racks.get(b) for b in brokers) else {}
        placed = assign_replicas(shape, brokers, aware, start)
        for partition, replicas in enumerate(placed):
            proposal[TopicPartition(shape.topic, partition)] = replicas
    return proposal


def _replica_index(first: int, shift: int, index: int, count: int) -> int:
    return (first + 1 + (shift + index) % (count - 1)) % count


def rack_alternated(brokers: Sequence[int], racks: Mapping[int, str | None]) -> list[int]:
    """Brokers taking turns by rack (racks sorted, brokers sorted within a rack), as Kafka's
    getRackAlternatedBrokerList: rack a's first, rack b's first, ..., rack a's second, ..."""
    by_rack: dict[str, list[int]] = defaultdict(list)
    for broker in sorted(brokers):
        by_rack[str(racks.get(broker))].append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    alternated: list[int] = []
    for turn in range(max(len(q) for q in queues)):
        alternated += [q[turn] for q in queues if turn < len(q)]
    return alternated


def assign_replicas(
    shape: PartitionShape, brokers: Sequence[int], racks: Mapping[int, str | None], start: int
) -> list[tuple[int, ...]]:
    """Kafka's assignReplicasToBrokers from a fixed start index: the first replica round-robin
    over the rack-alternated brokers, the others at a shift that grows each time the partitions
    have gone round once, skipping racks (then brokers) that have a replica while others have
    none. Brokers without a rack form one rack, where this is Kafka's plain round robin."""
    arranged = rack_alternated(brokers, racks)
    count = len(arranged)
    rack_count = len({racks.get(b) for b in arranged})
    shift = start
    placed = []
    for partition in range(shape.partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        replicas = [arranged[first]]
        used_racks = {racks.get(arranged[first])}
        attempt = 0
        while len(replicas) < shape.replication_factor:
            broker = arranged[_replica_index(first, shift * rack_count, attempt, count)]
            attempt += 1
            if racks.get(broker) in used_racks and len(used_racks) < rack_count:
                continue
            if broker in replicas:
                continue
            replicas.append(broker)
            used_racks.add(racks.get(broker))
        placed.append(tuple(replicas))
    return placed


# --- throttles and progress ------------------------------------------------------------------


def moving(current: Assignment, target: Assignment) -> dict[TopicPartition, tuple[int, ...]]:
    """The partitions of `target` whose replicas differ from `current`."""
    return {
        tp: tuple(replicas)
        for tp, replicas in target.items()
        if tuple(current.get(tp, ())) != tuple(replicas)
    }


def throttled_replicas(current: Assignment, target: Assignment) -> dict[str, dict[str, str]]:
    """Per topic, the `*.replication.throttled.replicas` values for the partitions that move:
    the leader side every current replica (any may lead and send), the follower side the
    replicas that join (as Kafka's calculateLeaderThrottles/calculateFollowerThrottles)."""
    leaders: dict[str, list[str]] = defaultdict(list)
    followers: dict[str, list[str]] = defaultdict(list)
    for tp, replicas in sorted(moving(current, target).items()):
        existing = tuple(current.get(tp, ()))
        leaders[tp.topic] += [f"{tp.partition}:{b}" for b in existing]
        followers[tp.topic] += [f"{tp.partition}:{b}" for b in replicas if b not in existing]
    return {
        topic: {
            LEADER_THROTTLED_REPLICAS: ",".join(leaders[topic]),
            FOLLOWER_THROTTLED_REPLICAS: ",".join(followers[topic]),
        }
        for topic in sorted(leaders)
    }


def brokers_involved(current: Assignment, target: Assignment) -> list[int]:
    """Every broker that holds or gains a replica of a moving partition: they get the rates."""
    involved: set[int] = set()
    for tp, replicas in moving(current, target).items():
        involved.update(current.get(tp, ()))
        involved.update(replicas)
    return sorted(involved)


COMPLETE: Final = "complete"
IN_PROGRESS: Final = "in_progress"
FAILED: Final = "failed"


def progress(target: Sequence[int], current: Sequence[int] | None, *, reassigning: bool) -> str:
    """Kafka's verify verdict for one partition: still reassigning, done (the replicas are the
    target, in order), or neither: cancelled, or replaced by another reassignment."""
    if reassigning:
        return IN_PROGRESS
    if current is not None and tuple(current) == tuple(target):
        return COMPLETE
    return FAILED


# --- moves between log dirs ------------------------------------------------------------------


def _same_dir(a: str | None, b: str) -> bool:
    return a is not None and posixpath.normpath(a) == posixpath.normpath(b)


def move_progress(
    replica: TopicPartitionReplica,
    target: str,
    info: ReplicaLogDirInfo,
    *,
    reassigning: bool,
) -> tuple[str, str]:
    """Kafka's verify verdict for a replica's log dir, and its line: there (complete), its
    future replica there (in progress), moving elsewhere (in progress, but not where asked),
    not moving (failed: the move was replaced or the replica recreated elsewhere), or no replica
    in any live log dir: in progress while its partition is still being reassigned to the
    broker, else failed (a log dir is likely offline)."""
    tp, broker = replica.topic_partition, replica.broker_id
    if info.future_log_dir is not None:
        if _same_dir(info.future_log_dir, target):
            return IN_PROGRESS, f"Reassignment of replica {replica} is still in progress."
        return IN_PROGRESS, (
            f"Partition {tp} on broker {broker} is being moved to log dir "
            f"{info.future_log_dir} instead of {target}."
        )
    if info.current_log_dir is None:
        if reassigning:
            return IN_PROGRESS, f"Reassignment of replica {replica} is still in progress."
        return FAILED, (
            f"Partition {tp} is not found in any live log dir on broker {broker}. "
            "There is likely an offline log directory on the broker."
        )
    if _same_dir(info.current_log_dir, target):
        return COMPLETE, f"Reassignment of replica {replica} completed successfully."
    return FAILED, (
        f"Partition {tp} on broker {broker} is not being moved from log dir "
        f"{info.current_log_dir} to {target}."
    )


def unknown_log_dirs(
    wanted: Mapping[TopicPartitionReplica, str], known: Mapping[int, Iterable[str]]
) -> list[tuple[TopicPartitionReplica, str]]:
    """The (replica, log dir) pairs of `wanted` whose dir is not one of its broker's."""
    normalized = {b: {posixpath.normpath(d) for d in dirs} for b, dirs in known.items()}
    return [
        (replica, log_dir)
        for replica, log_dir in sorted(wanted.items())
        if posixpath.normpath(log_dir) not in normalized.get(replica.broker_id, set())
    ]
