"""The replication half of `RaftNode`: Fetch, as the leader answers it and as a follower or
observer sends it and takes in the answer (Kafka's KafkaRaftClient fetch paths, Fetch v12+).

The leader checks that the fetcher's log matches its own at the fetch offset (the epoch of the
entry before it, `last_fetched_epoch`); if not it answers with the diverging epoch (the largest
epoch at or below the fetcher's and where it ends) and the fetcher truncates there and fetches
again. A matching fetch tells the leader that every record below the offset is durable on the
fetcher, which may move the high watermark. A fetch with nothing new is held for up to
`fetch_max_wait_ms`, and answered sooner when the log grows or the high watermark moves.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.raft.events import AppendToLog, CommitUpTo, FlushLog, RaftAction, Send, TruncateLog
from moldau.raft.leader_state import ParkedFetch
from moldau.raft.log import LogEntry, OffsetAndEpoch, end_after_truncation
from moldau.raft.messages import NO_ERROR, FetchRequest, FetchResponse
from moldau.raft.node_state import NodeState, RaftSafetyError, Role


class ReplicationMixin(NodeState):
    # Fetching.

    def _maybe_send_fetch(self, now: float, actions: list[RaftAction]) -> None:
        if self.flushed_offset < self.log_end_offset:
            return  # fetch only from an offset that is durable here: the leader counts on it
        if self.role is Role.FOLLOWER:
            target = self._fetch_target if self._fetch_target is not None else self.leader_id
        elif self.role is Role.UNATTACHED and not self.is_voter:
            # An observer that knows no leader asks any voter; the answer names the leader.
            if self._requests.has_any_outstanding():
                return
            target = self._random.choice(self.voters)
        else:
            return
        if target is not None and target != self.node_id:
            self._send_request(target, self._fetch_request, now, actions)

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
            log_start_offset=0,
            partition_max_bytes=self.config.fetch_max_bytes,
            high_watermark=self.high_watermark,
        )

    def _handle_fetch_response(
        self,
        source_id: int,
        request: FetchRequest,
        response: FetchResponse,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        if response.error_code != NO_ERROR:
            self._requests.back_off(source_id, now)
            return
        leader_id, epoch = response.current_leader_id, response.current_leader_epoch
        if self._learned_from_response(leader_id, epoch, now, actions):
            return
        if response.partition_error_code != NO_ERROR:
            if self.role is Role.FOLLOWER and self.leader_id not in (None, source_id):
                self._fetch_target = self.leader_id  # the voter we asked named the leader
            else:
                self._requests.back_off(source_id, now)
            return
        if (
            self.role is not Role.FOLLOWER
            or source_id != self.leader_id
            or request.current_leader_epoch != self.epoch
            or request.fetch_offset != self.log_end_offset
            or request.last_fetched_epoch != self.last_epoch
        ):
            return
        self._heard_from_leader = True
        self._fetch_target = self.leader_id
        self._fetch_deadline = now + self.config.fetch_timeout_ms / 1000
        if response.diverging_epoch is not None:
            self._truncate_to_diverging(response.diverging_epoch, actions)
            return
        self._append_fetched(response.records, actions)
        # Never past what the leader committed, nor past our own log (which matches the
        # leader's up to its end now).
        high_watermark = min(response.high_watermark, self.log_end_offset)
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
            actions.append(CommitUpTo(high_watermark=high_watermark))

    def _truncate_to_diverging(self, diverging: OffsetAndEpoch, actions: list[RaftAction]) -> None:
        log = self._read_log()
        local = log.end_offset_for_epoch(diverging.epoch)
        end = end_after_truncation(log, min(diverging.offset, local.offset))
        if end.offset < self.high_watermark:
            raise RaftSafetyError(
                f"node {self.node_id} was told to truncate to {end.offset}, below its high "
                f"watermark {self.high_watermark}"
            )
        if end.offset < self.log_end_offset:
            actions.append(TruncateLog(offset=end.offset))
            self.log_end_offset = end.offset
            self.last_epoch = end.epoch
            self.flushed_offset = min(self.flushed_offset, end.offset)

    def _append_fetched(self, records: tuple[LogEntry, ...], actions: list[RaftAction]) -> None:
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
        if appended:
            actions.append(FlushLog())

    # Answering fetches (the leader).

    def _handle_fetch_request(
        self, source_id: int, request: FetchRequest, now: float, actions: list[RaftAction]
    ) -> FetchResponse | None:
        """The answer, or None when the fetch is held until there is something to say."""
        if not self._cluster_id_matches(request.cluster_id):
            return FetchResponse(
                correlation_id=request.correlation_id,
                error_code=ErrorCode.inconsistent_cluster_id,
                current_leader_id=self.leader_id,
                current_leader_epoch=self.epoch,
            )
        if (
            request.max_wait_ms < 0
            or request.fetch_offset < 0
            or request.last_fetched_epoch < 0
            or request.last_fetched_epoch > request.current_leader_epoch
        ):
            return FetchResponse(
                correlation_id=request.correlation_id,
                partition_error_code=ErrorCode.invalid_request,
                current_leader_id=self.leader_id,
                current_leader_epoch=self.epoch,
            )
        leader = self._leader
        if self._leader_only_error(request.current_leader_epoch) is not None or leader is None:
            return self._fetch_error(request)
        leader.parked.pop(source_id, None)  # a newer fetch from the same replica replaces it
        replica_id = request.replica_id
        if replica_id in self.voter_set:
            leader.record_voter_fetch(replica_id, now)
            leader.acknowledge(replica_id)
        log = self._read_log()
        divergence = log.end_offset_for_epoch(request.last_fetched_epoch)
        if (
            divergence.epoch != request.last_fetched_epoch
            or divergence.offset < request.fetch_offset
        ):
            return FetchResponse(
                correlation_id=request.correlation_id,
                high_watermark=self.high_watermark,
                log_start_offset=0,
                diverging_epoch=divergence,
                current_leader_id=self.node_id,
                current_leader_epoch=self.epoch,
            )
        if replica_id >= 0 and replica_id != self.node_id:
            leader.update_replica(
                replica_id,
                fetch_offset=request.fetch_offset,
                leader_end_offset=self.log_end_offset,
                now=now,
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
            log_start_offset=0,
            current_leader_id=self.node_id,
            current_leader_epoch=self.epoch,
            records=tuple(e for e in entries if e.base_offset >= request.fetch_offset),
        )

    def _advance_high_watermark(self, now: float, actions: list[RaftAction]) -> None:
        leader = self._leader
        if leader is None:
            return
        high_watermark = leader.next_high_watermark(self.high_watermark)
        if high_watermark is None:
            return
        self.high_watermark = high_watermark
        actions.append(CommitUpTo(high_watermark=high_watermark))
        self._complete_parked_fetches(now, actions)

    def _complete_parked_fetches(self, now: float, actions: list[RaftAction]) -> None:
        """Answer the held fetches that have something new (entries, a higher high watermark)
        or have waited long enough. Called only in steps that append nothing, so the log read
        is the log the node knows."""
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
            ):
                del leader.parked[source_id]
                actions.append(Send(destination_id=source_id, message=self._fetch_records(request)))
