"""The leader's way to the transaction coordinator (`replication.transaction_verification.
CoordinatorLink`): this node's own transaction coordinator when it coordinates the transactional
id, else the broker leading the id's `__transaction_state` partition, asked with
AddPartitionsToTxn v4 (verify_only, or not: transaction version 2 adds partitions this way).
Used by Produce and by TxnOffsetCommit (the group's offsets partition joins the transaction)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from moldau.coordinator.transaction_runtime import TransactionCoordinatorRuntime
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.types import TopicPartition

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
VERIFICATION_TIMEOUT_S = 30.0


class TransactionCoordinatorLink:
    def __init__(self, node: BrokerServices) -> None:
        self._node = node

    def _runtime(self) -> TransactionCoordinatorRuntime:
        runtime = self._node.transaction_coordinator
        assert runtime is not None  # (the node offers this link only while it runs one)
        return runtime

    def verify_here(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode | None:
        runtime = self._runtime()
        if not runtime.is_coordinator_for(transactional_id):
            return None
        return ErrorCode(
            runtime.verify_partition(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                tp=tp,
            )
        )

    async def add_or_verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        *,
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        runtime = self._runtime()
        if not runtime.is_coordinator_for(transactional_id):
            return await self._ask_coordinator(
                transactional_id, producer_id, producer_epoch, partitions, add=add
            )
        if not add:
            return {
                tp: ErrorCode(
                    runtime.verify_partition(
                        transactional_id=transactional_id,
                        producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        tp=tp,
                    )
                )
                for tp in partitions
            }
        try:
            answer = await runtime.add_partitions(
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=partitions,
            )
        except KafkaError as error:
            return dict.fromkeys(partitions, ErrorCode(error.code))
        return {
            tp: ErrorCode(answer["partitions"].get(tp, answer["error_code"])) for tp in partitions
        }

    async def _ask_coordinator(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
        *,
        add: bool,
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4 to the broker coordinating `transactional_id`."""
        node = self._node
        runtime = self._runtime()
        state = node.metadata_image.topics.get(TRANSACTION_STATE_TOPIC)
        index = runtime.partition_for(transactional_id)
        known = state.partitions.get(index) if state is not None else None
        if known is None or known.leader < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        try:
            connection = await node.broker_connection(known.leader)
            response = await connection.request(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                {
                    "transactions": [
                        {
                            "transactional_id": transactional_id,
                            "producer_id": producer_id,
                            "producer_epoch": producer_epoch,
                            "verify_only": not add,
                            "topics": [
                                {"name": name, "partitions": indexes}
                                for name, indexes in topics.items()
                            ],
                        }
                    ]
                },
                version=4,
                timeout=VERIFICATION_TIMEOUT_S,
            )
        except Exception as error:  # the coordinator's broker is away: the producer retries
            node.forget_broker_connection(known.leader)
            log.info(
                "verifying %r with broker %d failed: %r", transactional_id, known.leader, error
            )
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        if response.error_code:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        codes = dict.fromkeys(partitions, ErrorCode.invalid_txn_state)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for answer in topic.results_by_partition:
                    tp = TopicPartition(topic.name, int(answer.partition_index))
                    if tp in codes:
                        codes[tp] = ErrorCode(answer.partition_error_code)
        return codes
