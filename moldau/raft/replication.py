"""The replication half of `RaftNode`: Fetch, as the leader answers it and as a follower or
observer sends it and takes in the answer (Kafka's KafkaRaftClient fetch paths, Fetch v12+).

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
from moldau.raft.leader_state import ParkedFetch
from moldau.raft.log import LogEntry, OffsetAndEpoch, end_after_truncation
from moldau.raft.messages import (
    HIGH_WATERMARK_NOT_SENT,
    NO_ERROR,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from moldau.raft.node_state import NodeState, RaftSafetyError, Role


class ReplicationMixin(NodeState):
    # Fetching.

    def _maybe_send_fetch(self, now: float, actions: list[RaftAction]) -> None:
        if self.flushed_offset < self.log_end_offset:
            return  # fetch only from an offset that is durable here: the leader counts on it
        if self.role is Role.FOLLOWER:
            target = self._fetch_target if self._fetch_target is not None else self.leader_id
        elif self.role is Role.UNATTACHED and not self.is_voter:
            # An observer that knows no leader asks any voter it knows or a bootstrap server;
            # the answer names the leader.
            candidates = self.fetch_candidates()
            if self._requests.has_any_outstanding() or not candidates:
                return
            target = self._random.choice(candidates)
        else:
            return
        if target is None or target == self.node_id:
            return
        if self._fetching_snapshot is not None:
            self._send_request(target, self._fetch_snapshot_request, now, actions)
        else:
            self._send_request(target, self._fetch_request, now, actions)

    def _log_start_offset(self) -> int:
        # A snapshot installed in this step is not in the log yet: the node's own figure then.
        in_log = self._log.log_start.offset if self._log is not None else 0
        return max(in_log, self._installed_log_start)

    def _fetch_request(self, destination_id: int, correlation_id: int) -> FetchRequest:
        return FetchRequest(
            correlation_id=correlation_id,
            cluster_id=self.cluster_id,
            replica_id=self.node_id,
            max_wait_ms=self.config.fetch_max_wait_ms,
            max_bytes=self.config.fetch_max_bytes,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log_end_offset,
            last_fetched_epoch=self.last_epoch,
            log_start_offset=self._log_start_offset(),
            partition_max_bytes=self.config.fetch_max_bytes,
            high_watermark=self.high_watermark,
            replica_directory_id=self.directory_id,
        )

    def _fetch_snapshot_request(
        self, destination_id: int, correlation_id: int
    ) -> FetchSnapshotRequest:
        assert self._fetching_snapshot is not None
        return FetchSnapshotRequest(
            correlation_id=correlation_id,
            cluster_id=self.cluster_id,
            replica_id=self.node_id,
            max_bytes=self.config.snapshot_chunk_bytes,
            current_leader_epoch=self.epoch,
            snapshot_id=self._fetching_snapshot,
            position=self._snapshot_position,
        )

    def _handle_fetch_response(
        self,
        source_id: int,
        request: FetchRequest,
        response: FetchResponse,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        if self._fetch_answer_settled(source_id, response, now, actions):
            return
        if (
            self.role is not Role.FOLLOWER
            or source_id != self.leader_id
            or request.current_leader_epoch != self.epoch
            or request.fetch_offset != self.log_end_offset
            or request.last_fetched_epoch != self.last_epoch
        ):
            return
        if response.diverging_epoch is not None and not self._truncate_to_diverging(
            source_id, response.diverging_epoch, now, actions
        ):
            self._requests.back_off(source_id, now)
            return
        self._heard_from_leader = self._leader_confirmed = True
        self._fetch_target = self.leader_id
        self._fetch_deadline = now + self.config.fetch_timeout_ms / 1000
        if response.diverging_epoch is not None:
            return
        if response.snapshot_id is not None:
            self._fetching_snapshot = response.snapshot_id
            self._snapshot_position = 0
            return
        self._append_fetched(response.records, now, actions)
        # Never past what the leader committed, nor past our own log (which matches the
        # leader's up to its end now).
        high_watermark = min(response.high_watermark, self.log_end_offset)
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
            actions.append(CommitUpTo(high_watermark=high_watermark))

    def _fetch_answer_settled(
        self,
        source_id: int,
        response: FetchResponse | FetchSnapshotResponse,
        now: float,
        actions: list[RaftAction],
    ) -> bool:
        """Errors, and what the answer says of the leader; True when nothing is left to do."""
        if response.error_code != NO_ERROR:
            self._requests.back_off(source_id, now)
            return True
        leader_id, epoch = response.current_leader_id, response.current_leader_epoch
        if self._learned_from_response(source_id, leader_id, epoch, now, actions):
            return True
        if response.partition_error_code == NO_ERROR:
            return False
        if self.role is Role.FOLLOWER and self.leader_id not in (None, source_id):
            self._fetch_target = self.leader_id  # the voter we asked named the leader
        elif (
            self.role is Role.FOLLOWER
            and not self._leader_confirmed
            and epoch == self.epoch
            and leader_id not in (None, self.leader_id, self.node_id)
        ):
            # The leader this node names never answered as one, and says another leads: that
            # one is asked (and believed only if it answers as the leader), or an observer
            # misled about the leader would never find it outside the voters it knows.
            self._fetch_target = leader_id
        else:
            self._requests.back_off(source_id, now)
        return True

    def _truncate_to_diverging(
        self, source_id: int, diverging: OffsetAndEpoch, now: float, actions: list[RaftAction]
    ) -> bool:
        """Truncate where the leader says the logs part; False, truncating nothing, when that
        is below the high watermark (committed entries never go: Kafka's follower fails on
        such an answer, Moldau refuses it and fetches again)."""
        log = self._read_log()
        local = log.end_offset_for_epoch(diverging.epoch)
        end = end_after_truncation(log, min(diverging.offset, local.offset))
        if end.offset < self.high_watermark:
            self._refuse(
                source_id,
                "truncation",
                f"node {source_id} asked for a truncation to {end.offset}, below the high "
                f"watermark {self.high_watermark}",
                actions,
            )
            return False
        if end.offset < self.log_end_offset:
            actions.append(TruncateLog(offset=end.offset))
            self.log_end_offset = end.offset
            self.last_epoch = end.epoch
            self.flushed_offset = min(self.flushed_offset, end.offset)
            self._forget_voters_from(end.offset, now, actions)
        return True

    def _append_fetched(
        self, records: tuple[LogEntry, ...], now: float, actions: list[RaftAction]
    ) -> None:
        appended = False
        for entry in records:
            if (
                entry.base_offset != self.log_end_offset
                or not entry.records
                or not self.last_epoch <= entry.epoch <= self.epoch
            ):
                break
            actions.append(AppendToLog(entry=entry))
            self.log_end_offset = entry.next_offset
            self.last_epoch = entry.epoch
            appended = True
            if entry.is_control:
                self._track_control_entry(entry, now, actions)
        if appended:
            actions.append(FlushLog())

    # Answering fetches (the leader).

    def _handle_fetch_request(
        self, source_id: int, request: FetchRequest, now: float, actions: list[RaftAction]
    ) -> FetchResponse | None:
        """The answer, or None when the fetch is held until there is something to say."""
        cluster_error = self._cluster_id_error(source_id, request.cluster_id, actions)
        if cluster_error is not None:
            return FetchResponse(
                correlation_id=request.correlation_id,
                error_code=cluster_error,
                current_leader_id=self.leader_id,
                current_leader_epoch=self.epoch,
            )
        invalid = (
            request.max_wait_ms < 0
            or request.fetch_offset < 0
            or request.last_fetched_epoch < 0
            or request.last_fetched_epoch > request.current_leader_epoch
        )
        if invalid or request.replica_id == self.node_id:
            if not invalid:  # (Kafka's leader fails the fetch with UNKNOWN_SERVER_ERROR)
                self._refuse(source_id, "sender", "a fetch names this node its sender", actions)
            return FetchResponse(
                correlation_id=request.correlation_id,
                partition_error_code=ErrorCode.invalid_request,
                current_leader_id=self.leader_id,
                current_leader_epoch=self.epoch,
            )
        leader = self._leader
        if self._leader_only_error(request.current_leader_epoch) is not None or leader is None:
            return self._fetch_error(request)
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
        is_voter = self.voter_set.has_voter(replica_id, request.replica_directory_id)
        if is_voter:
            leader.record_voter_fetch(replica_id, now)
            leader.acknowledge(replica_id)
        log = self._read_log()
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
                high_watermark=self.high_watermark,
                log_start_offset=start.offset,
                current_leader_id=self.node_id,
                current_leader_epoch=self.epoch,
                snapshot_id=self._latest_snapshot_id(),
            )
        if diverged:
            return FetchResponse(
                correlation_id=request.correlation_id,
                high_watermark=self.high_watermark,
                log_start_offset=start.offset,
                diverging_epoch=divergence,
                current_leader_id=self.node_id,
                current_leader_epoch=self.epoch,
            )
        if replica_id >= 0 and (is_voter or replica_id not in self.voter_set):
            leader.update_replica(
                replica_id,
                fetch_offset=request.fetch_offset,
                leader_end_offset=self.log_end_offset,
                now=now,
                directory_id=request.replica_directory_id,
            )
            self._advance_high_watermark(now, actions)
        if (
            log.end_offset <= request.fetch_offset
            and request.max_wait_ms > 0
            and request.high_watermark >= self.high_watermark
        ):
            leader.parked[source_id] = ParkedFetch(
                source_id=source_id, request=request, deadline=now + request.max_wait_ms / 1000
            )
            return None
        return self._fetch_records(request)

    def _fetch_records(self, request: FetchRequest) -> FetchResponse:
        entries = self._read_log().read(request.fetch_offset, max_bytes=request.partition_max_bytes)
        return FetchResponse(
            correlation_id=request.correlation_id,
            high_watermark=self.high_watermark,
            log_start_offset=self._log_start_offset(),
            current_leader_id=self.node_id,
            current_leader_epoch=self.epoch,
            records=tuple(e for e in entries if e.base_offset >= request.fetch_offset),
        )

    def _latest_snapshot_id(self) -> OffsetAndEpoch:
        snapshot_id = self._snapshots.latest_snapshot_id() if self._snapshots else None
        if snapshot_id is None or snapshot_id.offset < self._read_log().log_start.offset:
            raise RaftSafetyError(f"node {self.node_id}'s log starts after its newest snapshot")
        return snapshot_id

    def _advance_high_watermark(self, now: float, actions: list[RaftAction]) -> None:
        leader = self._leader
        if leader is None:
            return
        high_watermark = leader.next_high_watermark(self.high_watermark)
        if high_watermark is None:
            return
        self.high_watermark = high_watermark
        actions.append(CommitUpTo(high_watermark=high_watermark))
        self._complete_parked_fetches(now, actions, high_watermark_moved=True)
        if (
            self.role is Role.LEADER
            and not self.is_voter
            and high_watermark > self._history.last_change_offset
        ):
            # The voter set without this leader is committed: it steps down (KIP-853).
            self._become_resigned(now, actions, successors=leader.successors())

    def _complete_parked_fetches(
        self, now: float, actions: list[RaftAction], *, high_watermark_moved: bool = False
    ) -> None:
        """Answer the held fetches that have something new (entries, a higher high watermark
        than the fetcher knows, or than it might know if it cannot say) or have waited long
        enough. Called only in steps that append nothing, so the log read is the log the node
        knows."""
        leader = self._leader
        if leader is None or not leader.parked or self.role is not Role.LEADER:
            return
        log_end = self._read_log().end_offset
        for source_id, fetch in list(leader.parked.items()):
            request = fetch.request
            if (
                fetch.deadline <= now
                or log_end > request.fetch_offset
                or self.high_watermark > request.high_watermark
                or (high_watermark_moved and request.high_watermark == HIGH_WATERMARK_NOT_SENT)
            ):
                del leader.parked[source_id]
                actions.append(Send(destination_id=source_id, message=self._fetch_records(request)))

    # Snapshots.

    def _handle_fetch_snapshot_request(
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
                current_leader_id=self.leader_id,
                current_leader_epoch=self.epoch,
                size=size,
                position=request.position,
                unaligned_records=data,
            )

        cluster_error = self._cluster_id_error(source_id, request.cluster_id, actions)
        if cluster_error is not None:
            return answer(error=cluster_error)
        if request.replica_id == self.node_id:
            reason = "a snapshot fetch names this node its sender"
            return answer(partition_error=self._refuse(source_id, "sender", reason, actions))
        error = self._leader_only_error(request.current_leader_epoch)
        if error is not None or self._leader is None:
            return answer(partition_error=error or ErrorCode.not_leader_or_follower)
        if request.replica_id in self.voter_set:
            self._leader.record_voter_fetch(request.replica_id, now)
            self._leader.acknowledge(request.replica_id)
        size = self._snapshots.size(request.snapshot_id) if self._snapshots else None
        if size is None:
            return answer(partition_error=ErrorCode.snapshot_not_found)
        if not 0 <= request.position <= size:
            return answer(partition_error=ErrorCode.position_out_of_range)
        assert self._snapshots is not None
        limit = max(1, min(request.max_bytes, self.config.snapshot_chunk_bytes))
        data = self._snapshots.read(request.snapshot_id, request.position, limit)
        return answer(size=size, data=data)

    def _handle_fetch_snapshot_response(
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
            self._fetching_snapshot = None  # the leader moved on: fetch to learn its newest
            return
        if self._fetch_answer_settled(source_id, response, now, actions):
            return
        snapshot_id = self._fetching_snapshot
        if (
            self.role is not Role.FOLLOWER
            or source_id != self.leader_id
            or request.current_leader_epoch != self.epoch
            or snapshot_id is None
            or request.snapshot_id != snapshot_id
            or response.snapshot_id != snapshot_id
            or request.position != self._snapshot_position
            or response.position != self._snapshot_position
        ):
            return
        self._heard_from_leader = self._leader_confirmed = True
        self._fetch_deadline = now + self.config.fetch_timeout_ms / 1000
        data = response.unaligned_records
        end = self._snapshot_position + len(data)
        if end > response.size or (not data and end < response.size):
            self._fetching_snapshot = None  # a chunk that does not fit: start over
            return
        actions.append(
            WriteSnapshotChunk(snapshot_id=snapshot_id, position=self._snapshot_position, data=data)
        )
        self._snapshot_position = end
        if end < response.size:
            return
        actions.append(InstallSnapshot(snapshot_id=snapshot_id))
        self._fetching_snapshot = None
        self._installed_log_start = snapshot_id.offset
        self._snapshot_voters_pending = True  # its header is readable once it is installed
        self.log_end_offset = self.flushed_offset = snapshot_id.offset
        self.last_epoch = snapshot_id.epoch
        # A snapshot holds only committed entries: its end is committed.
        self.high_watermark = max(self.high_watermark, snapshot_id.offset)
