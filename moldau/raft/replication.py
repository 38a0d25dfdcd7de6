"""Fetching, a part of `RaftNode` working on its `QuorumState`: Fetch, as the leader answers it
and as a follower or observer sends it and takes in the answer (Kafka's KafkaRaftClient fetch
paths, Fetch v12+).

The leader checks that the fetcher's log matches its own at the fetch offset (the epoch of the
entry before it, `last_fetched_epoch`); if not it answers with the diverging epoch (the largest
epoch at or below the fetcher's and where it ends) and the fetcher truncates there and fetches
again. A matching fetch tells the leader that every record below the offset is durable on the
fetcher, which may move the high watermark. A fetch with nothing new is held for up to
`fetch_max_wait_ms`, and answered sooner when the log grows or the high watermark moves.

Snapshots (KIP-630): a fetch from below the leader's log start, or diverging at or below it, is
answered with the id of the leader's newest snapshot; the follower reads it in chunks with
FetchSnapshot, installs it in place of its log, and fetches on from its end offset.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.raft.claims import cluster_id_error, learned_from_response, refuse
from moldau.raft.epoch_states import FollowerState, Role
from moldau.raft.events import (
    AppendToLog,
    CommitUpTo,
    FlushLog,
    InstallSnapshot,
    RaftAction,
    Send,
    TruncateLog,
    WriteSnapshotChunk,
)
from moldau.raft.leader_state import LeaderState, ParkedFetch
from moldau.raft.log import LogEntry, OffsetAndEpoch, end_after_truncation
from moldau.raft.messages import (
    HIGH_WATERMARK_NOT_SENT,
    NO_ERROR,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from moldau.raft.quorum import QuorumState, RaftSafetyError

__all__ = ["Replication"]


class Replication:
    def __init__(self, quorum: QuorumState) -> None:
        self.quorum = quorum

    # Fetching.

    def maybe_send_fetch(self, now: float, actions: list[RaftAction]) -> None:
        quorum = self.quorum
        if quorum.flushed_offset < quorum.log_end_offset:
            return  # fetch only from an offset that is durable here: the leader counts on it
        state = quorum.state
        if isinstance(state, FollowerState):
            target = state.fetch_target if state.fetch_target is not None else state.leader_id
        elif state.role is Role.UNATTACHED and not quorum.is_voter:
            # An observer that knows no leader asks any voter it knows or a bootstrap server;
            # the answer names the leader.
            candidates = quorum.fetch_candidates()
            if quorum.requests.has_any_outstanding() or not candidates:
                return
            target = quorum.random.choice(candidates)
        else:
            return
        if target is None or target == quorum.node_id:
            return
        if quorum.fetching_snapshot is not None:
            quorum.send_request(target, self._fetch_snapshot_request, now, actions)
        else:
            quorum.send_request(target, self._fetch_request, now, actions)

    def _log_start_offset(self) -> int:
        # A snapshot installed in this step is not in the log yet: the node's own figure then.
        quorum = self.quorum
        in_log = quorum.log.log_start.offset if quorum.log is not None else 0
        return max(in_log, quorum.installed_log_start)

    def _fetch_request(self, destination_id: int, correlation_id: int) -> FetchRequest:
        quorum = self.quorum
        return FetchRequest(
            correlation_id=correlation_id,
            cluster_id=quorum.cluster_id,
            replica_id=quorum.node_id,
            max_wait_ms=quorum.config.fetch_max_wait_ms,
            max_bytes=quorum.config.fetch_max_bytes,
            current_leader_epoch=quorum.epoch,
            fetch_offset=quorum.log_end_offset,
            last_fetched_epoch=quorum.last_epoch,
            log_start_offset=self._log_start_offset(),
            partition_max_bytes=quorum.config.fetch_max_bytes,
            high_watermark=quorum.high_watermark,
            replica_directory_id=quorum.directory_id,
        )

    def _fetch_snapshot_request(
        self, destination_id: int, correlation_id: int
    ) -> FetchSnapshotRequest:
        quorum = self.quorum
        assert quorum.fetching_snapshot is not None
        return FetchSnapshotRequest(
            correlation_id=correlation_id,
            cluster_id=quorum.cluster_id,
            replica_id=quorum.node_id,
            max_bytes=quorum.config.snapshot_chunk_bytes,
            current_leader_epoch=quorum.epoch,
            snapshot_id=quorum.fetching_snapshot,
            position=quorum.snapshot_position,
        )

    def handle_fetch_response(
        self,
        source_id: int,
        request: FetchRequest,
        response: FetchResponse,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        if self._fetch_answer_settled(source_id, response, now, actions):
            return
        quorum, state = self.quorum, self.quorum.state
        if (
            not isinstance(state, FollowerState)
            or source_id != state.leader_id
            or request.current_leader_epoch != state.epoch
            or request.fetch_offset != quorum.log_end_offset
            or request.last_fetched_epoch != quorum.last_epoch
        ):
            return
        if response.diverging_epoch is not None and not self._truncate_to_diverging(
            source_id, response.diverging_epoch, now, actions
        ):
            quorum.requests.back_off(source_id, now)
            return
        self._heard_from(state, now)
        state.fetch_target = state.leader_id
        if response.diverging_epoch is not None:
            return
        if response.snapshot_id is not None:
            self.quorum.fetching_snapshot = response.snapshot_id
            self.quorum.snapshot_position = 0
            return
        self._append_fetched(response.records, now, actions)
        # Never past what the leader committed, nor past our own log (which matches the
        # leader's up to its end now).
        high_watermark = min(response.high_watermark, self.quorum.log_end_offset)
        if high_watermark > self.quorum.high_watermark:
            self.quorum.high_watermark = high_watermark
            actions.append(CommitUpTo(high_watermark=high_watermark))

    def _heard_from(self, follower: FollowerState, now: float) -> None:
        """The leader answered: it is confirmed, and the fetch timer starts again."""
        follower.heard_from_leader = self.quorum.leader_confirmed = True
        follower.fetch_deadline = now + self.quorum.config.fetch_timeout_ms / 1000

    def _fetch_answer_settled(
        self,
        source_id: int,
        response: FetchResponse | FetchSnapshotResponse,
        now: float,
        actions: list[RaftAction],
    ) -> bool:
        """Errors, and what the answer says of the leader; True when nothing is left to do."""
        quorum = self.quorum
        if response.error_code != NO_ERROR:
            quorum.requests.back_off(source_id, now)
            return True
        leader_id, epoch = response.current_leader_id, response.current_leader_epoch
        if learned_from_response(self.quorum, source_id, leader_id, epoch, now, actions):
            return True
        if response.partition_error_code == NO_ERROR:
            return False
        state = quorum.state
        if isinstance(state, FollowerState) and state.leader_id != source_id:
            state.fetch_target = state.leader_id  # the voter we asked named the leader
        elif (
            isinstance(state, FollowerState)
            and not quorum.leader_confirmed
            and epoch == state.epoch
            and leader_id not in (None, state.leader_id, quorum.node_id)
        ):
            # The leader this node names never answered as one, and says another leads: that
            # one is asked (and believed only if it answers as the leader), or an observer
            # misled about the leader would never find it outside the voters it knows.
            state.fetch_target = leader_id
        else:
            quorum.requests.back_off(source_id, now)
        return True

    def _truncate_to_diverging(
        self, source_id: int, diverging: OffsetAndEpoch, now: float, actions: list[RaftAction]
    ) -> bool:
        """Truncate where the leader says the logs part; False, truncating nothing, when that
        is below the high watermark (committed entries never go: Kafka's follower fails on
        such an answer, Moldau refuses it and fetches again)."""
        quorum = self.quorum
        log = quorum.read_log()
        local = log.end_offset_for_epoch(diverging.epoch)
        end = end_after_truncation(log, min(diverging.offset, local.offset))
        if end.offset < quorum.high_watermark:
            refuse(
                source_id,
                "truncation",
                f"node {source_id} asked for a truncation to {end.offset}, below the high "
                f"watermark {quorum.high_watermark}",
                actions,
            )
            return False
        if end.offset < quorum.log_end_offset:
            actions.append(TruncateLog(offset=end.offset))
            quorum.log_end_offset = end.offset
            quorum.last_epoch = end.epoch
            quorum.flushed_offset = min(quorum.flushed_offset, end.offset)
            quorum.forget_voters_from(end.offset, now, actions)
        return True

    def _append_fetched(
        self, records: tuple[LogEntry, ...], now: float, actions: list[RaftAction]
    ) -> None:
        quorum = self.quorum
        appended = False
        for entry in records:
            if (
                entry.base_offset != quorum.log_end_offset
                or not entry.records
                or not quorum.last_epoch <= entry.epoch <= quorum.epoch
            ):
                break
            actions.append(AppendToLog(entry=entry))
            quorum.log_end_offset = entry.next_offset
            quorum.last_epoch = entry.epoch
            appended = True
            if entry.is_control:
                quorum.track_control_entry(entry, now, actions)
        if appended:
            actions.append(FlushLog())

    # Answering fetches (the leader).

    def handle_fetch_request(
        self, source_id: int, request: FetchRequest, now: float, actions: list[RaftAction]
    ) -> FetchResponse | None:
        """The answer, or None when the fetch is held until there is something to say."""
        quorum = self.quorum
        cluster_error = cluster_id_error(self.quorum, source_id, request.cluster_id, actions)
        if cluster_error is not None:
            return FetchResponse(
                correlation_id=request.correlation_id,
                error_code=cluster_error,
                current_leader_id=quorum.leader_id,
                current_leader_epoch=quorum.epoch,
            )
        invalid = (
            request.max_wait_ms < 0
            or request.fetch_offset < 0
            or request.last_fetched_epoch < 0
            or request.last_fetched_epoch > request.current_leader_epoch
        )
        if invalid or request.replica_id == quorum.node_id:
            if not invalid:  # (Kafka's leader fails the fetch with UNKNOWN_SERVER_ERROR)
                refuse(source_id, "sender", "a fetch names this node its sender", actions)
            return FetchResponse(
                correlation_id=request.correlation_id,
                partition_error_code=ErrorCode.invalid_request,
                current_leader_id=quorum.leader_id,
                current_leader_epoch=quorum.epoch,
            )
        leader = quorum.state
        error = quorum.leader_only_error(request.current_leader_epoch)
        if error is not None or not isinstance(leader, LeaderState):
            return quorum.fetch_error(request)
        replaced = leader.parked.pop(source_id, None)
        if replaced is not None:
            # A newer fetch in the same replica's name: the held one is answered now, not
            # dropped (a fetch forged in a voter's name would otherwise leave the voter's own
            # unanswered until it timed out, and the voter standing for election).
            answer = self._fetch_records(replaced.request)
            actions.append(Send(destination_id=source_id, message=answer))
        # A replica counts as the voter of its id only with that voter's directory id (Kafka's
        # ReplicaKey): a voter whose disk was replaced fetches as an observer, and neither its
        # offsets nor its fetches count towards the high watermark or check-quorum.
        replica_id = request.replica_id
        is_voter = quorum.voter_set.has_voter(replica_id, request.replica_directory_id)
        if is_voter:
            leader.record_voter_fetch(replica_id, now)
            leader.acknowledge(replica_id)
        log = quorum.read_log()
        start = log.log_start
        divergence = log.end_offset_for_epoch(request.last_fetched_epoch)
        diverged = (
            divergence.epoch != request.last_fetched_epoch
            or divergence.offset < request.fetch_offset
        )
        if start.offset > 0 and (
            request.fetch_offset < start.offset or (diverged and divergence.offset <= start.offset)
        ):
            # What the fetcher needs, or where its log parts from ours, is in our snapshot.
            return FetchResponse(
                correlation_id=request.correlation_id,
                high_watermark=quorum.high_watermark,
                log_start_offset=start.offset,
                current_leader_id=quorum.node_id,
                current_leader_epoch=quorum.epoch,
                snapshot_id=self._latest_snapshot_id(),
            )
        if diverged:
            return FetchResponse(
                correlation_id=request.correlation_id,
                high_watermark=quorum.high_watermark,
                log_start_offset=start.offset,
                diverging_epoch=divergence,
                current_leader_id=quorum.node_id,
                current_leader_epoch=quorum.epoch,
            )
        if replica_id >= 0 and (is_voter or replica_id not in quorum.voter_set):
            leader.update_replica(
                replica_id,
                fetch_offset=request.fetch_offset,
                leader_end_offset=quorum.log_end_offset,
                now=now,
                directory_id=request.replica_directory_id,
            )
            self.advance_high_watermark(now, actions)
        if (
            log.end_offset <= request.fetch_offset
            and request.max_wait_ms > 0
            and request.high_watermark >= quorum.high_watermark
        ):
            leader.parked[source_id] = ParkedFetch(
                source_id=source_id, request=request, deadline=now + request.max_wait_ms / 1000
            )
            return None
        return self._fetch_records(request)

    def _fetch_records(self, request: FetchRequest) -> FetchResponse:
        quorum = self.quorum
        entries = quorum.read_log().read(
            request.fetch_offset, max_bytes=request.partition_max_bytes
        )
        return FetchResponse(
            correlation_id=request.correlation_id,
            high_watermark=quorum.high_watermark,
            log_start_offset=self._log_start_offset(),
            current_leader_id=quorum.node_id,
            current_leader_epoch=quorum.epoch,
            records=tuple(e for e in entries if e.base_offset >= request.fetch_offset),
        )

    def _latest_snapshot_id(self) -> OffsetAndEpoch:
        quorum = self.quorum
        snapshot_id = quorum.snapshots.latest_snapshot_id() if quorum.snapshots else None
        if snapshot_id is None or snapshot_id.offset < quorum.read_log().log_start.offset:
            raise RaftSafetyError(f"node {quorum.node_id}'s log starts after its newest snapshot")
        return snapshot_id

    def advance_high_watermark(self, now: float, actions: list[RaftAction]) -> None:
        """Commit what a majority of voters holds (on a resigned leader too, as its flushes
        complete)."""
        quorum = self.quorum
        leader = quorum.leader
        if leader is None:
            return
        high_watermark = leader.next_high_watermark(quorum.high_watermark)
        if high_watermark is None:
            return
        quorum.high_watermark = high_watermark
        actions.append(CommitUpTo(high_watermark=high_watermark))
        self.complete_parked_fetches(now, actions, high_watermark_moved=True)
        if (
            quorum.role is Role.LEADER
            and not quorum.is_voter
            and high_watermark > quorum.last_voter_change_offset
        ):
            # The voter set without this leader is committed: it steps down (KIP-853).
            quorum.become_resigned(now, actions, successors=leader.successors())

    def complete_parked_fetches(
        self, now: float, actions: list[RaftAction], *, high_watermark_moved: bool = False
    ) -> None:
        """Answer the held fetches that have something new (entries, a higher high watermark
        than the fetcher knows, or than it might know if it cannot say) or have waited long
        enough. Called only in steps that append nothing, so the log read is the log the node
        knows."""
        quorum = self.quorum
        leader = quorum.state
        if not isinstance(leader, LeaderState) or not leader.parked:
            return
        log_end = quorum.read_log().end_offset
        for source_id, fetch in list(leader.parked.items()):
            request = fetch.request
            if (
                fetch.deadline <= now
                or log_end > request.fetch_offset
                or quorum.high_watermark > request.high_watermark
                or (high_watermark_moved and request.high_watermark == HIGH_WATERMARK_NOT_SENT)
            ):
                del leader.parked[source_id]
                actions.append(Send(destination_id=source_id, message=self._fetch_records(request)))

    # Snapshots.

    def handle_fetch_snapshot_request(
        self,
        source_id: int,
        request: FetchSnapshotRequest,
        now: float,
        actions: list[RaftAction],
    ) -> FetchSnapshotResponse:
        def answer(
            *,
            error: ErrorCode = NO_ERROR,
            partition_error: ErrorCode = NO_ERROR,
            size: int = -1,
            data: bytes = b"",
        ) -> FetchSnapshotResponse:
            return FetchSnapshotResponse(
                correlation_id=request.correlation_id,
                error_code=error,
                partition_error_code=partition_error,
                snapshot_id=request.snapshot_id,
                current_leader_id=self.quorum.leader_id,
                current_leader_epoch=self.quorum.epoch,
                size=size,
                position=request.position,
                unaligned_records=data,
            )

        cluster_error = cluster_id_error(self.quorum, source_id, request.cluster_id, actions)
        if cluster_error is not None:
            return answer(error=cluster_error)
        if request.replica_id == self.quorum.node_id:
            reason = "a snapshot fetch names this node its sender"
            return answer(partition_error=refuse(source_id, "sender", reason, actions))
        error = self.quorum.leader_only_error(request.current_leader_epoch)
        leader = self.quorum.state
        if error is not None or not isinstance(leader, LeaderState):
            return answer(partition_error=error or ErrorCode.not_leader_or_follower)
        if request.replica_id in self.quorum.voter_set:
            leader.record_voter_fetch(request.replica_id, now)
            leader.acknowledge(request.replica_id)
        size = self.quorum.snapshots.size(request.snapshot_id) if self.quorum.snapshots else None
        if size is None:
            return answer(partition_error=ErrorCode.snapshot_not_found)
        if not 0 <= request.position <= size:
            return answer(partition_error=ErrorCode.position_out_of_range)
        assert self.quorum.snapshots is not None
        limit = max(1, min(request.max_bytes, self.quorum.config.snapshot_chunk_bytes))
        data = self.quorum.snapshots.read(request.snapshot_id, request.position, limit)
        return answer(size=size, data=data)

    def handle_fetch_snapshot_response(
        self,
        source_id: int,
        request: FetchSnapshotRequest,
        response: FetchSnapshotResponse,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        if response.partition_error_code in (
            ErrorCode.snapshot_not_found,
            ErrorCode.position_out_of_range,
        ):
            self.quorum.fetching_snapshot = None  # the leader moved on: fetch to learn its newest
            return
        if self._fetch_answer_settled(source_id, response, now, actions):
            return
        quorum, state = self.quorum, self.quorum.state
        snapshot_id, position = quorum.fetching_snapshot, quorum.snapshot_position
        if (
            not isinstance(state, FollowerState)
            or source_id != state.leader_id
            or request.current_leader_epoch != state.epoch
            or snapshot_id is None
            or request.snapshot_id != snapshot_id
            or response.snapshot_id != snapshot_id
            or request.position != position
            or response.position != position
        ):
            return
        self._heard_from(state, now)
        data = response.unaligned_records
        end = position + len(data)
        if end > response.size or (not data and end < response.size):
            quorum.fetching_snapshot = None  # a chunk that does not fit: start over
            return
        actions.append(WriteSnapshotChunk(snapshot_id=snapshot_id, position=position, data=data))
        quorum.snapshot_position = end
        if end < response.size:
            return
        actions.append(InstallSnapshot(snapshot_id=snapshot_id))
        quorum.fetching_snapshot = None
        quorum.installed_log_start = snapshot_id.offset
        quorum.snapshot_voters_pending = True  # its header is readable once it is installed
        quorum.log_end_offset = quorum.flushed_offset = snapshot_id.offset
        quorum.last_epoch = snapshot_id.epoch
        # A snapshot holds only committed entries: its end is committed.
        quorum.high_watermark = max(quorum.high_watermark, snapshot_id.offset)
