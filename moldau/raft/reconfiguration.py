"""Voter changes on the leader (KIP-853; Kafka's AddVoterHandler, RemoveVoterHandler and
UpdateVoterHandler): each appends a VotersRecord with the new voter set as a control entry.

One change at a time, so that any majority of the old set and any majority of the new one
share a voter: a change is refused while an earlier one is not committed, and until the leader
has committed an entry of its own epoch (without that, a change of an earlier leader that a new
leader has not seen could combine with a new one into two disjoint majorities). The new set
counts from the moment the record is appended (the high watermark then needs a majority of
it), and the change is complete when it commits. A voter to add must be an observer that has
fetched up to the leader's log end within the fetch timeout (its directory id as its fetches
name it), or the new majority could stall waiting for it. A leader that removes itself leads on
until the change commits, without counting itself, then resigns (`replication.py`).
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.control_records import voters_payload
from moldau.raft.events import AddVoter, RaftAction, RemoveVoter, UpdateVoter
from moldau.raft.leader_state import LeaderState
from moldau.raft.node_state import NodeState, NotLeaderError, Role
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC, VoterNode, VoterSet


class ReconfigurationMixin(NodeState):
    def _add_voter(self, event: AddVoter, now: float, actions: list[RaftAction]) -> None:
        voter = event.voter
        leader = self._ready_for_voter_change()
        if voter.node_id in self.voter_set:
            raise KafkaError(ErrorCode.duplicate_voter, f"node {voter.node_id} is already a voter")
        if voter.directory_id is None:
            raise KafkaError(ErrorCode.invalid_request, "a new voter needs its directory id")
        progress = leader.observer_progress.get(voter.node_id)
        caught_up = progress.last_caught_up_time if progress is not None else None
        if progress is None or caught_up is None or now - caught_up > self._fetch_timeout():
            raise KafkaError(
                ErrorCode.request_timed_out,
                f"node {voter.node_id} is not an observer that has caught up with the "
                "leader's log; start it with controller.quorum.bootstrap.servers and retry",
            )
        if progress.directory_id is not None and progress.directory_id != voter.directory_id:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"node {voter.node_id} fetches with directory id {progress.directory_id}, "
                f"not {voter.directory_id}",
            )
        self._append_voter_set(self.voter_set.adding(voter), now, actions)

    def _remove_voter(self, event: RemoveVoter, now: float, actions: list[RaftAction]) -> None:
        self._ready_for_voter_change()
        if not self.voter_set.has_voter(event.voter_id, event.directory_id):
            raise KafkaError(
                ErrorCode.voter_not_found,
                f"node {event.voter_id} (directory {event.directory_id}) is not a voter "
                f"of {list(self.voters)}",
            )
        remaining = self.voter_set.removing(event.voter_id)
        if not remaining.nodes:
            raise KafkaError(ErrorCode.invalid_request, "the last voter cannot be removed")
        self._append_voter_set(remaining, now, actions)

    def _update_voter(self, event: UpdateVoter, now: float, actions: list[RaftAction]) -> None:
        voter = event.voter
        self._ready_for_voter_change()
        current = self.voter_set.get(voter.node_id)
        if current is None or not current.matches(voter.node_id, voter.directory_id):
            raise KafkaError(
                ErrorCode.voter_not_found,
                f"node {voter.node_id} (directory {voter.directory_id}) is not a voter",
            )
        updated = VoterNode(
            node_id=current.node_id,
            directory_id=current.directory_id,
            endpoints=voter.endpoints,
        )
        if updated != current:
            self._append_voter_set(self.voter_set.updating(updated), now, actions)

    def _ready_for_voter_change(self) -> LeaderState:
        """The leader's state, if it may change the voters now; raises why not otherwise."""
        leader = self._leader
        if self.role is not Role.LEADER or leader is None:
            raise NotLeaderError(self.leader_id, self.epoch)
        if self.kraft_version < KRAFT_VERSION_DYNAMIC:
            raise KafkaError(
                ErrorCode.unsupported_version,
                "the quorum's voters are static (controller.quorum.voters, kraft.version 0); "
                "format the controllers with --standalone or --initial-controllers for "
                "dynamic voters",
            )
        if self.high_watermark <= self.epoch_start_offset:
            raise KafkaError(
                ErrorCode.request_timed_out,
                "the leader has not committed an entry of its epoch yet; retry",
            )
        if self._history.last_change_offset >= self.high_watermark:
            raise KafkaError(
                ErrorCode.request_timed_out,
                "an earlier voter change is not committed yet; retry once it is",
            )
        return leader

    def _append_voter_set(self, voters: VoterSet, now: float, actions: list[RaftAction]) -> None:
        self._append_as_leader((voters_payload(voters),), actions, is_control=True, now=now)

    def _fetch_timeout(self) -> float:
        return self.config.fetch_timeout_ms / 1000
