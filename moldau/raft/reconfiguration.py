"""Voter changes on the leader (KIP-853; Kafka's AddVoterHandler, RemoveVoterHandler and
UpdateVoterHandler): each appends a VotersRecord with the new voter set as a control entry;
and the kraft.version upgrade from static to dynamic voters (Kafka's
LeaderState.maybeAppendUpgradedKRaftVersion), one control entry holding KRaftVersionRecord(1)
and a VotersRecord of the static voters with their directory ids and endpoints.

One change at a time, so that any majority of the old set and any majority of the new one
share a voter: a change is refused while an earlier one is not committed, and until the leader
has committed an entry of its own epoch (without that, a change of an earlier leader that a new
leader has not seen could combine with a new one into two disjoint majorities). The new set
counts from the moment the record is appended (the high watermark then needs a majority of
it), and the change is complete when it commits. A voter to add must be an observer that has
fetched up to the leader's log end within the fetch timeout (its directory id as its fetches
name it), or the new majority could stall waiting for it. A leader that removes itself leads on
until the change commits, without counting itself, then resigns (`replication.py`).

The upgrade (0 -> 1) needs what a VotersRecord holds for every voter: its directory id (the
leader's own, the others' from the Fetch requests they sent it in this epoch, Fetch v17's
ReplicaDirectoryId) and its endpoints (`static_voter_endpoints`, from controller.quorum.voters).
Until it knows them all it refuses with INVALID_UPDATE_VERSION (Kafka refuses so while a voter
has not told the leader about itself). Asking again for the version in the log, committed or
not, changes nothing (Kafka's no-op); a lower one is a downgrade, refused. It counts as a voter
change: a change is refused while it is uncommitted, and a truncated upgrade entry takes the
node back to the static voters (`VoterSetHistory`). That every voter's software supports
level 1 is checked above the core, from the controllers' registrations (KIP-919).
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.control_records import kraft_version_payload, voters_payload
from moldau.raft.events import AddVoter, RaftAction, RemoveVoter, UpdateVoter, UpgradeKRaftVersion
from moldau.raft.leader_state import LeaderState
from moldau.raft.quorum import NotLeaderError, QuorumState
from moldau.raft.voter_set import (
    KRAFT_VERSION_DYNAMIC,
    KRAFT_VERSION_STATIC,
    VoterNode,
    VoterSet,
)

__all__ = ["Reconfiguration"]


class Reconfiguration:
    """The leader's side of voter changes and of the kraft.version upgrade, a part of `RaftNode`
    working on its `QuorumState`; each raises KafkaError (or NotLeaderError) to refuse."""

    def __init__(self, quorum: QuorumState) -> None:
        self.quorum = quorum

    def add_voter(self, event: AddVoter, now: float, actions: list[RaftAction]) -> None:
        voter = event.voter
        leader = self.ready_for_voter_change()
        if voter.node_id in self.quorum.voter_set:
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
        self._append_voter_set(self.quorum.voter_set.adding(voter), now, actions)

    def remove_voter(self, event: RemoveVoter, now: float, actions: list[RaftAction]) -> None:
        quorum = self.quorum
        self.ready_for_voter_change()
        if not quorum.voter_set.has_voter(event.voter_id, event.directory_id):
            raise KafkaError(
                ErrorCode.voter_not_found,
                f"node {event.voter_id} (directory {event.directory_id}) is not a voter "
                f"of {list(quorum.voters)}",
            )
        remaining = quorum.voter_set.removing(event.voter_id)
        if not remaining.nodes:
            raise KafkaError(ErrorCode.invalid_request, "the last voter cannot be removed")
        self._append_voter_set(remaining, now, actions)

    def update_voter(self, event: UpdateVoter, now: float, actions: list[RaftAction]) -> None:
        voter = event.voter
        self.ready_for_voter_change()
        current = self.quorum.voter_set.get(voter.node_id)
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
            self._append_voter_set(self.quorum.voter_set.updating(updated), now, actions)

    def upgrade_kraft_version(
        self, event: UpgradeKRaftVersion, now: float, actions: list[RaftAction]
    ) -> None:
        quorum = self.quorum
        leader = self._leading()
        version = event.version
        if not KRAFT_VERSION_STATIC <= version <= KRAFT_VERSION_DYNAMIC:
            raise KafkaError(
                ErrorCode.invalid_update_version,
                f"kraft.version {version} is not supported (0-{KRAFT_VERSION_DYNAMIC})",
            )
        if version == quorum.kraft_version:
            return  # in the log already (committed or not): nothing to do
        if version < quorum.kraft_version:
            raise KafkaError(
                ErrorCode.invalid_update_version,
                f"Invalid upgrade of kraft.version from version {quorum.kraft_version} to "
                f"{version} because the new version is a downgrade",
            )
        self._check_epoch_committed()
        voters = self._voters_with_directories(leader)
        if not event.validate_only:
            records = (kraft_version_payload(version), voters_payload(voters))
            quorum.append_as_leader(records, actions, is_control=True, now=now)

    def _voters_with_directories(self, leader: LeaderState) -> VoterSet:
        """The static voters with the directory ids and endpoints a VotersRecord names; raises
        INVALID_UPDATE_VERSION while one of them is unknown."""
        quorum = self.quorum
        nodes = []
        for voter_id in quorum.voters:
            if voter_id == quorum.node_id:
                directory_id = quorum.directory_id
            else:
                progress = leader.voter_progress.get(voter_id)
                directory_id = progress.directory_id if progress is not None else None
            if directory_id is None:
                raise KafkaError(
                    ErrorCode.invalid_update_version,
                    f"Invalid upgrade of kraft.version to {KRAFT_VERSION_DYNAMIC}: the directory "
                    f"id of voter {voter_id} is not known yet (it has not fetched from the "
                    "leader with it); retry once every voter follows the leader",
                )
            endpoints = quorum.static_voter_endpoints.get(voter_id, ())
            if not endpoints:
                raise KafkaError(
                    ErrorCode.invalid_update_version,
                    f"Invalid upgrade of kraft.version to {KRAFT_VERSION_DYNAMIC}: the "
                    f"endpoint of voter {voter_id} is not known (controller.quorum.voters)",
                )
            nodes.append(
                VoterNode(node_id=voter_id, directory_id=directory_id, endpoints=endpoints)
            )
        return VoterSet.of_nodes(nodes)

    def _leading(self) -> LeaderState:
        quorum = self.quorum
        leader = quorum.state
        if not isinstance(leader, LeaderState):
            raise NotLeaderError(quorum.leader_id, quorum.epoch)
        return leader

    def _check_epoch_committed(self) -> None:
        if self.quorum.high_watermark <= self.quorum.epoch_start_offset:
            raise KafkaError(
                ErrorCode.request_timed_out,
                "the leader has not committed an entry of its epoch yet; retry",
            )

    def ready_for_voter_change(self) -> LeaderState:
        """The leader's state, if it may change the voters now; raises why not otherwise."""
        leader = self._leading()
        if self.quorum.kraft_version < KRAFT_VERSION_DYNAMIC:
            raise KafkaError(
                ErrorCode.unsupported_version,
                "the quorum's voters are static (controller.quorum.voters, kraft.version 0); "
                "upgrade kraft.version to 1 (moldau feature upgrade --feature kraft.version=1) "
                "or format the controllers with --standalone or --initial-controllers",
            )
        self._check_epoch_committed()
        if self.quorum.last_voter_change_offset >= self.quorum.high_watermark:
            raise KafkaError(
                ErrorCode.request_timed_out,
                "an earlier voter change is not committed yet; retry once it is",
            )
        return leader

    def _append_voter_set(self, voters: VoterSet, now: float, actions: list[RaftAction]) -> None:
        self.quorum.append_as_leader((voters_payload(voters),), actions, is_control=True, now=now)

    def _fetch_timeout(self) -> float:
        return self.quorum.config.fetch_timeout_ms / 1000
