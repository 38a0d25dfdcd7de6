"""The checker: a history (tests/chaos/history.py) and the final logs read after healing in,
a report of anomalies out. Pure: no clients, no clock; every rule is pinned by crafted histories
in test_checker.py.

The ideas are Jepsen's Kafka checkers (facts, not code): the final log of each partition is the
truth; an acknowledged write must be in it exactly once, at the offset it was acknowledged at, in
the order its producer sent it; a read must agree with it; read_committed must never show aborted
or partial transactions; committed offsets never go back.

A record's identity is its value up to the first `|`: what follows tells attempts apart (a
consume-transform-produce job writes `<input value>|<transaction>`), so the same input
transformed twice shows up as a duplicate however many attempts there were.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .history import FAILED, OK, UNKNOWN, Operation

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"

# Anomaly kinds, each a violation of a promise acks=all with idempotence and transactions make.
LOST = "lost"  # an acknowledged write (or committed transaction) missing from the final log
DUPLICATED = "duplicated"  # one identity more than once in a final log
REORDERED = "reordered"  # a producer's records in a partition out of the order it sent them
OFFSET_MISMATCH = "offset_mismatch"  # acknowledged at one offset, in the log at another
UNEXPECTED = "unexpected"  # in the log but never sent, or sent and reported failed
INCONSISTENT_READ = "inconsistent_read"  # a consumer read a value the final log does not hold there
READ_BACKWARDS = "read_backwards"  # one consumer session's offsets in a partition went back
ABORTED_READ = "aborted_read"  # read_committed showed a record of an aborted transaction
PARTIAL_TRANSACTION = "partial_transaction"  # some of a transaction's writes visible, not all
LOST_TRANSFORM = "lost_transform"  # an input below the committed offset never transformed
COMMITTED_OFFSET_BACKWARDS = "committed_offset_backwards"  # a group's committed offset went back
REPLICA_DIVERGENCE = "replica_divergence"  # replicas differ below the high watermark
INCOMPLETE = "incomplete"  # a partition written to but never read back: nothing can be said
# a leader, an ISR or the quorum leader changed while the only fault was a wall-clock jump
SPURIOUS_CHANGE = "spurious_change"
RESURRECTED = "resurrected"  # a deleted topic's record in its recreation, or it not from offset 0

ANOMALY_KINDS = (
    LOST,
    DUPLICATED,
    REORDERED,
    OFFSET_MISMATCH,
    UNEXPECTED,
    INCONSISTENT_READ,
    READ_BACKWARDS,
    ABORTED_READ,
    PARTIAL_TRANSACTION,
    LOST_TRANSFORM,
    COMMITTED_OFFSET_BACKWARDS,
    REPLICA_DIVERGENCE,
    INCOMPLETE,
    SPURIOUS_CHANGE,
    RESURRECTED,
)

Key = tuple[str, int]  # (topic, partition)


def identity(value: str) -> str:
    return value.split("|", 1)[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class Anomaly:
    kind: str
    detail: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Unavailability:
    fault: str
    nodes: list[int]
    start: float
    seconds: float


@dataclass(slots=True, kw_only=True)
class Report:
    anomalies: list[Anomaly] = field(default_factory=list)
    acknowledged: int = 0
    failed: int = 0
    unknown: int = 0
    transactions_committed: int = 0
    transactions_aborted: int = 0
    unavailability: list[Unavailability] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def count(self, kind: str) -> int:
        return sum(1 for anomaly in self.anomalies if anomaly.kind == kind)

    def of_kind(self, kind: str) -> list[Anomaly]:
        return [anomaly for anomaly in self.anomalies if anomaly.kind == kind]

    def unavailable_seconds(self) -> tuple[float, float]:
        """(p50, max) over the faults."""
        seconds = [entry.seconds for entry in self.unavailability]
        if not seconds:
            return 0.0, 0.0
        return statistics.median(seconds), max(seconds)

    def summary(self) -> dict[str, Any]:
        p50, worst = self.unavailable_seconds()
        return {
            "acknowledged": self.acknowledged,
            "failed": self.failed,
            "unknown": self.unknown,
            "transactions_committed": self.transactions_committed,
            "transactions_aborted": self.transactions_aborted,
            "anomalies": {kind: self.count(kind) for kind in ANOMALY_KINDS if self.count(kind)},
            "unavailable_p50_s": round(p50, 2),
            "unavailable_max_s": round(worst, 2),
        }


class FinalLog:
    """One partition read whole: offset -> value, in offset order."""

    def __init__(self, records: Iterable[list[Any]]) -> None:
        self.by_offset: dict[int, str] = {int(offset): value for offset, value in records}
        self.end = max(self.by_offset, default=-1) + 1
        self.values = set(self.by_offset.values())
        self._ordered = sorted(self.by_offset.items())
        # a record's identity (its value before any "|" suffix) -> its offsets, in order
        self.offsets_of: dict[str, list[int]] = defaultdict(list)
        for offset, value in self._ordered:
            self.offsets_of[identity(value)].append(offset)

    def ordered(self) -> list[tuple[int, str]]:
        return list(self._ordered)


def check(history: list[Operation], *, tolerate: Iterable[str] = ()) -> Report:
    """Every rule over one run. `tolerate` names anomaly kinds a run's promise does not exclude
    (acks=1 loses acknowledged records by design); they are reported but not counted invalid."""
    report = Report()
    finals = _final_logs(history)
    _check_sends(history, finals, report)
    _check_reads(history, finals, report)
    _check_transactions(history, finals, report)
    _check_committed_offsets(history, report)
    _check_replicas(history, report)
    _check_duplicates(finals, report)
    for disturbance in (op for op in history if op["f"] == "disturbance"):
        detail = {key: disturbance[key] for key in ("fault", "nodes", "change", "start")}
        report.anomalies.append(Anomaly(kind=SPURIOUS_CHANGE, detail=detail))
    _check_recreated_topics(history, finals, report)
    report.unavailability = unavailability(history)
    tolerated = set(tolerate)
    if tolerated:
        report.anomalies = [a for a in report.anomalies if a.kind not in tolerated]
    return report


def _final_logs(history: list[Operation]) -> dict[str, dict[Key, FinalLog]]:
    finals: dict[str, dict[Key, FinalLog]] = {READ_COMMITTED: {}, READ_UNCOMMITTED: {}}
    for operation in history:
        if operation["f"] == "final":
            key = (operation["topic"], int(operation["partition"]))
            finals[operation["isolation"]][key] = FinalLog(operation["records"])
    return finals


def _view(finals: dict[str, dict[Key, FinalLog]], key: Key) -> FinalLog | None:
    """What a read_committed reader sees in the end, else (no such read) the whole log."""
    return finals[READ_COMMITTED].get(key) or finals[READ_UNCOMMITTED].get(key)


def _whole(finals: dict[str, dict[Key, FinalLog]], key: Key) -> FinalLog | None:
    return finals[READ_UNCOMMITTED].get(key) or finals[READ_COMMITTED].get(key)


@dataclass(frozen=True, slots=True)
class Incarnation:
    """A topic deleted during the run: when it was last deleted (the deletion began) and when
    the topic the final logs hold was created under its name (the creation ended)."""

    deleted_at: float
    created_at: float


def incarnations(history: list[Operation]) -> dict[str, Incarnation]:
    """The topics deleted (and created again) during the run, from the history's `topic`
    entries. A topic deleted and not created again has `created_at` infinite."""
    deleted: dict[str, float] = {}
    created: dict[str, float] = {}
    for operation in history:
        if operation["f"] != "topic":
            continue
        if operation["action"] == "deleted":
            deleted[operation["topic"]] = operation["start"]
            created.pop(operation["topic"], None)
        elif operation["topic"] in deleted:
            created[operation["topic"]] = operation["end"]
    return {
        topic: Incarnation(deleted_at=at, created_at=created.get(topic, float("inf")))
        for topic, at in deleted.items()
    }


def _check_sends(
    history: list[Operation], finals: dict[str, dict[Key, FinalLog]], report: Report
) -> None:
    # A record sent to a topic before its last incarnation was created went to a topic that is
    # gone, or was retried into the new one: either is fine (a deletion deletes), so only the
    # records sent to the topic the final logs hold must be there, at their offset.
    recreated = incarnations(history)
    sends = [operation for operation in history if operation["f"] == "send"]
    outcome_of: dict[str, str] = {}
    by_producer: dict[tuple[str, str, int], dict[str, int]] = defaultdict(dict)
    unread: set[Key] = set()
    for send in sends:
        outcome = send["outcome"]
        if outcome == OK:
            report.acknowledged += 1
        elif outcome == FAILED:
            report.failed += 1
        else:
            report.unknown += 1
        outcome_of[send["value"]] = outcome
        key = (send["topic"], int(send["partition"]))
        by_producer[(send["client"], *key)][send["value"]] = int(send.get("seq", send["index"]))
        whole = _whole(finals, key)
        if whole is None:
            if key not in unread:
                unread.add(key)
                report.anomalies.append(Anomaly(kind=INCOMPLETE, detail={"partition": key}))
            continue
        if outcome != OK or send["start"] < recreated.get(key[0], _FOREVER).created_at:
            continue
        offsets = whole.offsets_of.get(identity(send["value"]), [])
        if not offsets:
            report.anomalies.append(
                Anomaly(kind=LOST, detail=_send_detail(send) | {"log_end": whole.end})
            )
        elif send.get("offset") is not None and int(send["offset"]) not in offsets:
            report.anomalies.append(
                Anomaly(
                    kind=OFFSET_MISMATCH,
                    detail=_send_detail(send)
                    | {"in_log_at": offsets, "log_holds": whole.by_offset.get(int(send["offset"]))},
                )
            )
    written_by_transactions = {
        write[2]
        for operation in history
        if operation["f"] == "txn"
        for write in operation["writes"]
    }
    sent_keys = {(send["topic"], int(send["partition"])) for send in sends}
    for key in sorted(sent_keys):
        whole = _whole(finals, key)
        if whole is None:
            continue
        for offset, value in whole.ordered():
            outcome = outcome_of.get(value)
            if outcome == FAILED or (outcome is None and value not in written_by_transactions):
                report.anomalies.append(
                    Anomaly(
                        kind=UNEXPECTED,
                        detail={
                            "partition": key,
                            "offset": offset,
                            "value": value,
                            "outcome": outcome or "never sent",
                        },
                    )
                )
    for (client, topic, partition), sequence_of in by_producer.items():
        whole = _whole(finals, (topic, partition))
        if whole is None:
            continue
        highest: tuple[int, str, int] | None = None
        placed: set[str] = set()  # a second copy is a duplicate, reported as such
        for offset, value in whole.ordered():
            sequence = sequence_of.get(value)
            if sequence is None or value in placed:
                continue
            placed.add(value)
            if highest is not None and sequence < highest[0]:
                report.anomalies.append(
                    Anomaly(
                        kind=REORDERED,
                        detail={
                            "client": client,
                            "partition": (topic, partition),
                            "value": value,
                            "offset": offset,
                            "after": highest[1],
                            "after_offset": highest[2],
                        },
                    )
                )
            if highest is None or sequence > highest[0]:
                highest = (sequence, value, offset)


_FOREVER = Incarnation(deleted_at=float("-inf"), created_at=float("-inf"))


def _check_recreated_topics(
    history: list[Operation], finals: dict[str, dict[Key, FinalLog]], report: Report
) -> None:
    """A topic created again after its deletion starts empty: its log begins at offset 0 and
    holds no record an earlier incarnation acknowledged."""
    for topic, incarnation in sorted(incarnations(history).items()):
        acknowledged_before = {
            op["value"]: op
            for op in history
            if op["f"] == "send"
            and op["topic"] == topic
            and op["outcome"] == OK
            and op["end"] <= incarnation.deleted_at
        }
        for key in sorted(k for k in finals[READ_UNCOMMITTED] if k[0] == topic):
            whole = finals[READ_UNCOMMITTED][key]
            first = min(whole.by_offset, default=0)
            if first != 0:
                report.anomalies.append(
                    Anomaly(kind=RESURRECTED, detail={"partition": key, "first_offset": first})
                )
            for offset, value in whole.ordered():
                send = acknowledged_before.get(value)
                if send is not None:
                    report.anomalies.append(
                        Anomaly(
                            kind=RESURRECTED,
                            detail=_send_detail(send)
                            | {"in_log_at": offset, "deleted_at": incarnation.deleted_at},
                        )
                    )


def _send_detail(send: Operation) -> dict[str, Any]:
    return {
        "client": send["client"],
        "partition": (send["topic"], int(send["partition"])),
        "value": send["value"],
        "acknowledged_offset": send.get("offset"),
        "acknowledged_at": send["end"],
    }


def _check_reads(
    history: list[Operation], finals: dict[str, dict[Key, FinalLog]], report: Report
) -> None:
    aborted = {
        write[2]
        for operation in history
        if operation["f"] == "txn" and operation["outcome"] == FAILED
        for write in operation["writes"]
    }
    last_offset: dict[tuple[str, Any, str, int], tuple[int, str]] = {}
    for poll in (operation for operation in history if operation["f"] == "poll"):
        isolation = poll.get("isolation", READ_UNCOMMITTED)
        for topic, partition, offset, value in poll["records"]:
            key = (topic, int(partition))
            session = (poll["client"], poll.get("session"), topic, int(partition))
            detail = {"client": poll["client"], "session": poll.get("session"),
                      "isolation": isolation, "partition": key, "offset": offset,
                      "value": value, "read_at": poll["end"]}  # fmt: skip
            previous = last_offset.get(session)
            if previous is not None and offset <= previous[0]:
                report.anomalies.append(
                    Anomaly(kind=READ_BACKWARDS, detail=detail | {"after": previous})
                )
            last_offset[session] = (offset, value)
            whole = _whole(finals, key)
            if whole is not None and whole.by_offset.get(offset) != value:
                report.anomalies.append(
                    Anomaly(
                        kind=INCONSISTENT_READ,
                        detail=detail | {"log_holds": whole.by_offset.get(offset)},
                    )
                )
            if isolation != READ_COMMITTED:
                continue
            committed = finals[READ_COMMITTED].get(key)
            if value in aborted or (committed is not None and offset not in committed.by_offset):
                report.anomalies.append(
                    Anomaly(kind=ABORTED_READ, detail=detail | {"aborted": value in aborted})
                )


def _check_transactions(
    history: list[Operation], finals: dict[str, dict[Key, FinalLog]], report: Report
) -> None:
    transactions = [operation for operation in history if operation["f"] == "txn"]
    committed_inputs: dict[tuple[str, Key], int] = {}
    visible_identities: dict[str, set[str]] = defaultdict(set)
    for key, final in finals[READ_COMMITTED].items():
        visible_identities[key[0]].update(identity(v) for v in final.by_offset.values())
    for transaction in transactions:
        if transaction["outcome"] == OK:
            report.transactions_committed += 1
            for topic, partition, offset in transaction.get("offsets", []):
                slot = (transaction.get("group", ""), (topic, int(partition)))
                committed_inputs[slot] = max(committed_inputs.get(slot, 0), int(offset))
        elif transaction["outcome"] == FAILED:
            report.transactions_aborted += 1
        visible, hidden = [], []
        for topic, partition, value in transaction["writes"]:
            final = finals[READ_COMMITTED].get((topic, int(partition)))
            if final is None:
                report.anomalies.append(
                    Anomaly(kind=INCOMPLETE, detail={"partition": (topic, partition)})
                )
                continue
            (visible if value in final.values else hidden).append(value)
        detail = {"client": transaction["client"], "outcome": transaction["outcome"],
                  "ended_at": transaction["end"], "visible": visible, "missing": hidden}  # fmt: skip
        if visible and hidden:
            report.anomalies.append(Anomaly(kind=PARTIAL_TRANSACTION, detail=detail))
        elif visible and transaction["outcome"] == FAILED:
            report.anomalies.append(Anomaly(kind=ABORTED_READ, detail=detail))
        elif hidden and transaction["outcome"] == OK:
            report.anomalies.append(Anomaly(kind=LOST, detail=detail))
    # Exactly once: every input below the offsets a committed transaction committed was
    # transformed, by some committed transaction, into the job's output.
    outputs = {
        (transaction.get("group", ""), write[0])
        for transaction in transactions
        for write in transaction["writes"]
    }
    for (group, key), committed_offset in committed_inputs.items():
        source = _view(finals, key)
        if source is None:
            report.anomalies.append(Anomaly(kind=INCOMPLETE, detail={"partition": key}))
            continue
        produced: set[str] = set()
        for job_group, output_topic in outputs:
            if job_group == group:
                produced |= visible_identities[output_topic]
        for offset, value in source.ordered():
            if offset < committed_offset and identity(value) not in produced:
                report.anomalies.append(
                    Anomaly(
                        kind=LOST_TRANSFORM,
                        detail={
                            "group": group,
                            "input": key,
                            "offset": offset,
                            "value": value,
                            "committed_offset": committed_offset,
                        },
                    )
                )


def _check_committed_offsets(history: list[Operation], report: Report) -> None:
    """A committed offset read back below the latest commit acknowledged before the read began
    is a commit the group lost (an acknowledged commit is durable) — unless a commit that may
    have applied since (any outcome, overlapping the read) set the lower offset: a client may
    commit an offset lower than its last, and the group must keep that one."""
    commits: dict[tuple[str, str, int], list[tuple[Operation, int]]] = defaultdict(list)
    for operation in history:
        if operation["f"] in ("commit", "txn") and operation["outcome"] != FAILED:
            for topic, partition, offset in operation.get("offsets", []):
                slot = (operation.get("group", ""), topic, int(partition))
                commits[slot].append((operation, int(offset)))
    for observation in (operation for operation in history if operation["f"] == "committed"):
        for topic, partition, offset in observation["offsets"]:
            slot = (observation["group"], topic, int(partition))
            acknowledged = [
                (commit, value)
                for commit, value in commits[slot]
                if commit["outcome"] == OK and commit["end"] <= observation["start"]
            ]
            if not acknowledged:
                continue
            latest, value = max(acknowledged, key=lambda entry: entry[0]["end"])
            possible = {value} | {
                other
                for commit, other in commits[slot]
                if commit["end"] > latest["end"] and commit["start"] <= observation["end"]
            }
            if int(offset) < value and int(offset) not in possible:
                report.anomalies.append(
                    Anomaly(
                        kind=COMMITTED_OFFSET_BACKWARDS,
                        detail={
                            "group": observation["group"],
                            "partition": (topic, partition),
                            "read": offset,
                            "read_at": observation["start"],
                            "acknowledged": value,
                            "acknowledged_at": latest["end"],
                            "by": latest["client"],
                        },
                    )
                )


def _check_replicas(history: list[Operation], report: Report) -> None:
    for operation in history:
        if operation["f"] == "replicas" and len(set(operation["digests"].values())) > 1:
            report.anomalies.append(
                Anomaly(
                    kind=REPLICA_DIVERGENCE,
                    detail={
                        "partition": (operation["topic"], operation["partition"]),
                        "high_watermark": operation["high_watermark"],
                        "digests": operation["digests"],
                    },
                )
            )


def _check_duplicates(finals: dict[str, dict[Key, FinalLog]], report: Report) -> None:
    topics = {key[0] for isolation in finals.values() for key in isolation}
    for topic in sorted(topics):
        keys = {key for isolation in finals.values() for key in isolation if key[0] == topic}
        seen: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for key in sorted(keys):
            final = _view(finals, key)
            assert final is not None
            for offset, value in final.ordered():
                seen[identity(value)].append((key[1], offset))
        counts = Counter({name: len(places) for name, places in seen.items()})
        for name, count in counts.items():
            if count > 1:
                report.anomalies.append(
                    Anomaly(
                        kind=DUPLICATED,
                        detail={"topic": topic, "identity": name, "at": seen[name]},
                    )
                )


def unavailability(history: list[Operation]) -> list[Unavailability]:
    """Per fault: the longest a written partition went without an acknowledged write, from the
    fault's start to the next fault's (or the run's last acknowledgement), measured per
    partition (a fault takes down only the partitions it touches)."""
    faults = [op for op in history if op["f"] == "fault" and op.get("phase", "start") == "start"]
    acknowledgements: dict[Key, list[float]] = defaultdict(list)
    failures: dict[Key, list[float]] = defaultdict(list)
    for operation in history:
        if operation["f"] != "send":
            continue
        key = (operation["topic"], int(operation["partition"]))
        if operation["outcome"] == OK:
            acknowledgements[key].append(operation["end"])
        else:
            failures[key].append(operation["end"])
    if not acknowledgements:
        return []
    run_end = max(max(times) for times in acknowledgements.values())
    results = []
    for index, fault in enumerate(faults):
        window_start = fault["start"]
        window_end = faults[index + 1]["start"] if index + 1 < len(faults) else run_end
        worst = 0.0
        for key, times in acknowledgements.items():
            inside = sorted(t for t in times if window_start <= t <= window_end)
            marks = [window_start, *inside]
            gaps = [later - earlier for earlier, later in itertools.pairwise(marks)]
            if not inside:
                gaps.append(window_end - window_start)
            for failed_at in (t for t in failures[key] if window_start <= t <= window_end):
                after = [t for t in inside if t >= failed_at]
                gaps.append((after[0] if after else window_end) - failed_at)
            worst = max(worst, *gaps)
        results.append(
            Unavailability(
                fault=fault["fault"],
                nodes=list(fault.get("nodes", [])),
                start=window_start,
                seconds=round(worst, 3),
            )
        )
    return results


def describe_violation(history: list[Operation], report: Report, *, limit: int = 20) -> str:
    """What a failing run prints: the seed, the fault schedule and the records involved."""
    meta = next((op for op in history if op["f"] == "meta"), {})
    lines = [
        f"chaos run INVALID: scenario {meta.get('scenario')!r}, seed {meta.get('seed')}",
        f"replay: MOLDAU_CHAOS_SEED={meta.get('seed')} "
        f"MOLDAU_CHAOS_SCENARIO={meta.get('scenario')} scripts/chaos.sh",
        f"settings: {meta.get('settings')}",
        f"schedule: {meta.get('schedule')}",
        "faults as run:",
    ]
    for fault in (op for op in history if op["f"] == "fault"):
        lines.append(
            f"  t={fault['start']:.2f}-{fault['end']:.2f} {fault['fault']} {fault.get('phase', '')}"
            f" nodes={fault.get('nodes')}"
            + (f" cuts={fault['cuts']}" if fault.get("cuts") else "")  # (source, destination)
            + (
                f" slow_links={fault['slow_links']} at {fault['rate_kbit']} kbit/s,"
                f" queue {fault['queue_ms']} ms"
                if fault.get("slow_links")
                else ""
            )
            + (f" offsets_s={fault['offsets_s']}" if fault.get("offsets_s") else "")
        )
    lines.append(f"summary: {report.summary()}")
    lines.append("anomalies:")
    for anomaly in report.anomalies[:limit]:
        lines.append(f"  {anomaly}")
    if len(report.anomalies) > limit:
        lines.append(f"  ... and {len(report.anomalies) - limit} more")
    return "\n".join(lines)


__all__ = ["FAILED", "OK", "UNKNOWN", "Anomaly", "Report", "check", "describe_violation"]
