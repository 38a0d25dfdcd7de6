"""The log dir half of `moldau cluster reassign`: the replicas a reassignment file places in a
named log dir (`log_dirs` entries other than "any") are moved there with AlterReplicaLogDirs, as
Kafka's ReassignPartitionsCommand does after starting the partition reassignments.

A broker that is gaining a replica answers REPLICA_NOT_AVAILABLE until the reassignment has
created it: the request is sent again every `RETRY_INTERVAL_S` until every move has started or
`--timeout` passes. Unlike Kafka's tool, `check_log_dirs` refuses a dir the broker does not have
before anything changes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Final

from moldau.cli.common import ExitCode, fail
from moldau.cli.reassignment_plan import move_progress, unknown_log_dirs
from moldau.client.admin import AdminClient, TopicPartitionReplica
from moldau.client.errors import ErrorCode, KafkaException
from moldau.types import TopicPartition

RETRY_INTERVAL_S: Final = 0.1

LogDirs = Mapping[TopicPartitionReplica, str]


def _replicas(replicas: Iterable[TopicPartitionReplica]) -> str:
    return ", ".join(str(r) for r in sorted(replicas))


async def check_log_dirs(admin: AdminClient, log_dirs: LogDirs) -> None:
    """Exit with one error line (a cluster error) if a named dir is not one of its broker's."""
    brokers = sorted({replica.broker_id for replica in log_dirs})
    described = await admin.describe_log_dirs(brokers, partitions=[])
    unknown = unknown_log_dirs(log_dirs, {b: list(dirs) for b, dirs in described.items()})
    if unknown:
        replica, log_dir = unknown[0]
        known = ", ".join(sorted(described[replica.broker_id])) or "none"
        fail(
            f"{replica}: broker {replica.broker_id} has no log dir {log_dir} (its log dirs: "
            f"{known}); see them with `moldau cluster log-dirs describe --broker-list "
            f"{replica.broker_id}`",
            ExitCode.KAFKA_ERROR,
        )


async def start_moves(admin: AdminClient, log_dirs: LogDirs, *, timeout_s: float) -> list[str]:
    """Send AlterReplicaLogDirs until every move has started; one line per started move. A
    replica its broker does not have yet is asked again until `timeout_s` has passed; any other
    error, or the timeout, exits with one error line."""
    pending = dict(log_dirs)
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while True:
        outcomes = await admin.alter_replica_log_dirs(pending)
        refused = {
            replica: error
            for replica, error in outcomes.items()
            if error is not None and error.code is not ErrorCode.replica_not_available
        }
        if refused:
            fail(
                "the brokers refused to move "
                + "; ".join(str(error) for _, error in sorted(refused.items())),
                ExitCode.KAFKA_ERROR,
            )
        started = sorted(replica for replica, error in outcomes.items() if error is None)
        lines += [
            f"Successfully started moving log directory to {pending[replica]} for replica "
            f"{replica.topic}-{replica.partition} with broker {replica.broker_id}"
            for replica in started
        ]
        for replica in started:
            del pending[replica]
        if not pending:
            return lines
        if time.monotonic() >= deadline:
            fail(
                f"timed out before log directory moves could be started for: "
                f"{_replicas(pending)} (their brokers have no replica yet; the partition "
                "reassignments are started: run execute again with --additional, or give a "
                "longer --timeout)",
                ExitCode.KAFKA_ERROR,
            )
        await asyncio.sleep(RETRY_INTERVAL_S)


async def verify_moves(
    admin: AdminClient, log_dirs: LogDirs, reassigning: Collection[TopicPartition]
) -> list[tuple[TopicPartitionReplica, str, str]]:
    """(replica, status, line) of each named log dir, sorted by broker then partition as
    Kafka's verify prints them."""
    infos = await admin.describe_replica_log_dirs(log_dirs)
    verdicts = []
    for replica in sorted(log_dirs, key=lambda r: (r.broker_id, r.topic, r.partition)):
        status, line = move_progress(
            replica,
            log_dirs[replica],
            infos[replica],
            reassigning=replica.topic_partition in reassigning,
        )
        verdicts.append((replica, status, line))
    return verdicts


async def cancel_moves(admin: AdminClient, log_dirs: LogDirs) -> list[TopicPartitionReplica]:
    """Stop the moves under way of the named replicas (each is asked to stay in its current
    dir, as Kafka's cancel does); the replicas whose move was stopped."""
    infos = await admin.describe_replica_log_dirs(log_dirs)
    moving = {
        replica: info.current_log_dir
        for replica, info in infos.items()
        if info.future_log_dir is not None and info.current_log_dir is not None
    }
    if not moving:
        return []
    outcomes = await admin.alter_replica_log_dirs(moving)
    errors = [error for error in outcomes.values() if error is not None]
    if errors:
        raise KafkaException(errors[0].code, f"cancelling the log dir moves: {errors[0]}")
    return sorted(moving)
