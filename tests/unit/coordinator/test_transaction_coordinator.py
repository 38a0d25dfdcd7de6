"""The pure transaction coordinator: state transitions, epochs and fencing, timeouts, expiration,
and that replaying its records rebuilds the same state."""

from __future__ import annotations

from moldau.clock import ManualClock
from moldau.coordinator.transaction_coordinator import TransactionCoordinator
from moldau.coordinator.transaction_metadata import (
    TRANSACTION_VERSION_2,
    TransactionCoordinatorConfig,
    TransactionRecord,
    TransactionResult,
)
from moldau.coordinator.transaction_records import (
    TransactionState,
    decode_transaction_record,
    encode_transaction_record,
)
from moldau.protocol.errors import ErrorCode
from moldau.types import TopicPartition

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
CONFIG = TransactionCoordinatorConfig(
    transaction_state_log_num_partitions=1,
    transaction_max_timeout_ms=60_000,
    transactional_id_expiration_ms=3_600_000,
    remove_expired_transactional_ids_interval_ms=600_000,
)


class Harness:
    """Plays the runtime: keeps every record (through their bytes) and can reload a fresh core."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.log: list[TransactionRecord] = []
        self.core = self._fresh()
        self.core.finish_loading()

    def _fresh(self) -> TransactionCoordinator:
        return TransactionCoordinator(CONFIG, self.clock)

    def run(self, result: TransactionResult) -> TransactionResult:
        for key, value in result.records:
            decoded = decode_transaction_record(*encode_transaction_record(key, value))
            assert decoded is not None
            self.log.append(decoded)
        return result

    def reload(self) -> list[object]:
        self.core = self._fresh()
        for key, value in self.log:
            self.core.replay(key, value)
        return list(self.core.finish_loading())

    def init(self, transactional_id: str = "t", *, timeout_ms: int = 10_000, **kw: int) -> dict:
        result = self.core.init_producer_id(
            transactional_id=transactional_id, transaction_timeout_ms=timeout_ms, **kw
        )
        if result.needs_producer_id:
            result = self.core.init_producer_id(
                transactional_id=transactional_id,
                transaction_timeout_ms=timeout_ms,
                new_producer_id=1000 + len(self.log),
                **kw,
            )
        return self.run(result).response

    def add(self, producer_id: int, epoch: int, *tps: TopicPartition) -> TransactionResult:
        return self.run(
            self.core.add_partitions(
                transactional_id="t", producer_id=producer_id, producer_epoch=epoch, partitions=tps
            )
        )

    def end(
        self, producer_id: int, epoch: int, *, commit: bool, version: int = 1
    ) -> TransactionResult:
        return self.run(
            self.core.end_transaction(
                transactional_id="t",
                producer_id=producer_id,
                producer_epoch=epoch,
                committed=commit,
                transaction_version=version,
            )
        )

    def complete(self, result: TransactionResult) -> None:
        for markers in result.markers:
            self.run(self.core.complete_transaction(markers))

    def state(self, transactional_id: str = "t") -> TransactionState:
        return self.core.transactions[transactional_id].state


def test_first_init_allocates_a_producer_id_with_epoch_zero_and_later_ones_bump_it() -> None:
    h = Harness()
    first = h.init()
    assert first["error_code"] == ErrorCode.none and first["producer_epoch"] == 0
    second = h.init()
    assert second["producer_id"] == first["producer_id"]
    assert second["producer_epoch"] == 1
    assert h.state() == TransactionState.EMPTY


def test_timeout_above_the_maximum_is_refused() -> None:
    h = Harness()
    assert h.init(timeout_ms=60_001)["error_code"] == ErrorCode.invalid_transaction_timeout
    assert h.init(timeout_ms=0)["error_code"] == ErrorCode.invalid_transaction_timeout
    assert h.log == []


def test_commit_goes_through_prepare_to_complete_with_markers_for_every_partition() -> None:
    h = Harness()
    producer = h.init()
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    assert h.add(pid, epoch, TP0).response["partitions"] == {TP0: ErrorCode.none}
    assert h.add(pid, epoch, TP1).records  # a new partition is written
    assert not h.add(pid, epoch, TP1).records  # an already added one is not
    assert h.state() == TransactionState.ONGOING
    ended = h.end(pid, epoch, commit=True)
    assert ended.response["error_code"] == ErrorCode.none
    assert h.state() == TransactionState.PREPARE_COMMIT
    [markers] = ended.markers
    assert markers.committed and set(markers.partitions) == {TP0, TP1}
    # while markers are written, the producer's next steps wait
    assert h.add(pid, epoch, TP0).response["error_code"] == ErrorCode.concurrent_transactions
    h.complete(ended)
    assert h.state() == TransactionState.COMPLETE_COMMIT
    assert h.core.transactions["t"].partitions == set()
    # a retried EndTxn of the completed commit succeeds; an abort of it is refused
    assert h.end(pid, epoch, commit=True).response["error_code"] == ErrorCode.none
    assert h.end(pid, epoch, commit=False).response["error_code"] == ErrorCode.invalid_txn_state


def test_wrong_producer_id_or_epoch_is_refused() -> None:
    h = Harness()
    producer = h.init()
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    assert (
        h.add(pid + 1, epoch, TP0).response["error_code"] == ErrorCode.invalid_producer_id_mapping
    )
    assert h.add(pid, epoch + 1, TP0).response["error_code"] == ErrorCode.producer_fenced
    assert h.end(pid, epoch, commit=True).response["error_code"] == ErrorCode.invalid_txn_state


def test_init_during_an_ongoing_transaction_fences_it_by_aborting_with_a_bumped_epoch() -> None:
    h = Harness()
    old = h.init()
    pid, epoch = old["producer_id"], old["producer_epoch"]
    h.add(pid, epoch, TP0)
    fencing = h.run(h.core.init_producer_id(transactional_id="t", transaction_timeout_ms=10_000))
    assert fencing.response["error_code"] == ErrorCode.concurrent_transactions
    [markers] = fencing.markers
    assert not markers.committed and markers.producer_epoch == epoch + 1
    assert h.add(pid, epoch, TP0).response["error_code"] == ErrorCode.producer_fenced
    assert h.end(pid, epoch, commit=True).response["error_code"] == ErrorCode.producer_fenced
    h.complete(fencing)
    assert h.state() == TransactionState.COMPLETE_ABORT
    new = h.init()
    assert new["error_code"] == ErrorCode.none
    assert (new["producer_id"], new["producer_epoch"]) == (pid, epoch + 2)


def test_kip_360_bump_with_the_current_epoch_and_fencing_of_an_unknown_one() -> None:
    h = Harness()
    producer = h.init()
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    bumped = h.init(producer_id=pid, producer_epoch=epoch)
    assert bumped["producer_epoch"] == epoch + 1
    assert (
        h.init(producer_id=pid, producer_epoch=epoch + 5)["error_code"] == ErrorCode.producer_fenced
    )
    assert h.init(producer_id=pid + 7, producer_epoch=0)["error_code"] == ErrorCode.producer_fenced


def test_epoch_exhaustion_moves_to_a_new_producer_id() -> None:
    h = Harness()
    producer = h.init()
    pid = producer["producer_id"]
    metadata = h.core.transactions["t"]
    metadata.producer_epoch = 32766
    renewed = h.init()
    assert renewed["producer_id"] != pid and renewed["producer_epoch"] == 0
    assert h.core.transactions["t"].previous_producer_id == pid


def test_transaction_timeout_aborts_and_fences_the_producer() -> None:
    h = Harness()
    producer = h.init(timeout_ms=5_000)
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    h.add(pid, epoch, TP0, TP1)
    assert h.core.next_deadline() == h.clock.now_ms() + 5_000
    h.clock.advance(4_999)
    assert not h.run(h.core.tick()).markers
    h.clock.advance(1)
    aborted = h.run(h.core.tick())
    [markers] = aborted.markers
    assert not markers.committed and markers.producer_epoch == epoch + 1
    h.complete(aborted)
    assert h.state() == TransactionState.COMPLETE_ABORT
    assert h.end(pid, epoch, commit=True).response["error_code"] == ErrorCode.producer_fenced


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = Harness()
    h.init()
    h.clock.advance(
        CONFIG.transactional_id_expiration_ms + CONFIG.remove_expired_transactional_ids_interval_ms
    )
    expired = h.run(h.core.tick())
    assert expired.records == [(expired.records[0][0], None)]
    assert "t" not in h.core.transactions
    h.reload()
    assert "t" not in h.core.transactions


def test_transaction_version_2_bumps_the_epoch_on_every_end_and_refuses_a_stale_end() -> None:
    h = Harness()
    producer = h.init()
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    h.add(pid, epoch, TP0)
    ended = h.end(pid, epoch, commit=True, version=TRANSACTION_VERSION_2)
    assert ended.response["producer_epoch"] == epoch + 1
    assert ended.markers[0].producer_epoch == epoch + 1
    h.complete(ended)
    # a retry of that EndTxn (old epoch) is answered with the new epoch
    retry = h.end(pid, epoch, commit=True, version=TRANSACTION_VERSION_2)
    assert retry.response == {
        "error_code": ErrorCode.none,
        "producer_id": pid,
        "producer_epoch": epoch + 1,
    }
    # the next transaction: a delayed EndTxn(abort) of the old one must not end it
    h.add(pid, epoch + 1, TP1)
    stale = h.end(pid, epoch, commit=False, version=TRANSACTION_VERSION_2)
    assert stale.response["error_code"] == ErrorCode.producer_fenced
    assert h.state() == TransactionState.ONGOING


def test_transaction_version_2_moves_to_a_new_producer_id_when_the_epoch_runs_out() -> None:
    """Kafka's EndTxn on overflow: markers with the last epoch (fencing every earlier write),
    then the producer's new id at epoch 0, answered to the EndTxn and to its retries."""
    h = Harness()
    pid = h.init()["producer_id"]
    h.core.transactions["t"].producer_epoch = 32766  # (the last epoch that can be bumped to)
    h.add(pid, 32766, TP0)

    def end(**new: int) -> TransactionResult:
        return h.core.end_transaction(
            transactional_id="t",
            producer_id=pid,
            producer_epoch=32766,
            committed=True,
            transaction_version=TRANSACTION_VERSION_2,
            **new,
        )

    assert end().needs_producer_id
    ended = h.run(end(new_producer_id=5000))
    assert ended.response == {
        "error_code": ErrorCode.none,
        "producer_id": 5000,
        "producer_epoch": 0,
    }
    [markers] = ended.markers
    assert (markers.producer_id, markers.producer_epoch) == (pid, 32767)
    assert h.end(pid, 32766, commit=True, version=2).response["error_code"] == (
        ErrorCode.concurrent_transactions  # a retry while the markers are written
    )
    h.complete(ended)
    for core in (h.core, (h.reload(), h.core)[1]):
        metadata = core.transactions["t"]
        assert (metadata.producer_id, metadata.producer_epoch) == (5000, 0)
        assert metadata.previous_producer_id == pid
        assert metadata.state == TransactionState.COMPLETE_COMMIT
    assert h.end(pid, 32766, commit=True, version=2).response == {
        "error_code": ErrorCode.none,
        "producer_id": 5000,
        "producer_epoch": 0,
    }
    assert h.end(pid, 32766, commit=False, version=2).response["error_code"] == (
        ErrorCode.invalid_txn_state
    )
    assert h.add(5000, 0, TP1).response["error_code"] == ErrorCode.none
    assert h.state() == TransactionState.ONGOING


def test_reload_rebuilds_the_state_and_resumes_markers_of_prepared_transactions() -> None:
    h = Harness()
    producer = h.init()
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    h.add(pid, epoch, TP0, TP1)
    h.end(pid, epoch, commit=False)  # PrepareAbort written, markers never completed
    pending = h.reload()
    assert h.state() == TransactionState.PREPARE_ABORT
    assert len(pending) == 1
    assert set(pending[0].partitions) == {TP0, TP1}  # type: ignore[attr-defined]


def test_verify_only_reports_partitions_outside_the_transaction() -> None:
    h = Harness()
    producer = h.init()
    pid, epoch = producer["producer_id"], producer["producer_epoch"]
    h.add(pid, epoch, TP0)
    verified = h.core.add_partitions(
        transactional_id="t",
        producer_id=pid,
        producer_epoch=epoch,
        partitions=[TP0, TP1],
        verify_only=True,
    )
    assert not verified.records
    assert verified.response["partitions"] == {
        TP0: ErrorCode.none,
        TP1: ErrorCode.invalid_txn_state,
    }


def test_list_and_describe() -> None:
    h = Harness()
    producer = h.init()
    h.add(producer["producer_id"], producer["producer_epoch"], TP0)
    described = h.core.describe("t")
    assert described["transaction_state"] == "Ongoing"
    assert described["topics"] == [{"topic": "orders", "partitions": [0]}]
    assert h.core.describe("nope")["error_code"] == ErrorCode.transactional_id_not_found
    assert [
        t["transactional_id"] for t in h.core.list_transactions(states={TransactionState.ONGOING})
    ] == ["t"]
    assert h.core.list_transactions(states={TransactionState.EMPTY}) == []
    assert h.core.list_transactions(pattern="x.*") == []
    h.clock.advance(1000)
    assert len(h.core.list_transactions(min_duration_ms=1000)) == 1
    assert h.core.list_transactions(min_duration_ms=1001) == []
