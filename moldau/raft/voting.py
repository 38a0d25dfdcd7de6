"""Elections, a part of `RaftNode` working on its `QuorumState`: Vote (and KIP-996 pre-vote),
BeginQuorumEpoch and EndQuorumEpoch, both as sender and receiver, as Kafka's KafkaRaftClient
handles them.

A vote is granted only to a candidate whose log (last epoch, then end offset) is at least as up
to date as ours, once per epoch, and persisted before the response leaves. A pre-vote is
granted on the log alone and changes nothing, except that a follower that hears from its
leader refuses it. Every request is checked before it touches the state: another cluster's
gets INCONSISTENT_CLUSTER_ID (one without a cluster id is taken, as Kafka takes it); one from
an older epoch, FENCED_LEADER_EPOCH; one addressed to another node id, or naming another
directory id for the receiver than its own (its metadata log was lost and it must not vote as
the voter that had it), INVALID_VOTER_KEY; one that cannot be true (a sender speaking as this
node, an epoch no election could follow, another leader of an epoch whose leader this node is
or has heard from), INVALID_REQUEST and a `Refused` action. Whether the sender or the receiver
is in the receiver's voter set is not checked, whatever its kraft.version (KIP-853): that set
may lag the sender's.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.raft.claims import cluster_id_error, learn, learned_from_response, refuse
from moldau.raft.election import successor_backoff_ms
from moldau.raft.epoch_states import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    Role,
    UnattachedState,
)
from moldau.raft.events import RaftAction, Refused
from moldau.raft.leader_state import LeaderState, ResignedState
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.messages import (
    NO_ERROR,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.quorum import LAST_EPOCH, QuorumState

AnyElectionResponse = VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse


__all__ = ["Elections"]


class Elections:
    def __init__(self, quorum: QuorumState) -> None:
        self.quorum = quorum

    # Requests out.

    def vote_request(self, destination_id: int, correlation_id: int) -> VoteRequest:
        quorum = self.quorum
        return VoteRequest(
            correlation_id=correlation_id,
            cluster_id=quorum.cluster_id,
            voter_id=destination_id,
            replica_id=quorum.node_id,
            replica_epoch=quorum.epoch,
            last_offset_epoch=quorum.last_epoch,
            last_offset=quorum.log_end_offset,
            pre_vote=quorum.role is Role.PROSPECTIVE,
            voter_directory_id=self._directory_id_of(destination_id),
        )

    def _directory_id_of(self, voter_id: int) -> str | None:
        voter = self.quorum.voter_set.get(voter_id)
        return voter.directory_id if voter is not None else None

    def begin_quorum_epoch_request(
        self, destination_id: int, correlation_id: int
    ) -> BeginQuorumEpochRequest:
        quorum = self.quorum
        return BeginQuorumEpochRequest(
            correlation_id=correlation_id,
            cluster_id=quorum.cluster_id,
            voter_id=destination_id,
            leader_id=quorum.node_id,
            leader_epoch=quorum.epoch,
            voter_directory_id=self._directory_id_of(destination_id),
        )

    def end_quorum_epoch_request(
        self, destination_id: int, correlation_id: int
    ) -> EndQuorumEpochRequest:
        """(Sent by a resigned leader, naming its successors.)"""
        quorum = self.quorum
        state = quorum.state
        return EndQuorumEpochRequest(
            correlation_id=correlation_id,
            cluster_id=quorum.cluster_id,
            leader_id=quorum.node_id,
            leader_epoch=state.epoch,
            preferred_candidates=state.successors if isinstance(state, ResignedState) else (),
        )

    # Requests in.

    def _voter_only_error(
        self,
        remote_id: int,
        epoch: int,
        receiver_id: int | None,
        receiver_directory_id: str | None,
        actions: list[RaftAction],
    ) -> ErrorCode | None:
        """Kafka's validateVoterOnlyRequest and isValidVoterKey, before anything changes: an
        older epoch is FENCED_LEADER_EPOCH; a sender id below 0, one that is this node's own
        id (it never sends these to itself) or an epoch no election could follow is
        INVALID_REQUEST; a voter key (v1+) naming another node or another directory is
        INVALID_VOTER_KEY."""
        quorum = self.quorum
        if epoch < quorum.epoch:
            return ErrorCode.fenced_leader_epoch
        if remote_id < 0:
            return ErrorCode.invalid_request
        if remote_id == quorum.node_id:
            return refuse(
                remote_id, "sender", f"a message names this node ({remote_id}) its sender", actions
            )
        if epoch >= LAST_EPOCH:
            return refuse(
                remote_id, "epoch", f"epoch {epoch} leaves no room for an election", actions
            )
        if (receiver_id is not None and receiver_id >= 0 and receiver_id != quorum.node_id) or (
            receiver_directory_id is not None
            and quorum.directory_id is not None
            and receiver_directory_id != quorum.directory_id
        ):
            # Meant for another node, or for the voter whose metadata log was in another
            # directory: this one lost that log (a replaced disk), and its vote must not count
            # (KIP-853).
            actions.append(
                Refused(
                    source_id=remote_id,
                    kind="voter-key",
                    reason=f"node {remote_id} addressed voter {receiver_id} (directory "
                    f"{receiver_directory_id}), not this node (directory {quorum.directory_id})",
                )
            )
            return ErrorCode.invalid_voter_key
        # Neither the sender nor this node need be in this node's voter set: that set may lag
        # the sender's (a voter added or removed in entries not fetched yet, the kraft.version
        # upgrade itself), and a voter that does not know it is one may hold the vote a
        # leader needs to be elected and to tell it so. The sender counts only the answers
        # of voters in its own set (KIP-853, Kafka's validateVoterOnlyRequest).
        return None

    def handle_vote_request(
        self, request: VoteRequest, now: float, actions: list[RaftAction]
    ) -> VoteResponse:
        cluster_error = cluster_id_error(
            self.quorum, request.replica_id, request.cluster_id, actions
        )
        if cluster_error is not None:
            return self._vote_response(request, error=cluster_error)
        # A candidate has moved past the epoch of its last entry; a prospective has not.
        last_epoch_too_large = (
            request.last_offset_epoch > request.replica_epoch
            if request.pre_vote
            else request.last_offset_epoch >= request.replica_epoch
        )
        if request.last_offset < 0 or request.last_offset_epoch < 0 or last_epoch_too_large:
            return self._vote_response(request, partition_error=ErrorCode.invalid_request)
        candidate_id = request.replica_id
        error = self._voter_only_error(
            candidate_id,
            request.replica_epoch,
            request.voter_id,
            request.voter_directory_id,
            actions,
        )
        if error is not None:
            return self._vote_response(request, partition_error=error)
        if request.replica_epoch > self.quorum.epoch and (
            not request.pre_vote or self.quorum.role is Role.LEADER
        ):
            # A pre-vote from a later epoch than the leader's own comes from a voter stranded
            # there: it won pre-votes once but its votes were lost, and it can neither follow
            # an older epoch nor win one itself. The leader steps aside so that the quorum
            # moves past that epoch (as etcd's leader does for a stranded peer).
            self.quorum.become_unattached(request.replica_epoch, now, actions)
        candidate_log = OffsetAndEpoch(epoch=request.last_offset_epoch, offset=request.last_offset)
        local_log = OffsetAndEpoch(epoch=self.quorum.last_epoch, offset=self.quorum.log_end_offset)
        granted = self.can_grant_vote(
            candidate_id, up_to_date=candidate_log >= local_log, pre_vote=request.pre_vote
        )
        state = self.quorum.state
        if (
            granted
            and not request.pre_vote
            and state.voted_id is None
            and isinstance(state, UnattachedState | ProspectiveState)
        ):
            state.voted_id = candidate_id
            self.quorum.persist(actions)  # durable before the response granting it is sent
            state.election_deadline = self.quorum.new_election_deadline(now)
        return self._vote_response(request, granted=granted)

    def can_grant_vote(self, candidate_id: int, *, up_to_date: bool, pre_vote: bool) -> bool:
        match self.quorum.role:
            case Role.LEADER | Role.RESIGNED:
                return False
            case Role.CANDIDATE:
                return pre_vote and up_to_date  # its own vote went to itself
            case Role.FOLLOWER:
                # A voter that hears from its leader refuses pre-votes, so a node that was cut
                # off cannot disrupt a healthy quorum when it comes back (KIP-996).
                state = self.quorum.state
                heard = isinstance(state, FollowerState) and state.heard_from_leader
                return pre_vote and up_to_date and not heard
            case Role.UNATTACHED | Role.PROSPECTIVE:
                if pre_vote:
                    return up_to_date
                if self.quorum.voted_id is not None:
                    # Again only on the log: a vote recorded for a voter's id may have been
                    # asked for by another node in its name, claiming a longer log than the
                    # voter's own (Kafka grants it again on the id alone).
                    return self.quorum.voted_id == candidate_id and up_to_date
                return self.quorum.leader_id is None and up_to_date

    def _vote_response(
        self,
        request: VoteRequest,
        *,
        error: ErrorCode = NO_ERROR,
        partition_error: ErrorCode = NO_ERROR,
        granted: bool = False,
    ) -> VoteResponse:
        return VoteResponse(
            correlation_id=request.correlation_id,
            error_code=error,
            partition_error_code=partition_error,
            leader_id=self.quorum.leader_id,
            leader_epoch=self.quorum.epoch,
            vote_granted=granted,
        )

    def handle_begin_quorum_epoch_request(
        self, request: BeginQuorumEpochRequest, now: float, actions: list[RaftAction]
    ) -> BeginQuorumEpochResponse:
        errors = self._accept_from_leader(
            request, request.voter_id, now, actions, request.voter_directory_id
        )
        return BeginQuorumEpochResponse(
            correlation_id=request.correlation_id,
            error_code=errors[0],
            partition_error_code=errors[1],
            leader_id=self.quorum.leader_id,
            leader_epoch=self.quorum.epoch,
        )

    def handle_end_quorum_epoch_request(
        self, request: EndQuorumEpochRequest, now: float, actions: list[RaftAction]
    ) -> EndQuorumEpochResponse:
        errors = self._accept_from_leader(request, None, now, actions)
        if errors == (NO_ERROR, NO_ERROR):
            self._shorten_fetch_timeout(request, now)
        return EndQuorumEpochResponse(
            correlation_id=request.correlation_id,
            error_code=errors[0],
            partition_error_code=errors[1],
            leader_id=self.quorum.leader_id,
            leader_epoch=self.quorum.epoch,
        )

    def _accept_from_leader(
        self,
        request: BeginQuorumEpochRequest | EndQuorumEpochRequest,
        receiver_id: int | None,
        now: float,
        actions: list[RaftAction],
        receiver_directory_id: str | None = None,
    ) -> tuple[ErrorCode, ErrorCode]:
        """Check a leader's announcement and learn from it; the top-level and partition
        errors of the answer."""
        cluster_error = cluster_id_error(
            self.quorum, request.leader_id, request.cluster_id, actions
        )
        if cluster_error is not None:
            return cluster_error, NO_ERROR
        error = self._voter_only_error(
            request.leader_id, request.leader_epoch, receiver_id, receiver_directory_id, actions
        ) or learn(
            self.quorum,
            request.leader_id,
            request.leader_epoch,
            now,
            actions,
            source_id=request.leader_id,
            from_leader=True,
        )
        return NO_ERROR, error or NO_ERROR

    def _shorten_fetch_timeout(self, request: EndQuorumEpochRequest, now: float) -> None:
        """A follower of the resigning leader stands after a delay given by its place among the
        leader's preferred successors (the first at once)."""
        quorum = self.quorum
        state, node_id = quorum.state, quorum.node_id
        if (
            not isinstance(state, FollowerState)
            or state.leader_id != request.leader_id
            or state.epoch != request.leader_epoch
        ):
            return
        successors = request.preferred_candidates
        position = successors.index(node_id) if node_id in successors else 0
        backoff = successor_backoff_ms(
            position, len(successors), quorum.config.election_backoff_max_ms
        )
        state.fetch_deadline = min(state.fetch_deadline, now + backoff / 1000)
        # The leader said it is gone: grant the other voters' pre-votes from now on.
        state.heard_from_leader = False

    # Responses in.

    def _handle_election_response(
        self,
        source_id: int,
        response: AnyElectionResponse,
        now: float,
        actions: list[RaftAction],
    ) -> bool:
        """Errors, a newer epoch or a new leader; True when nothing is left to do with it."""
        if response.error_code != NO_ERROR:
            self.quorum.requests.back_off(source_id, now)
            return True
        if learned_from_response(
            self.quorum, source_id, response.leader_id, response.leader_epoch, now, actions
        ):
            return True
        if response.partition_error_code != NO_ERROR:
            self.quorum.requests.back_off(source_id, now)
            return True
        return False

    def handle_vote_response(
        self,
        source_id: int,
        request: VoteRequest,
        response: VoteResponse,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        # A pre-vote is about logs, not epochs: a voter an epoch behind may still grant one.
        quorum = self.quorum
        behind = request.pre_vote and response.leader_epoch < quorum.epoch
        if behind:
            if response.error_code != NO_ERROR or response.partition_error_code != NO_ERROR:
                quorum.requests.back_off(source_id, now)
                return
        elif self._handle_election_response(source_id, response, now, actions):
            return
        state = quorum.state
        if request.replica_epoch != state.epoch:
            return
        if request.pre_vote and isinstance(state, ProspectiveState):
            state.tally.record(source_id, response.vote_granted)
            if state.tally.is_won:
                quorum.become_candidate(now, actions)
            elif state.tally.is_lost:
                quorum.prospective_lost(now, actions)
        elif not request.pre_vote and isinstance(state, CandidateState):
            state.tally.record(source_id, response.vote_granted)
            if state.tally.is_won:
                quorum.become_leader(now, actions)
            elif state.tally.is_lost and state.backoff_deadline is None:
                quorum.start_backoff(state, now)

    def handle_begin_quorum_epoch_response(
        self,
        source_id: int,
        request: BeginQuorumEpochRequest,
        response: BeginQuorumEpochResponse,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        if self._handle_election_response(source_id, response, now, actions):
            return
        state = self.quorum.state
        if isinstance(state, LeaderState) and request.leader_epoch == state.epoch:
            state.acknowledge(source_id)

    def handle_end_quorum_epoch_response(
        self,
        source_id: int,
        request: EndQuorumEpochRequest,
        response: EndQuorumEpochResponse,
        now: float,
        actions: list[RaftAction],
    ) -> None:
        if self._handle_election_response(source_id, response, now, actions):
            return
        state = self.quorum.state
        if isinstance(state, ResignedState) and request.leader_epoch == state.epoch:
            state.unacknowledged.discard(source_id)
