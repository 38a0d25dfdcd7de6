"""The client side of Kafka transactions (KIP-98), as Kafka's `TransactionManager`.

A `TransactionManager` belongs to one transactional `Producer`. Its states:

    UNINITIALIZED --init_transactions (InitProducerId)--> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --a record or AddPartitionsToTxn failed--> ABORTABLE_ERROR
    IN_TRANSACTION --commit_transaction (EndTxn commit)--> READY
    IN_TRANSACTION | ABORTABLE_ERROR --abort_transaction (EndTxn abort)--> READY
    any --PRODUCER_FENCED / INVALID_PRODUCER_EPOCH / ...--> FATAL (only close() remains)

Requests go to the transaction coordinator (FindCoordinator key type 1) and are retried while it
moves, loads, or still completes an earlier transaction (CONCURRENT_TRANSACTIONS).

When the cluster has finalized `transaction.version` 2 (KIP-890 part 2; read from the
coordinator's ApiVersions and fixed for a transaction when it begins, as Kafka's client does),
partitions and offsets join the transaction without AddPartitionsToTxn or AddOffsetsToTxn:
Produce v12 and TxnOffsetCommit v5 add them on the broker, and EndTxn v5 bumps the epoch at
every end (sequences restart at 0), so a delayed request of an earlier transaction cannot land
in the next one. Below level 2 the client speaks transaction version 1 (Produce v11,
TxnOffsetCommit v4, EndTxn v4 at most) and adds partitions and offsets itself.

`end_transaction` and `describe_transaction` work without a producer: they let a process that
did not write a transaction (the Spark driver) commit or abort it by transactional id, producer
id and epoch, and look at its state.
"""

from __future__ import annotations

import asyncio
import enum
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, TypeVar

from moldau.client.cluster import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, Cluster
from moldau.client.errors import ErrorCode, KafkaException, error_code_of
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = [
    "FatalTransactionError",
    "TransactionManager",
    "TransactionState",
    "describe_transaction",
    "end_transaction",
]

T = TypeVar("T")

# Answers after which only a new producer (a new InitProducerId) can use the transactional id.
FATAL_CODES: Final = frozenset(
    {
        ErrorCode.producer_fenced,
        ErrorCode.invalid_producer_epoch,
        ErrorCode.invalid_producer_id_mapping,
        ErrorCode.transactional_id_authorization_failed,
        ErrorCode.unsupported_version,
    }
)
# Answers that mean "ask again" (the coordinator moved, loads, or finishes an earlier transaction).
_RETRY_CODES: Final = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.request_timed_out,
        ErrorCode.network_exception,
    }
)
_COORDINATOR_MOVED: Final = frozenset(
    {ErrorCode.not_coordinator, ErrorCode.coordinator_not_available, ErrorCode.network_exception}
)
# AddPartitionsToTxn v4+ is the broker-to-broker form (batched transactions, verify_only).
_ADD_PARTITIONS_CLIENT_MAX_VERSION: Final = 3
_LIST_TRANSACTIONS_PATTERN_VERSION: Final = 2
TRANSACTION_VERSION: Final = "transaction.version"
# The last versions of transaction version 1: the next ones add partitions (Produce v12,
# TxnOffsetCommit v5) or bump the epoch (EndTxn v5) on the broker (KIP-890 part 2).
VERSION_1_MAX: Final[Mapping[int, int]] = {
    ApiKey.PRODUCE: 11,
    ApiKey.TXN_OFFSET_COMMIT: 4,
    ApiKey.END_TXN: 4,
}


def transaction_version_2(connection: Any) -> bool:
    """The broker's ApiVersions said the cluster finalized transaction.version 2 or more."""
    return bool(connection.versions.feature(TRANSACTION_VERSION) >= 2)


def version_cap(api_key: int, version_2: bool) -> int | None:
    """The highest version of `api_key` a transactional client may use (None: any)."""
    return None if version_2 else VERSION_1_MAX.get(api_key)


def capped_version(connection: Any, api_key: int, cap: int | None) -> int:
    """The highest version of `api_key` both sides speak, at most `cap` (None: no cap)."""
    version = int(connection.versions.pick(api_key))
    return version if cap is None else min(version, cap)


def produce_version(connection: Any, transactions: TransactionManager | None) -> int | None:
    """The Produce version a producer sends on `connection` (None: the highest both speak): at
    most v11 in a transaction of version 1, where v12 would add partitions on the broker."""
    cap = transactions.produce_version_cap() if transactions is not None else None
    return None if cap is None else capped_version(connection, ApiKey.PRODUCE, cap)


class FatalTransactionError(KafkaException):
    """The producer was fenced by a newer one with its transactional id (or may not use the id):
    it can only be closed. Whatever its open transaction wrote is aborted by the coordinator."""

    fatal = True


class TransactionState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    ABORTABLE_ERROR = "abortable error"
    FATAL = "fatal error"


def _raise_for(code: Any, what: str) -> None:
    error = error_code_of(code)
    if error is ErrorCode.none:
        return
    if error in FATAL_CODES:
        raise FatalTransactionError(error, f"{what}: the producer is fenced or may not use its id")
    raise KafkaException(error, what)


async def _with_retries(
    cluster: Cluster,
    operation: Callable[[], Awaitable[T]],
    *,
    timeout: float | None,
    forget: Callable[[], None],
) -> T:
    """Run `operation` until it succeeds, fails for good, or `timeout` (default: the request
    timeout) passes; a coordinator that moved is looked up again."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (cluster.config.request_timeout if timeout is None else timeout)
    backoff = cluster.config.get_int("retry.backoff.ms") / 1000
    while True:
        try:
            return await operation()
        except KafkaException as exc:
            if exc.code in _COORDINATOR_MOVED:
                forget()
            if exc.code not in _RETRY_CODES or loop.time() + backoff >= deadline:
                raise
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 1.0)


async def _transaction_request(
    cluster: Cluster,
    transactional_id: str,
    api_key: int,
    data: Mapping[str, Any] | Callable[[int], Mapping[str, Any]],
    *,
    timeout: float | None,
    errors: Callable[[Any], Any],
    version_cap: int | Callable[[Any], int | None] | None = None,
) -> Any:
    """Send to the coordinator of `transactional_id`, retrying; `errors(response)` is the code
    to check. `data` may depend on the version picked, `version_cap` on the connection."""

    async def attempt() -> Any:
        connection = await cluster.coordinator(transactional_id, COORDINATOR_TRANSACTION)
        cap = version_cap(connection) if callable(version_cap) else version_cap
        version = capped_version(connection, api_key, cap)
        body = data(version) if callable(data) else data
        response = await connection.request(api_key, body, version=version)
        _raise_for(errors(response), f"transactional id '{transactional_id}'")
        return response

    return await _with_retries(
        cluster,
        attempt,
        timeout=timeout,
        forget=lambda: cluster.forget_coordinator(transactional_id, COORDINATOR_TRANSACTION),
    )


async def end_transaction(
    cluster: Cluster,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
    timeout: float | None = None,
    version_2: bool | None = None,
) -> tuple[int, int]:
    """EndTxn: commit or abort the open transaction of (transactional id, producer id, epoch).
    Returns the producer id and epoch to use next (bumped under transaction version 2).
    `version_2`: whether the transaction is one of transaction version 2 (None: as the
    coordinator's ApiVersions says the cluster is)."""

    def cap(connection: Any) -> int | None:
        uses_2 = transaction_version_2(connection) if version_2 is None else version_2
        return version_cap(ApiKey.END_TXN, uses_2)

    response = await _transaction_request(
        cluster,
        transactional_id,
        ApiKey.END_TXN,
        {
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "committed": committed,
        },
        timeout=timeout,
        errors=lambda r: r.error_code,
        version_cap=cap,
    )
    next_id = int(getattr(response, "producer_id", -1))
    next_epoch = int(getattr(response, "producer_epoch", -1))
    if next_id < 0 or next_epoch < 0:
        return producer_id, producer_epoch
    return next_id, next_epoch


async def describe_transaction(
    cluster: Cluster, transactional_id: str, *, timeout: float | None = None
) -> str | None:
    """The coordinator's state of `transactional_id` in Kafka's words (`Ongoing`,
    `PrepareCommit`, `CompleteCommit`, ...), or None if the coordinator does not know it.

    Asks the id's coordinator with ListTransactions filtered by the id (KIP-1152), not
    DescribeTransactions: the latter's answer for an unknown or idle id carries a start time of
    -1, which kio's decoder refuses."""
    response = await _transaction_request(
        cluster,
        transactional_id,
        ApiKey.LIST_TRANSACTIONS,
        {
            "state_filters": [],
            "producer_id_filters": [],
            "duration_filter": -1,
            "transactional_id_pattern": re.escape(transactional_id),
        },
        timeout=timeout,
        errors=lambda r: r.error_code,
        version_cap=_LIST_TRANSACTIONS_PATTERN_VERSION,
    )
    for state in response.transaction_states:
        if state.transactional_id == transactional_id:
            return str(state.transaction_state)
    return None


class TransactionManager:
    """Producer id, epoch, per-partition sequences and the transaction state of one producer."""

    def __init__(self, cluster: Cluster, transactional_id: str, *, timeout_ms: int) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.state = TransactionState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self._partitions: set[TopicPartition] = set()
        self._has_offsets = False
        self._sequences: dict[TopicPartition, int] = {}
        self._error: KafkaException | None = None
        self._adding: asyncio.Lock | None = None
        # transaction.version 2: as the coordinator said at init (`_cluster_version_2`), and
        # as fixed for the open transaction when it began (`version_2`).
        self._cluster_version_2 = False
        self.version_2 = False

    # --- state ---------------------------------------------------------------------------

    def _require(self, *states: TransactionState, action: str) -> None:
        if self.state is TransactionState.FATAL and self._error is not None:
            raise FatalTransactionError(self._error.code, f"cannot {action}: {self._error}")
        if self.state not in states:
            raise KafkaException(
                ErrorCode.invalid_txn_state,
                f"cannot {action} while the producer is in state '{self.state.value}'",
            )

    def check_can_produce(self) -> None:
        """produce() is allowed only inside a transaction (begin_transaction first)."""
        self._require(
            TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR, action="produce"
        )
        if self.state is TransactionState.ABORTABLE_ERROR and self._error is not None:
            raise KafkaException(
                self._error.code, f"the transaction must be aborted: {self._error}"
            )

    def record_failed(self, error: KafkaException) -> None:
        """A record of the transaction was not written: only an abort may end it now."""
        if isinstance(error, FatalTransactionError) or error.code in FATAL_CODES:
            self._error = FatalTransactionError(error.code, error.message)
            self.state = TransactionState.FATAL
        elif self.state is TransactionState.IN_TRANSACTION:
            self._error = error
            self.state = TransactionState.ABORTABLE_ERROR

    def _fail(self, error: KafkaException) -> KafkaException:
        self.record_failed(error)
        return self._error if self.state is TransactionState.FATAL and self._error else error

    # --- sequences -----------------------------------------------------------------------

    def next_sequence(self, tp: TopicPartition, count: int) -> int:
        """The base sequence of the next batch of `count` records to `tp`."""
        base = self._sequences.get(tp, 0)
        self._sequences[tp] = (base + count) & 0x7FFFFFFF
        return base

    def _new_epoch(self, producer_id: int, producer_epoch: int) -> None:
        if (producer_id, producer_epoch) != (self.producer_id, self.producer_epoch):
            self._sequences.clear()
        self.producer_id, self.producer_epoch = producer_id, producer_epoch

    # --- the protocol --------------------------------------------------------------------

    async def init(self, timeout: float | None = None) -> None:
        """InitProducerId: get (or bump) the epoch; aborts what an older producer left open."""
        self._require(TransactionState.UNINITIALIZED, action="init_transactions")
        response = await _transaction_request(
            self.cluster,
            self.transactional_id,
            ApiKey.INIT_PRODUCER_ID,
            {
                "transactional_id": self.transactional_id,
                "transaction_timeout": self.timeout_ms,
                "producer_id": -1,
                "producer_epoch": -1,
            },
            timeout=timeout,
            errors=lambda r: r.error_code,
        )
        # (the coordinator's connection is cached: its ApiVersions say the cluster's level)
        coordinator = await self.cluster.coordinator(self.transactional_id, COORDINATOR_TRANSACTION)
        self._cluster_version_2 = transaction_version_2(coordinator)
        self._new_epoch(int(response.producer_id), int(response.producer_epoch))
        self.state = TransactionState.READY

    def begin(self) -> None:
        self._require(TransactionState.READY, action="begin_transaction")
        self._partitions.clear()
        self._has_offsets = False
        self._error = None
        self.version_2 = self._cluster_version_2
        self.state = TransactionState.IN_TRANSACTION

    def produce_version_cap(self) -> int | None:
        """The highest Produce version for this transaction's batches (None: any)."""
        return version_cap(ApiKey.PRODUCE, self.version_2)

    async def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for the partitions not yet in the transaction (before their first
        Produce: the broker refuses transactional batches to partitions it was not told of).
        Under transaction version 2 the Produce request itself adds them: nothing is sent."""
        if self.version_2:
            self._partitions.update(partitions)
            return
        if self._adding is None:
            self._adding = asyncio.Lock()
        async with self._adding:  # concurrent senders must not add the same partitions twice
            missing = sorted(set(partitions) - self._partitions)
            if not missing:
                return
            by_topic: dict[str, list[int]] = {}
            for tp in missing:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            try:
                await _transaction_request(
                    self.cluster,
                    self.transactional_id,
                    ApiKey.ADD_PARTITIONS_TO_TXN,
                    {
                        "v3_and_below_transactional_id": self.transactional_id,
                        "v3_and_below_producer_id": self.producer_id,
                        "v3_and_below_producer_epoch": self.producer_epoch,
                        "v3_and_below_topics": [
                            {"name": name, "partitions": ids} for name, ids in by_topic.items()
                        ],
                    },
                    timeout=None,
                    errors=_first_partition_error,
                    version_cap=_ADD_PARTITIONS_CLIENT_MAX_VERSION,
                )
            except KafkaException as exc:
                raise self._fail(exc) from None
            self._partitions.update(missing)

    async def add_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], timeout: float | None
    ) -> None:
        """AddOffsetsToTxn then TxnOffsetCommit: `offsets` commit to `group_id` with the
        transaction (consume-transform-produce)."""
        self._require(TransactionState.IN_TRANSACTION, action="send_offsets_to_transaction")
        try:
            if self.version_2:  # TxnOffsetCommit v5 adds the group's partition itself
                self._has_offsets = True
                await self._txn_offset_commit(group_id, offsets, timeout)
                return
            await _transaction_request(
                self.cluster,
                self.transactional_id,
                ApiKey.ADD_OFFSETS_TO_TXN,
                {
                    "transactional_id": self.transactional_id,
                    "producer_id": self.producer_id,
                    "producer_epoch": self.producer_epoch,
                    "group_id": group_id,
                },
                timeout=timeout,
                errors=lambda r: r.error_code,
            )
            self._has_offsets = True
            await self._txn_offset_commit(group_id, offsets, timeout)
        except KafkaException as exc:
            raise self._fail(exc) from None

    async def _txn_offset_commit(
        self, group_id: str, offsets: Mapping[TopicPartition, int], timeout: float | None
    ) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        data = {
            "transactional_id": self.transactional_id,
            "group_id": group_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
        }

        async def attempt() -> None:
            connection = await self.cluster.coordinator(group_id, COORDINATOR_GROUP)
            cap = version_cap(ApiKey.TXN_OFFSET_COMMIT, self.version_2)
            response = await connection.request(
                ApiKey.TXN_OFFSET_COMMIT,
                data,
                version=capped_version(connection, ApiKey.TXN_OFFSET_COMMIT, cap),
            )
            for topic in response.topics:
                for partition in topic.partitions:
                    _raise_for(partition.error_code, f"group '{group_id}' {topic.name}")

        await _with_retries(
            self.cluster,
            attempt,
            timeout=timeout,
            forget=lambda: self.cluster.forget_coordinator(group_id, COORDINATOR_GROUP),
        )

    async def end(self, *, committed: bool, timeout: float | None = None) -> None:
        """EndTxn; the caller has flushed every record of the transaction first."""
        if committed:
            self._require(TransactionState.IN_TRANSACTION, action="commit_transaction")
        else:
            self._require(
                TransactionState.IN_TRANSACTION,
                TransactionState.ABORTABLE_ERROR,
                action="abort_transaction",
            )
        if not self._partitions and not self._has_offsets:
            # Nothing reached the coordinator: there is no transaction to end (as Kafka's client).
            self._error = None
            self.state = TransactionState.READY
            return
        try:
            producer_id, producer_epoch = await end_transaction(
                self.cluster,
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=committed,
                timeout=timeout,
                version_2=self.version_2,
            )
        except KafkaException as exc:
            raise self._fail(exc) from None
        self._new_epoch(producer_id, producer_epoch)
        self._partitions.clear()
        self._has_offsets = False
        self._error = None
        self.state = TransactionState.READY

    def raise_if_abortable(self) -> None:
        """commit_transaction refuses a transaction that lost records."""
        if self.state is TransactionState.ABORTABLE_ERROR and self._error is not None:
            raise KafkaException(
                self._error.code, f"the transaction must be aborted: {self._error}"
            )
        self._require(TransactionState.IN_TRANSACTION, action="commit_transaction")


def _first_partition_error(response: Any) -> Any:
    for topic in response.results_by_topic_v3_and_below:
        for partition in topic.results_by_partition:
            if error_code_of(partition.partition_error_code) is not ErrorCode.none:
                return partition.partition_error_code
    return ErrorCode.none
