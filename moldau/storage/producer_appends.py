"""The producer state on a partition's append path, Kafka's `ProducerAppendInfo` and
`UnifiedLog.analyzeAndValidateProducerState`: idempotent batches are checked against copies of
the state before anything is written (a retried batch is answered with its original offsets),
a batch pipelined behind one whose write failed is answered KAFKA_STORAGE_ERROR, and appended
batches are recorded (a marker completes its transaction; an aborted one goes to the
transaction index of the segment it was written to). `PartitionLog` calls it under its lock.
"""

from __future__ import annotations

from moldau.protocol.batch_layout import LOG_OVERHEAD
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.records import BatchHeader
from moldau.storage.producer_state import ProducerStateEntry, ProducerStateManager, control_type_of
from moldau.storage.results import AppendResult
from moldau.storage.segment import LogSegment
from moldau.types import TopicPartition

__all__ = ["ProducerAppends"]


class ProducerAppends:
    def __init__(self, state: ProducerStateManager, topic_partition: TopicPartition) -> None:
        self.state = state
        self.topic_partition = topic_partition
        # producer id -> (epoch, base sequence) of its batch whose write failed (a full disk):
        # a batch pipelined behind it is answered KAFKA_STORAGE_ERROR, not OUT_OF_ORDER_SEQUENCE
        self._failed_sequences: dict[int, tuple[int, int]] = {}

    def check(
        self, batches: list[tuple[int, BatchHeader]], *, log_start_offset: int
    ) -> AppendResult | None:
        """Check idempotent batches against (copies of) the producer state; a retried batch
        returns its original result."""
        entries: dict[int, ProducerStateEntry] = {}
        for _position, header in batches:
            if header.producer_id < 0 or header.is_control:
                continue
            entry = entries.get(header.producer_id)
            if entry is None:
                entry = entries[header.producer_id] = self.state.copy_entry(header.producer_id)
            try:
                duplicate = ProducerStateManager.check(entry, header)
            except KafkaError as error:
                self._after_failed_write(error, entry, header)
                raise
            if duplicate is not None:
                if len(batches) != 1:
                    raise KafkaError(ErrorCode.duplicate_sequence_number)
                return AppendResult(
                    first_offset=duplicate.first_offset,
                    last_offset=duplicate.last_offset,
                    log_append_time=-1,
                    log_start_offset=log_start_offset,
                    record_count=header.records_count,
                    duplicate=True,
                )
            ProducerStateManager.update_entry(entry, header._replace(base_offset=0))
        return None

    def _after_failed_write(
        self, error: KafkaError, entry: ProducerStateEntry, header: BatchHeader
    ) -> None:
        """Raise KAFKA_STORAGE_ERROR for a batch out of sequence only because the batch before it
        failed to be written (pipelined behind it): that one is retried, and so must this be.
        OUT_OF_ORDER_SEQUENCE_NUMBER would make the producer bump its epoch and resend batches
        it cannot know the fate of (a duplicate: librdkafka does)."""
        failed = self._failed_sequences.get(header.producer_id)
        if (
            error.code == ErrorCode.out_of_order_sequence_number
            and failed is not None
            and failed == (header.producer_epoch, ProducerStateManager.next_sequence(entry))
        ):
            raise KafkaError(
                ErrorCode.kafka_storage_error,
                f"{self.topic_partition}: producer {header.producer_id} sequence "
                f"{header.base_sequence} follows sequence {failed[1]}, whose write failed",
            ) from None

    def write_failed(self, stateful: list[tuple[int, BatchHeader]]) -> None:
        """The write of these producers' batches failed: they will be retried."""
        for _relative, header in stateful:
            self._failed_sequences.setdefault(
                header.producer_id, (header.producer_epoch, header.base_sequence)
            )

    def record(
        self,
        segment: LogSegment,
        position: int,
        placed: list[tuple[int, BatchHeader]],
        *,
        written: bool = False,
    ) -> None:
        """Record batches appended to `segment` at `position` (each at its relative position in
        `placed`) in the producer state; markers also complete transactions and aborted ones
        go to the segment's transaction index. `written`: a leader wrote them, so a failed
        write of their producers' is behind them."""
        if written and self._failed_sequences:  # (empty but after a failed write)
            for _relative, header in placed:
                self._failed_sequences.pop(header.producer_id, None)
        state = self.state
        for relative, header in placed:
            if header.producer_id < 0:
                continue
            if header.is_control:
                data = segment.log.pread(header.batch_length + LOG_OVERHEAD, position + relative)
                control_type, coordinator_epoch = control_type_of(data)
                aborted = state.apply_batch(
                    header, control_type=control_type, coordinator_epoch=coordinator_epoch
                )
                if aborted is not None:
                    segment.transaction_index.append(aborted)
                continue
            entry = state.copy_entry(header.producer_id)
            ProducerStateManager.update_entry(entry, header)
            state.commit_entry(entry)
