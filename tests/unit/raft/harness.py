"""One `RaftNode` with an in-memory log and quorum-state store, stepped by hand: the harness
applies log and election-state actions (as a driver would) and hands back the rest."""

from __future__ import annotations

import random
from collections.abc import Sequence

from moldau.raft.events import (
    AppendToLog,
    LogFlushed,
    PersistElectionState,
    RaftAction,
    RaftEvent,
    Receive,
    Send,
    Start,
    Tick,
    TruncateLog,
)
from moldau.raft.log import LogEntry, MemoryReplicatedLog
from moldau.raft.messages import FetchRequest, RaftMessage, VoteRequest
from moldau.raft.node import RaftNode
from moldau.raft.quorum_config import QuorumConfig
from moldau.raft.quorum_state import ElectionState, MemoryQuorumStateStore
from moldau.raft.snapshots import SnapshotStore

CLUSTER_ID = "test-cluster"


def entries(*epochs: int) -> list[LogEntry]:
    """One single-record entry per epoch given, from offset 0."""
    return [LogEntry(base_offset=i, epoch=e, records=(b"%d" % i,)) for i, e in enumerate(epochs)]


class Harness:
    def __init__(
        self,
        *,
        node_id: int = 1,
        voters: tuple[int, ...] = (1, 2, 3),
        log: Sequence[LogEntry] = (),
        state: ElectionState | None = None,
        config: QuorumConfig | None = None,
        seed: int = 0,
        node_class: type[RaftNode] = RaftNode,
        directory_id: str | None = None,
        snapshots: SnapshotStore | None = None,
    ) -> None:
        self.log = MemoryReplicatedLog(log)
        self.store = MemoryQuorumStateStore(state)
        self.node = node_class(
            node_id=node_id,
            voters=voters,
            config=config,
            rng=random.Random(seed),
            cluster_id=CLUSTER_ID,
            log=self.log,
            directory_id=directory_id,
            snapshots=snapshots,
        )
        self.now = 0.0

    def step(self, event: RaftEvent, *, at: float | None = None) -> list[RaftAction]:
        if at is not None:
            self.now = at
        actions = self.node.step(event, self.now)
        for action in actions:
            match action:
                case PersistElectionState():
                    self.store.write(action.state)
                case AppendToLog():
                    self.log.append(action.entry)
                case TruncateLog():
                    self.log.truncate_to(action.offset)
        return actions

    def start(self) -> list[RaftAction]:
        return self.step(
            Start(
                election_state=self.store.read(),
                log_end_offset=self.log.end_offset,
                last_epoch=self.log.last_epoch,
            )
        )

    def receive(
        self, source_id: int, message: RaftMessage, *, at: float | None = None
    ) -> list[RaftAction]:
        return self.step(Receive(source_id=source_id, message=message), at=at)

    def flush(self) -> list[RaftAction]:
        return self.step(LogFlushed(flushed_offset=self.log.flush()))

    def tick_to_deadline(self) -> list[RaftAction]:
        deadline = self.node.next_deadline()
        assert deadline is not None
        return self.step(Tick(), at=deadline)


def sent(actions: list[RaftAction], kind: type | None = None) -> list[Send]:
    """The Send actions, of messages of `kind` if given."""
    return [
        a for a in actions if isinstance(a, Send) and (kind is None or isinstance(a.message, kind))
    ]


def only_sent(actions: list[RaftAction], kind: type) -> RaftMessage:
    sends = sent(actions, kind)
    assert len(sends) == 1, sends
    return sends[0].message


def elect(harness: Harness) -> list[RaftAction]:
    """Run a started voter through pre-votes and votes, every voter granting; the actions of
    the step that made it leader."""
    from moldau.raft.messages import VoteResponse
    from moldau.raft.node import Role

    actions = harness.tick_to_deadline()
    for _ in range(2):  # pre-votes, then votes
        for send in sent(actions, VoteRequest):
            request = send.message
            actions = harness.receive(
                send.destination_id,
                VoteResponse(
                    correlation_id=request.correlation_id,
                    leader_id=None,
                    leader_epoch=request.replica_epoch,
                    vote_granted=True,
                ),
            )
            if harness.node.role is Role.LEADER:
                return actions
            if sent(actions, VoteRequest):
                break
    raise AssertionError(f"not elected: {harness.node.role}")


def fetch(
    *,
    replica: int = 2,
    epoch: int,
    offset: int,
    last_epoch: int,
    high_watermark: int = 0,
    max_wait_ms: int = 0,
    correlation_id: int = 11,
    cluster_id: str | None = CLUSTER_ID,
    max_bytes: int = 1 << 20,
    directory_id: str | None = None,
) -> FetchRequest:
    """A replica's fetch (voter 2's by default)."""
    return FetchRequest(
        correlation_id=correlation_id,
        cluster_id=cluster_id,
        replica_id=replica,
        max_wait_ms=max_wait_ms,
        max_bytes=max_bytes,
        current_leader_epoch=epoch,
        fetch_offset=offset,
        last_fetched_epoch=last_epoch,
        log_start_offset=0,
        partition_max_bytes=max_bytes,
        high_watermark=high_watermark,
        replica_directory_id=directory_id,
    )


def vote_request(
    *,
    candidate: int = 2,
    epoch: int = 1,
    last_epoch: int = 0,
    last_offset: int = 0,
    pre_vote: bool = False,
    receiver: int = 1,
    cluster_id: str | None = CLUSTER_ID,
    correlation_id: int = 7,
    directory_id: str | None = None,
) -> VoteRequest:
    """A candidate's (pre-)vote request (voter 2's, to node 1, by default)."""
    return VoteRequest(
        correlation_id=correlation_id,
        cluster_id=cluster_id,
        voter_id=receiver,
        replica_id=candidate,
        replica_epoch=epoch,
        last_offset_epoch=last_epoch,
        last_offset=last_offset,
        pre_vote=pre_vote,
        voter_directory_id=directory_id,
    )
