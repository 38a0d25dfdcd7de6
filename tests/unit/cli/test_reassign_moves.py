"""`cluster reassign execute`'s log dir moves: a broker that has no replica yet is asked again
until it has one or the timeout passes; any other refusal stops at once."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
import typer

from moldau.cli.reassign_moves import start_moves
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.log_dirs import TopicPartitionReplica as Replica

EXISTING, JOINING = Replica("t", 0, 1), Replica("t", 0, 2)


class FakeAdmin:
    """Answers AlterReplicaLogDirs from a script: per call, the errors of the replicas."""

    def __init__(self, answers: list[Mapping[Replica, ErrorCode]]) -> None:
        self.answers = answers
        self.requests: list[dict[Replica, str]] = []

    async def alter_replica_log_dirs(
        self, assignments: Mapping[Replica, str]
    ) -> dict[Replica, KafkaException | None]:
        self.requests.append(dict(assignments))
        script = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return {
            r: None
            if script.get(r, ErrorCode.none) is ErrorCode.none
            else KafkaException(script[r])
            for r in assignments
        }


def _start(admin: FakeAdmin, timeout_s: float) -> list[str]:
    wanted = {EXISTING: "/a", JOINING: "/b"}
    fake: Any = admin
    return asyncio.run(start_moves(fake, wanted, timeout_s=timeout_s))


def test_a_joining_broker_is_asked_again_until_it_has_the_replica() -> None:
    not_yet = {JOINING: ErrorCode.replica_not_available}
    admin = FakeAdmin([not_yet, not_yet, {}])
    lines = _start(admin, timeout_s=10)
    assert admin.requests == [{EXISTING: "/a", JOINING: "/b"}, {JOINING: "/b"}, {JOINING: "/b"}]
    assert lines == [
        "Successfully started moving log directory to /a for replica t-0 with broker 1",
        "Successfully started moving log directory to /b for replica t-0 with broker 2",
    ]


def test_a_replica_that_never_appears_times_out_with_one_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = FakeAdmin([{JOINING: ErrorCode.replica_not_available}])
    with pytest.raises(typer.Exit) as exited:
        _start(admin, timeout_s=0.3)
    assert exited.value.exit_code == 1
    error = capsys.readouterr().err
    assert "timed out before log directory moves could be started for: t-0 on broker 2" in error
    assert 2 <= len(admin.requests) <= 6


def test_a_storage_error_is_not_retried(capsys: pytest.CaptureFixture[str]) -> None:
    admin = FakeAdmin([{JOINING: ErrorCode.kafka_storage_error}])
    with pytest.raises(typer.Exit) as exited:
        _start(admin, timeout_s=10)
    assert exited.value.exit_code == 1 and len(admin.requests) == 1
    assert "KAFKA_STORAGE_ERROR" in capsys.readouterr().err
