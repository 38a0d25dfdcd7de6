"""The checker finds each anomaly in a crafted history, and nothing in a clean one."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos import checker
from tests.chaos.history import FAILED, OK, UNKNOWN, History, read_history


def send(value, *, partition=0, outcome=OK, offset=None, seq=0, client="p1", at=1.0, topic="t"):
    return {"f": "send", "client": client, "topic": topic, "partition": partition,
            "value": value, "outcome": outcome, "offset": offset, "seq": seq,
            "start": at - 0.01, "end": at, "index": seq}  # fmt: skip


def final(records, *, partition=0, topic="t", isolation=checker.READ_UNCOMMITTED):
    return {"f": "final", "topic": topic, "partition": partition, "isolation": isolation,
            "records": [[offset, value] for offset, value in records],
            "start": 99.0, "end": 99.0}  # fmt: skip


def clean_history():
    return [
        {"f": "meta", "seed": 7, "scenario": "crafted", "schedule": [], "settings": {}},
        send("a", offset=0, seq=0, at=1.0),
        send("b", offset=1, seq=1, at=1.1),
        send("c", offset=2, seq=2, at=1.2),
        send("d", outcome=UNKNOWN, seq=3, at=1.3),  # may or may not be there: both fine
        final([(0, "a"), (1, "b"), (2, "c")]),
    ]


def kinds(report):
    return sorted({anomaly.kind for anomaly in report.anomalies})


def test_a_clean_history_is_valid() -> None:
    report = checker.check(clean_history())
    assert report.valid, report.anomalies
    assert (report.acknowledged, report.unknown) == (3, 1)


def test_an_acknowledged_record_missing_from_the_log_is_lost() -> None:
    history = clean_history()
    history[-1] = final([(0, "a"), (1, "c")])
    report = checker.check(history)
    assert kinds(report) == [checker.LOST, checker.OFFSET_MISMATCH]
    assert report.of_kind(checker.LOST)[0].detail["value"] == "b"
    assert report.of_kind(checker.OFFSET_MISMATCH)[0].detail["value"] == "c"


def test_the_same_record_twice_is_a_duplicate() -> None:
    history = clean_history()
    history[-1] = final([(0, "a"), (1, "b"), (2, "c"), (3, "b")])
    report = checker.check(history)
    assert kinds(report) == [checker.DUPLICATED]
    assert report.of_kind(checker.DUPLICATED)[0].detail["at"] == [(0, 1), (0, 3)]


def test_duplicates_count_across_partitions_of_a_topic() -> None:
    history = clean_history()
    history.append(final([(0, "a")], partition=1))
    assert kinds(checker.check(history)) == [checker.DUPLICATED]


def test_records_out_of_the_order_their_producer_sent_them_are_reordered() -> None:
    history = clean_history()
    history[1:4] = [
        send("a", offset=0, seq=0),
        send("b", offset=2, seq=1),
        send("c", offset=1, seq=2),
    ]
    history[-1] = final([(0, "a"), (1, "c"), (2, "b")])
    report = checker.check(history)
    assert kinds(report) == [checker.REORDERED]
    assert report.of_kind(checker.REORDERED)[0].detail["value"] == "b"


def test_a_record_reported_failed_or_never_sent_is_unexpected() -> None:
    history = clean_history()
    history[4] = send("d", outcome=FAILED, seq=3)
    history[-1] = final([(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "zz")])
    report = checker.check(history)
    assert kinds(report) == [checker.UNEXPECTED]
    assert [a.detail["value"] for a in report.of_kind(checker.UNEXPECTED)] == ["d", "zz"]


def test_a_written_partition_never_read_back_is_incomplete() -> None:
    history = clean_history()[:-1]
    assert kinds(checker.check(history)) == [checker.INCOMPLETE]


def poll(records, *, client="c1", session=1, isolation=checker.READ_UNCOMMITTED, at=2.0):
    return {"f": "poll", "client": client, "session": session, "isolation": isolation,
            "records": [["t", 0, offset, value] for offset, value in records],
            "start": at, "end": at}  # fmt: skip


def test_a_read_the_final_log_contradicts_is_inconsistent() -> None:
    history = clean_history()
    history.insert(-1, poll([(0, "a"), (1, "x")]))
    report = checker.check(history)
    assert kinds(report) == [checker.INCONSISTENT_READ]
    assert report.of_kind(checker.INCONSISTENT_READ)[0].detail["log_holds"] == "b"


def test_offsets_going_back_within_one_consumer_session() -> None:
    history = clean_history()
    history.insert(-1, poll([(0, "a"), (1, "b")], isolation=checker.READ_COMMITTED))
    history.insert(-1, poll([(2, "c"), (1, "b")], isolation=checker.READ_COMMITTED, at=3.0))
    history.insert(-1, poll([(0, "a")], session=2, at=4.0))  # a new session may start over
    report = checker.check(history)
    assert kinds(report) == [checker.READ_BACKWARDS]
    assert report.of_kind(checker.READ_BACKWARDS)[0].detail["after"] == (2, "c")


def transaction(writes, *, outcome=OK, client="job", offsets=(), group="g", at=2.0):
    return {"f": "txn", "client": client, "outcome": outcome, "group": group,
            "writes": [list(write) for write in writes],
            "offsets": [list(offset) for offset in offsets], "start": at - 0.1, "end": at}  # fmt: skip


def transactional_history():
    """A job read a, b, c from t and wrote them to out in two transactions, one aborted (b,
    first attempt) and retried."""
    return [
        *clean_history()[:-1],
        final([(0, "a"), (1, "b"), (2, "c")]),
        final([(0, "a"), (1, "b"), (2, "c")], isolation=checker.READ_COMMITTED),
        transaction([("out", 0, "a|1")], offsets=[("t", 0, 1)], at=2.0),
        transaction([("out", 0, "b|2"), ("out", 1, "c|2")], outcome=FAILED, at=3.0),
        transaction([("out", 0, "b|3"), ("out", 1, "c|3")], offsets=[("t", 0, 3)], at=4.0),
        final([(0, "a|1"), (1, "b|2"), (3, "b|3")], topic="out"),
        final([(0, "a|1"), (3, "b|3")], topic="out", isolation=checker.READ_COMMITTED),
        final([(0, "c|2"), (2, "c|3")], topic="out", partition=1),
        final([(2, "c|3")], topic="out", partition=1, isolation=checker.READ_COMMITTED),
    ]


def test_a_clean_transactional_history_is_valid() -> None:
    report = checker.check(transactional_history())
    assert report.valid, report.anomalies
    assert (report.transactions_committed, report.transactions_aborted) == (2, 1)


def test_read_committed_showing_an_aborted_record() -> None:
    history = transactional_history()
    history.append(
        {"f": "poll", "client": "reader", "session": 1, "isolation": checker.READ_COMMITTED,
         "records": [["out", 0, 0, "a|1"], ["out", 0, 1, "b|2"]], "start": 5.0, "end": 5.0}
    )  # fmt: skip
    report = checker.check(history)
    assert kinds(report) == [checker.ABORTED_READ]
    assert report.of_kind(checker.ABORTED_READ)[0].detail["value"] == "b|2"


def test_an_aborted_transaction_visible_in_the_end() -> None:
    history = transactional_history()
    history[-3] = final([(0, "a|1"), (1, "b|2"), (3, "b|3")], topic="out",
                        isolation=checker.READ_COMMITTED)  # fmt: skip
    history[-1] = final([(0, "c|2"), (2, "c|3")], topic="out", partition=1,
                        isolation=checker.READ_COMMITTED)  # fmt: skip
    report = checker.check(history)
    assert checker.ABORTED_READ in kinds(report)
    assert checker.DUPLICATED in kinds(report)  # b and c transformed twice, visibly


def test_a_transaction_seen_partially() -> None:
    history = transactional_history()
    history[-1] = final([], topic="out", partition=1, isolation=checker.READ_COMMITTED)
    report = checker.check(history)
    assert checker.PARTIAL_TRANSACTION in kinds(report)
    detail = report.of_kind(checker.PARTIAL_TRANSACTION)[0].detail
    assert (detail["visible"], detail["missing"]) == (["b|3"], ["c|3"])


def test_a_committed_transaction_missing_entirely_is_lost() -> None:
    history = transactional_history()
    history[-3] = final([(0, "a|1")], topic="out", isolation=checker.READ_COMMITTED)
    history[-1] = final([], topic="out", partition=1, isolation=checker.READ_COMMITTED)
    report = checker.check(history)
    assert checker.LOST in kinds(report)
    assert checker.LOST_TRANSFORM in kinds(report)  # b and c below the committed offset 3


def test_an_input_below_the_committed_offset_never_transformed() -> None:
    history = transactional_history()
    history[-5] = transaction([("out", 0, "b|3")], offsets=[("t", 0, 3)], at=4.0)
    history[-2] = final([(0, "c|2")], topic="out", partition=1)
    history[-1] = final([], topic="out", partition=1, isolation=checker.READ_COMMITTED)
    report = checker.check(history)
    assert kinds(report) == [checker.LOST_TRANSFORM]
    assert report.of_kind(checker.LOST_TRANSFORM)[0].detail["value"] == "c"


def test_a_committed_group_offset_read_back_lower_than_acknowledged() -> None:
    history = clean_history()
    history += [
        {"f": "commit", "client": "c1", "group": "g", "offsets": [["t", 0, 2]], "outcome": OK,
         "start": 2.0, "end": 2.1},
        {"f": "commit", "client": "c1", "group": "g", "offsets": [["t", 0, 3]],
         "outcome": UNKNOWN, "start": 2.2, "end": 2.3},
        {"f": "committed", "client": "c1", "group": "g", "offsets": [["t", 0, 2]],
         "start": 3.0, "end": 3.0},
    ]  # fmt: skip
    assert checker.check(history).valid  # an unknown commit may or may not have applied
    history.append(
        {"f": "committed", "client": "c2", "group": "g", "offsets": [["t", 0, 1]],
         "start": 4.0, "end": 4.0}
    )  # fmt: skip
    report = checker.check(history)
    assert kinds(report) == [checker.COMMITTED_OFFSET_BACKWARDS]
    assert report.of_kind(checker.COMMITTED_OFFSET_BACKWARDS)[0].detail["acknowledged"] == 2


def test_a_client_lowering_its_own_commit_is_no_anomaly() -> None:
    history = clean_history()
    history += [
        {"f": "commit", "client": "c1", "group": "g", "offsets": [["t", 0, 3]], "outcome": OK,
         "start": 2.0, "end": 2.1},
        {"f": "commit", "client": "c1", "group": "g", "offsets": [["t", 0, 1]], "outcome": OK,
         "start": 2.2, "end": 2.3},
        {"f": "committed", "client": "c1", "group": "g", "offsets": [["t", 0, 1]],
         "start": 3.0, "end": 3.0},
    ]  # fmt: skip
    assert checker.check(history).valid
    history[-1] = {"f": "committed", "client": "c1", "group": "g", "offsets": [["t", 0, 0]],
                   "start": 3.0, "end": 3.0}  # fmt: skip
    assert kinds(checker.check(history)) == [checker.COMMITTED_OFFSET_BACKWARDS]


def test_replicas_differing_below_the_high_watermark() -> None:
    history = clean_history()
    history.append({"f": "replicas", "topic": "t", "partition": 0, "high_watermark": 3,
                    "digests": {"1": "aa", "2": "aa", "3": "aa"}})  # fmt: skip
    assert checker.check(history).valid
    history.append({"f": "replicas", "topic": "t", "partition": 0, "high_watermark": 3,
                    "digests": {"1": "aa", "2": "ab", "3": "aa"}})  # fmt: skip
    assert kinds(checker.check(history)) == [checker.REPLICA_DIVERGENCE]


def test_a_leader_changed_under_a_clock_jump_is_a_spurious_change() -> None:
    history = clean_history()
    history.insert(-1, {"f": "disturbance", "fault": "clock-jump", "nodes": [2],
                        "change": "t-0 leader 2 -> 1", "start": 5.0, "end": 5.0})  # fmt: skip
    report = checker.check(history)
    assert kinds(report) == [checker.SPURIOUS_CHANGE]
    assert report.of_kind(checker.SPURIOUS_CHANGE)[0].detail["change"] == "t-0 leader 2 -> 1"


def test_acks_1_tolerates_loss_but_not_duplicates() -> None:
    history = clean_history()
    history[-1] = final([(0, "a"), (1, "b")])
    assert checker.check(history, tolerate=[checker.LOST]).valid
    history[-1] = final([(0, "a"), (1, "b"), (2, "c"), (3, "a")])
    assert not checker.check(history, tolerate=[checker.LOST]).valid


def test_unavailability_runs_from_the_fault_to_the_next_acknowledgement() -> None:
    history = [
        send("a", offset=0, seq=0, at=1.0),
        {"f": "fault", "fault": "kill", "nodes": [2], "phase": "start", "start": 1.5, "end": 1.5},
        send("b", offset=1, seq=1, at=1.6),
        send("x", outcome=UNKNOWN, seq=2, at=2.0),
        send("c", offset=2, seq=3, at=5.5),  # 3.5 s after the failure, 3.9 s after b
        send("d", offset=0, seq=4, at=1.7, partition=1),
        send("e", offset=1, seq=5, at=5.6, partition=1),
        {"f": "fault", "fault": "pause", "nodes": [1], "phase": "start", "start": 6.0, "end": 6.0},
        send("f", offset=3, seq=6, at=6.5),
        send("g", offset=2, seq=7, at=6.6, partition=1),
    ]
    results = checker.unavailability(history)
    assert [(r.fault, r.seconds) for r in results] == [("kill", 3.9), ("pause", 0.6)]


def test_a_violation_prints_the_seed_the_schedule_and_the_records() -> None:
    history = clean_history()
    history.insert(1, {"f": "fault", "fault": "kill", "nodes": [1], "phase": "start",
                       "start": 0.5, "end": 0.6})  # fmt: skip
    history[-1] = final([(0, "a"), (1, "c")])
    text = checker.describe_violation(history, checker.check(history))
    assert "seed 7" in text and "MOLDAU_CHAOS_SEED=7" in text
    assert "kill start nodes=[1]" in text
    assert "'value': 'b'" in text


def test_a_history_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        history.record("send", client="p1", topic="t", partition=0, value="a", outcome=OK)
        history.record("fault", fault="kill", nodes=[1], phase="start")
    operations = read_history(path)
    assert [op["f"] for op in operations] == ["send", "fault"]
    assert operations[0]["index"] == 0 and operations[1]["start"] >= operations[0]["end"]
    assert json.loads(path.read_text().splitlines()[0])["value"] == "a"


def recreated_history():
    """`t` written, deleted, created again and written again: the final log holds the second
    incarnation (from offset 0), with a record sent before and retried into it."""
    return [
        {"f": "meta", "seed": 7, "scenario": "crafted", "schedule": [], "settings": {}},
        send("a", offset=0, seq=0, at=1.0),
        send("b", offset=1, seq=1, at=1.1),
        send("c", outcome=UNKNOWN, seq=2, at=2.5),  # sent at 2.49, while the topic was gone
        {"f": "topic", "topic": "t", "action": "deleted", "start": 2.0, "end": 2.2},
        {"f": "topic", "topic": "t", "action": "created", "start": 3.0, "end": 3.2},
        send("d", offset=1, seq=3, at=3.5),
        send("e", offset=2, seq=4, at=3.6),
        final([(0, "c"), (1, "d"), (2, "e")]),
    ]


def test_records_of_a_deleted_incarnation_are_not_lost() -> None:
    report = checker.check(recreated_history())
    assert report.valid, report.anomalies
    assert report.acknowledged == 4


def test_a_record_acknowledged_after_the_recreation_must_be_in_the_log() -> None:
    history = recreated_history()
    history[-1] = final([(0, "c"), (1, "d")])
    report = checker.check(history)
    assert kinds(report) == [checker.LOST]
    assert report.of_kind(checker.LOST)[0].detail["value"] == "e"


def test_a_record_of_the_deleted_incarnation_in_the_recreated_topic_is_resurrected() -> None:
    history = recreated_history()
    history[-1] = final([(0, "a"), (1, "d"), (2, "e")])
    report = checker.check(history)
    assert kinds(report) == [checker.RESURRECTED]
    assert report.of_kind(checker.RESURRECTED)[0].detail["value"] == "a"


def test_a_recreated_topic_whose_log_does_not_start_at_offset_0_is_resurrected() -> None:
    history = recreated_history()
    history[-3:] = [
        send("d", offset=2, seq=3, at=3.5),
        send("e", offset=3, seq=4, at=3.6),
        final([(2, "d"), (3, "e")]),
    ]
    report = checker.check(history)
    assert kinds(report) == [checker.RESURRECTED]
    assert report.of_kind(checker.RESURRECTED)[0].detail["first_offset"] == 2


def test_a_topic_deleted_again_and_not_recreated_holds_no_record_to_check() -> None:
    history = recreated_history()
    history.insert(-1, {"f": "topic", "topic": "t", "action": "deleted", "start": 4.0, "end": 4.1})
    history[-1] = final([])
    assert checker.check(history).valid
