"""`TransactionCoordinator`: the transactions of one `__transaction_state` partition, without I/O
(Kafka's TransactionCoordinator and TransactionStateManager for one partition).

Operations return `TransactionResult(records, response, markers)`; state changes only by
`replay(key, value)`, which operations call on the records they return. Transitions (Kafka's
TransactionState):

    Empty | CompleteCommit | CompleteAbort --AddPartitionsToTxn/AddOffsetsToTxn--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, InitProducerId (fence)--> PrepareAbort --> CompleteAbort
    Empty | Complete* --InitProducerId--> Empty (epoch + 1, or a new producer id at the limit)
    Empty | Complete* --transactional.id.expiration.ms idle--> Dead (tombstone)

PrepareEpochFence is Kafka's in-memory step of a fence; here the fence is written directly as a
PrepareAbort with the bumped epoch. Invariants: a Prepare* state is left only by completing its
markers; every epoch bump is written before it is answered; a request with another producer id
gets INVALID_PRODUCER_ID_MAPPING and one with another epoch PRODUCER_FENCED (handlers map it to
INVALID_PRODUCER_EPOCH for versions before KIP-588). With transaction version 2 (EndTxn v5+,
KIP-890) every EndTxn bumps the epoch, so a delayed EndTxn of an older transaction is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from moldau.clock import Clock
from moldau.coordinator.result import Timers
from moldau.coordinator.transaction_metadata import (
    MAX_PRODUCER_EPOCH,
    TRANSACTION_VERSION_2,
    MarkerRequest,
    TransactionCoordinatorConfig,
    TransactionMetadata,
    TransactionRecord,
    TransactionResult,
    error_result,
)
from moldau.coordinator.transaction_records import (
    TransactionLogKey,
    TransactionLogValue,
    TransactionState,
)
from moldau.protocol.errors import ErrorCode
from moldau.types import TopicPartition

State = TransactionState
_COMPLETE = (State.EMPTY, State.COMPLETE_COMMIT, State.COMPLETE_ABORT)
_PREPARE = (State.PREPARE_COMMIT, State.PREPARE_ABORT, State.PREPARE_EPOCH_FENCE)
EXPIRATION_TIMER = ("expire-transactional-ids",)
LOADING = ErrorCode.coordinator_load_in_progress


def _timeout_timer(transactional_id: str) -> tuple[str, str]:
    return ("transaction-timeout", transactional_id)


class TransactionCoordinator:
    def __init__(self, config: TransactionCoordinatorConfig, clock: Clock) -> None:
        self.config = config
        self._clock = clock
        self.transactions: dict[str, TransactionMetadata] = {}
        self._timers = Timers()
        self.loading = True

    # ------------------------------------------------------------------------------ replay

    def replay(self, key: TransactionLogKey, value: TransactionLogValue | None) -> None:
        transactional_id = key.transactional_id
        previous = self.transactions.get(transactional_id)
        if value is None or value.state == State.DEAD:
            self.transactions.pop(transactional_id, None)
            self._timers.cancel(_timeout_timer(transactional_id))
            return
        metadata = TransactionMetadata.from_value(transactional_id, value, previous)
        self.transactions[transactional_id] = metadata
        if metadata.state == State.ONGOING:
            deadline = metadata.start_timestamp_ms + metadata.transaction_timeout_ms
            self._timers.schedule(_timeout_timer(transactional_id), deadline)
        else:
            self._timers.cancel(_timeout_timer(transactional_id))

    def finish_loading(self) -> list[MarkerRequest]:
        """Serve; returns the markers of transactions loaded half-way through completion."""
        self.loading = False
        self._timers.schedule(
            EXPIRATION_TIMER,
            self._clock.now_ms() + self.config.remove_expired_transactional_ids_interval_ms,
        )
        return [
            _markers_for(metadata)
            for metadata in self.transactions.values()
            if metadata.state in (State.PREPARE_COMMIT, State.PREPARE_ABORT)
        ]

    def _write(self, result: TransactionResult, metadata: TransactionMetadata) -> None:
        key = TransactionLogKey(metadata.transactional_id)
        value = metadata.to_value()
        record: TransactionRecord = (key, value)
        result.records.append(record)
        self.replay(key, value)

    # ------------------------------------------------------------------------- InitProducerId

    def init_producer_id(
        self,
        *,
        transactional_id: str,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
        new_producer_id: int | None = None,
    ) -> TransactionResult:
        """Response fields: error_code, producer_id, producer_epoch."""
        refused = {"producer_id": -1, "producer_epoch": -1}
        if self.loading:
            return error_result(LOADING, **refused)
        if not transactional_id:
            return error_result(ErrorCode.invalid_request, **refused)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return error_result(ErrorCode.invalid_transaction_timeout, **refused)
        now = self._clock.now_ms()
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            if new_producer_id is None:
                return TransactionResult(needs_producer_id=True)
            created = TransactionMetadata(
                transactional_id=transactional_id,
                producer_id=new_producer_id,
                producer_epoch=0,
                transaction_timeout_ms=transaction_timeout_ms,
                last_update_timestamp_ms=now,
            )
            result = TransactionResult()
            self._write(result, created)
            result.response = _producer_answer(new_producer_id, 0)
            return result
        if metadata.state in _PREPARE:
            return error_result(ErrorCode.concurrent_transactions, **refused)
        if producer_id >= 0:  # KIP-360: a producer bumping its own epoch
            # A retry (the epoch before the last bump) is bumped once more rather than answered
            # with the current epoch: that epoch may be one only markers were written with.
            own = producer_id == metadata.producer_id and producer_epoch in (
                metadata.producer_epoch,
                metadata.last_producer_epoch,
            )
            if not own and producer_id != metadata.previous_producer_id:
                return error_result(ErrorCode.producer_fenced, **refused)
        if metadata.state == State.ONGOING:
            # Fence the current producer: abort its transaction with a bumped epoch. The client
            # retries on CONCURRENT_TRANSACTIONS and gets the next epoch once the abort completed.
            result = self._abort_with_bumped_epoch(metadata, now)
            result.response = {"error_code": ErrorCode.concurrent_transactions, **refused}
            return result
        if metadata.producer_epoch >= MAX_PRODUCER_EPOCH - 1:
            if new_producer_id is None:
                return TransactionResult(needs_producer_id=True)
            bumped = metadata.copy(
                producer_id=new_producer_id,
                producer_epoch=0,
                previous_producer_id=metadata.producer_id,
                last_producer_epoch=-1,
            )
        else:
            bumped = metadata.copy(producer_epoch=metadata.producer_epoch + 1)
        bumped.state = State.EMPTY
        bumped.partitions = set()
        bumped.transaction_timeout_ms = transaction_timeout_ms
        bumped.start_timestamp_ms = -1
        bumped.last_update_timestamp_ms = now
        result = TransactionResult()
        self._write(result, bumped)
        result.response = _producer_answer(bumped.producer_id, bumped.producer_epoch)
        return result

    def _abort_with_bumped_epoch(
        self, metadata: TransactionMetadata, now: int
    ) -> TransactionResult:
        epoch = metadata.producer_epoch
        fenced = metadata.copy(
            producer_epoch=min(epoch + 1, MAX_PRODUCER_EPOCH - 1),
            state=State.PREPARE_ABORT,
            last_update_timestamp_ms=now,
        )
        result = TransactionResult()
        self._write(result, fenced)
        result.markers.append(_markers_for(self.transactions[fenced.transactional_id]))
        return result

    # ------------------------------------------------------------------- AddPartitionsToTxn

    def _check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[TransactionMetadata | None, ErrorCode]:
        if self.loading:
            return None, LOADING
        metadata = self.transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return None, ErrorCode.invalid_producer_id_mapping
        if metadata.producer_epoch != producer_epoch:
            return None, ErrorCode.producer_fenced
        return metadata, ErrorCode.none

    def add_partitions(
        self,
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        verify_only: bool = False,
    ) -> TransactionResult:
        """Response: error_code and `partitions` {tp: code} (one code for all, as Kafka does)."""
        wanted = set(partitions)
        metadata, code = self._check_producer(transactional_id, producer_id, producer_epoch)
        if metadata is not None and metadata.state in _PREPARE:
            code = ErrorCode.concurrent_transactions
        if code != ErrorCode.none or metadata is None:
            return error_result(code, partitions=dict.fromkeys(wanted, code))
        if verify_only:
            is_ongoing = metadata.state == State.ONGOING
            return TransactionResult(
                response={
                    "error_code": ErrorCode.none,
                    "partitions": {
                        tp: ErrorCode.none
                        if is_ongoing and tp in metadata.partitions
                        else ErrorCode.invalid_txn_state
                        for tp in wanted
                    },
                }
            )
        result = TransactionResult(
            response={"error_code": ErrorCode.none, "partitions": dict.fromkeys(wanted, 0)}
        )
        if metadata.state == State.ONGOING and wanted <= metadata.partitions:
            return result
        now = self._clock.now_ms()
        ongoing = metadata.copy(state=State.ONGOING, last_update_timestamp_ms=now)
        if metadata.state != State.ONGOING:
            ongoing.partitions = set(wanted)
            ongoing.start_timestamp_ms = now
        else:
            ongoing.partitions |= wanted
        self._write(result, ongoing)
        return result

    # ------------------------------------------------------------------------------ EndTxn

    def end_transaction(
        self,
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        transaction_version: int = 0,
        new_producer_id: int | None = None,
    ) -> TransactionResult:
        """Response fields: error_code, producer_id, producer_epoch (the id and epoch to use
        next). Under transaction version 2 an epoch that cannot be bumped again asks for a new
        producer id (`needs_producer_id`: call again with `new_producer_id`)."""
        if self.loading:
            return error_result(LOADING, producer_id=-1, producer_epoch=-1)
        metadata = self.transactions.get(transactional_id)
        version_2 = transaction_version >= TRANSACTION_VERSION_2
        if (
            metadata is not None
            and version_2
            and metadata.previous_producer_id == producer_id != metadata.producer_id
            and producer_epoch == MAX_PRODUCER_EPOCH - 1
            and metadata.producer_epoch == 0
        ):
            # A retry of the EndTxn that moved the producer to a new id: done if it completed.
            done = State.COMPLETE_COMMIT if committed else State.COMPLETE_ABORT
            answer = {"producer_id": metadata.producer_id, "producer_epoch": 0}
            if metadata.state != done:
                return error_result(ErrorCode.invalid_txn_state, **answer)
            return TransactionResult(response={"error_code": ErrorCode.none, **answer})
        if metadata is None or metadata.producer_id != producer_id:
            return error_result(
                ErrorCode.invalid_producer_id_mapping, producer_id=-1, producer_epoch=-1
            )
        target = State.PREPARE_COMMIT if committed else State.PREPARE_ABORT
        done = State.COMPLETE_COMMIT if committed else State.COMPLETE_ABORT
        answer = _next_producer(metadata)
        is_retry = version_2 and producer_epoch == metadata.last_producer_epoch >= 0
        if producer_epoch != metadata.producer_epoch and not is_retry:
            return error_result(ErrorCode.producer_fenced, producer_id=-1, producer_epoch=-1)
        if is_retry:  # KIP-890: the bump of this EndTxn was already written
            if metadata.state == done:
                return TransactionResult(response={"error_code": ErrorCode.none, **answer})
            if metadata.state == target:
                return error_result(ErrorCode.concurrent_transactions, **answer)
            return error_result(ErrorCode.producer_fenced, producer_id=-1, producer_epoch=-1)
        if metadata.state == State.ONGOING or (
            version_2 and not committed and metadata.state in _COMPLETE
        ):
            if version_2 and metadata.producer_epoch >= MAX_PRODUCER_EPOCH - 1:
                if new_producer_id is None:
                    return TransactionResult(needs_producer_id=True)
                return self._prepare(metadata, target, version_2, new_producer_id)
            return self._prepare(metadata, target, version_2)
        if metadata.state == done and not version_2:
            return TransactionResult(response={"error_code": ErrorCode.none, **answer})
        if metadata.state == target:
            return error_result(ErrorCode.concurrent_transactions, **answer)
        if metadata.state in _PREPARE:
            return error_result(ErrorCode.concurrent_transactions, **answer)
        return error_result(ErrorCode.invalid_txn_state, **answer)

    def _prepare(
        self,
        metadata: TransactionMetadata,
        target: State,
        version_2: bool,
        new_producer_id: int | None = None,
    ) -> TransactionResult:
        """Prepare* (written, then the markers). Under transaction version 2 the epoch is bumped
        first; at the last epoch (`new_producer_id` given) the markers carry MAX_PRODUCER_EPOCH,
        which fences every earlier write, and completion moves the producer to the new id at
        epoch 0, as Kafka does on overflow."""
        now = self._clock.now_ms()
        prepared = metadata.copy(state=target, last_update_timestamp_ms=now)
        if version_2:
            prepared.client_transaction_version = TRANSACTION_VERSION_2
            if new_producer_id is not None:
                prepared.producer_epoch = MAX_PRODUCER_EPOCH
                prepared.next_producer_id = new_producer_id
            else:
                prepared.producer_epoch = metadata.producer_epoch + 1
        result = TransactionResult()
        self._write(result, prepared)
        loaded = self.transactions[metadata.transactional_id]
        result.markers.append(_markers_for(loaded))
        result.response = {"error_code": ErrorCode.none, **_next_producer(loaded)}
        return result

    def complete_transaction(self, markers: MarkerRequest) -> TransactionResult:
        """Every marker of `markers` is written: move Prepare* to Complete*."""
        result = TransactionResult()
        metadata = self.transactions.get(markers.transactional_id)
        expected = State.PREPARE_COMMIT if markers.committed else State.PREPARE_ABORT
        if (
            metadata is None
            or metadata.state != expected
            or metadata.producer_id != markers.producer_id
            or metadata.producer_epoch != markers.producer_epoch
        ):
            return result
        completed = metadata.copy(
            state=State.COMPLETE_COMMIT if markers.committed else State.COMPLETE_ABORT,
            partitions=set(),
            last_update_timestamp_ms=self._clock.now_ms(),
        )
        if metadata.next_producer_id >= 0:  # the epoch ran out: the producer's new id
            completed.previous_producer_id = metadata.producer_id
            completed.producer_id = metadata.next_producer_id
            completed.producer_epoch = 0
            completed.next_producer_id = -1
        self._write(result, completed)
        return result

    # --------------------------------------------------------------------------- timers

    def next_deadline(self) -> int | None:
        return self._timers.next_deadline()

    def timers_now_ms(self) -> int:
        """The clock the timers run on: the wall clock, as Kafka measures transaction.timeout.ms
        from the transaction's start timestamp (a forward step times out the transactions in
        progress, a backward one holds them open longer)."""
        return self._clock.now_ms()

    def tick(self) -> TransactionResult:
        """Abort transactions past `transaction.timeout.ms` (fencing their producer, as Kafka
        does) and remove ids idle for `transactional.id.expiration.ms`."""
        now = self._clock.now_ms()
        result = TransactionResult()
        for key in self._timers.pop_expired(now):
            if key == EXPIRATION_TIMER:
                result.merge(self._expire_transactional_ids(now))
                interval = self.config.remove_expired_transactional_ids_interval_ms
                self._timers.schedule(EXPIRATION_TIMER, now + interval)
                continue
            assert isinstance(key, tuple)
            metadata = self.transactions.get(str(key[1]))
            if metadata is not None and metadata.state == State.ONGOING:
                result.merge(self._abort_with_bumped_epoch(metadata, now))
        return result

    def _expire_transactional_ids(self, now: int) -> TransactionResult:
        result = TransactionResult()
        expiration = self.config.transactional_id_expiration_ms
        for transactional_id, metadata in list(self.transactions.items()):
            if (
                metadata.state in _COMPLETE
                and metadata.last_update_timestamp_ms + expiration <= now
            ):
                key = TransactionLogKey(transactional_id)
                result.records.append((key, None))
                self.replay(key, None)
        return result

    # -------------------------------------------------------------------------- describe

    def describe(self, transactional_id: str) -> dict[str, object]:
        """One DescribeTransactions entry (KIP-664)."""
        metadata = None if self.loading else self.transactions.get(transactional_id)
        if metadata is None:
            return {
                "error_code": LOADING if self.loading else ErrorCode.transactional_id_not_found,
                "transactional_id": transactional_id,
                "transaction_state": "",
                "transaction_timeout": 0,
                "transaction_start_time": -1,
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
        by_topic: dict[str, list[int]] = {}
        for tp in metadata.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return {
            "error_code": ErrorCode.none,
            "transactional_id": transactional_id,
            "transaction_state": metadata.state.kafka_name,
            "transaction_timeout": metadata.transaction_timeout_ms,
            "transaction_start_time": metadata.start_timestamp_ms,
            "producer_id": metadata.producer_id,
            "producer_epoch": metadata.producer_epoch,
            "topics": [
                {"topic": topic, "partitions": sorted(ids)}
                for topic, ids in sorted(by_topic.items())
            ],
        }

    def list_transactions(
        self,
        *,
        states: set[State] | None = None,
        producer_ids: set[int] | None = None,
        min_duration_ms: int = -1,
        pattern: str | None = None,
    ) -> list[dict[str, object]]:
        """ListTransactions entries (KIP-664, KIP-994 duration and KIP-1152 id pattern)."""
        now = self._clock.now_ms()
        matcher = re.compile(pattern) if pattern else None
        listed: list[dict[str, object]] = []
        for transactional_id, metadata in sorted(self.transactions.items()):
            if states and metadata.state not in states:
                continue
            if producer_ids and metadata.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (
                metadata.state != State.ONGOING
                or now - metadata.start_timestamp_ms < min_duration_ms
            ):
                continue
            if matcher is not None and not matcher.fullmatch(transactional_id):
                continue
            listed.append(
                {
                    "transactional_id": transactional_id,
                    "producer_id": metadata.producer_id,
                    "transaction_state": metadata.state.kafka_name,
                }
            )
        return listed


def _producer_answer(producer_id: int, producer_epoch: int) -> dict[str, object]:
    return {
        "error_code": ErrorCode.none,
        "producer_id": producer_id,
        "producer_epoch": producer_epoch,
    }


def _next_producer(metadata: TransactionMetadata) -> dict[str, int]:
    """The producer id and epoch EndTxn answers: the new id at epoch 0 when the epoch ran out."""
    if metadata.next_producer_id >= 0:
        return {"producer_id": metadata.next_producer_id, "producer_epoch": 0}
    return {"producer_id": metadata.producer_id, "producer_epoch": metadata.producer_epoch}


def _markers_for(metadata: TransactionMetadata) -> MarkerRequest:
    return MarkerRequest(
        transactional_id=metadata.transactional_id,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        committed=metadata.state == State.PREPARE_COMMIT,
        partitions=tuple(sorted(metadata.partitions)),
        transaction_version=metadata.client_transaction_version,
    )
