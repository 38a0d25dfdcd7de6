"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and retention (Kafka's
OffsetMetadataManager).

A commit is validated against the group (generation and member for classic groups, member epoch
for KIP-848 groups; simple consumers commit with generation -1 and no member id to a group with
no members), then written as OffsetCommit records. Offsets of an empty group expire
`offsets.retention.minutes` after the later of the commit and the moment the group became empty
(KIP-211); a classic group left with neither members nor offsets is then deleted. The offsets
of a deleted topic are deleted with it (`delete_offsets_of_topics`, Kafka's
`onPartitionsDeleted`).
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.clock import Clock
from moldau.coordinator.classic_group import ClassicGroup, ClassicGroupState
from moldau.coordinator.config import GroupCoordinatorConfig
from moldau.coordinator.consumer_group import ConsumerGroup
from moldau.coordinator.records import (
    CoordinatorRecord,
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
)
from moldau.coordinator.result import CoordinatorResult, Response
from moldau.coordinator.share_group import ShareGroup
from moldau.coordinator.store import GroupStore, OffsetKey
from moldau.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


def _answer_partitions(
    commits: list[PartitionCommit], codes: dict[tuple[str, int], ErrorCode]
) -> Response:
    topics: dict[str, list[Response]] = {}
    for commit in commits:
        topics.setdefault(commit.topic, []).append(
            {
                "partition_index": commit.partition,
                "error_code": codes.get((commit.topic, commit.partition), ErrorCode.none),
            }
        )
    return {
        "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]
    }


class OffsetManager:
    def __init__(self, store: GroupStore, config: GroupCoordinatorConfig, clock: Clock) -> None:
        self._store = store
        self._config = config
        self._clock = clock

    def _validate_commit(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        group = self._store.groups.get(group_id)
        if group is None:
            return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
        if isinstance(group, ConsumerGroup):
            if not member_id and generation_id < 0:
                return ErrorCode.none  # an admin or simple commit
            member = group.members.get(member_id)
            if member is None:
                return ErrorCode.unknown_member_id
            if generation_id != member.member_epoch:
                return ErrorCode.stale_member_epoch
            return ErrorCode.none
        if isinstance(group, ShareGroup):  # share groups commit no offsets (KIP-932)
            return ErrorCode.group_id_not_found
        if group.is_in(ClassicGroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and not member_id and instance_id is None:
            if group.is_in(ClassicGroupState.EMPTY):
                return ErrorCode.none
            return ErrorCode.unknown_member_id
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation:
            return ErrorCode.illegal_generation
        if group.is_in(ClassicGroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def commit_offsets_refused(
        self, commits: list[PartitionCommit], code: ErrorCode
    ) -> CoordinatorResult:
        codes = {(commit.topic, commit.partition): code for commit in commits}
        return CoordinatorResult(response=_answer_partitions(commits, codes))

    def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[PartitionCommit],
    ) -> CoordinatorResult:
        """OffsetCommit; the response has per-partition error codes (topics by name)."""
        if not group_id:
            return self.commit_offsets_refused(commits, ErrorCode.invalid_group_id)
        error = self._validate_commit(group_id, generation_id, member_id, group_instance_id)
        if error != ErrorCode.none:
            return self.commit_offsets_refused(commits, error)
        now = self._clock.now_ms()
        result = CoordinatorResult()
        codes = {}
        for commit in commits:
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                codes[(commit.topic, commit.partition)] = ErrorCode.offset_metadata_too_large
                continue
            result.records.append(
                CoordinatorRecord(
                    OffsetCommitKey(
                        group_id=group_id, topic=commit.topic, partition=commit.partition
                    ),
                    OffsetCommitValue(
                        offset=commit.offset,
                        leader_epoch=commit.leader_epoch,
                        metadata=metadata,
                        commit_timestamp=now,
                    ),
                )
            )
        for record in result.records:
            self._store.replay(record, now)
        result.response = _answer_partitions(commits, codes)
        return result

    def txn_commit_offsets(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        commits: list[PartitionCommit],
    ) -> CoordinatorResult:
        """TxnOffsetCommit: the offsets stay pending until the transaction's marker (KIP-98);
        v3+ clients send their group generation and member, checked as Kafka does (KIP-447)."""
        if not group_id:
            return self.commit_offsets_refused(commits, ErrorCode.invalid_group_id)
        if member_id or generation_id >= 0:
            error = self._validate_commit(group_id, generation_id, member_id, group_instance_id)
            if error == ErrorCode.stale_member_epoch:
                error = ErrorCode.illegal_generation
            elif error == ErrorCode.rebalance_in_progress:
                error = ErrorCode.none
            if error != ErrorCode.none:
                return self.commit_offsets_refused(commits, error)
        now = self._clock.now_ms()
        result = CoordinatorResult(producer=(producer_id, producer_epoch))
        codes = {}
        for commit in commits:
            metadata = commit.metadata or ""
            if len(metadata.encode()) > self._config.offset_metadata_max_bytes:
                codes[(commit.topic, commit.partition)] = ErrorCode.offset_metadata_too_large
                continue
            record = CoordinatorRecord(
                OffsetCommitKey(group_id=group_id, topic=commit.topic, partition=commit.partition),
                OffsetCommitValue(
                    offset=commit.offset,
                    leader_epoch=commit.leader_epoch,
                    metadata=metadata,
                    commit_timestamp=now,
                ),
            )
            result.records.append(record)
            self._store.replay_transactional(producer_id, record)
        result.response = _answer_partitions(commits, codes)
        return result

    def fetch_offsets(
        self,
        *,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> Response:
        """One group of OffsetFetch: offset -1 and no error for what was never committed."""
        group = self._store.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and member_id:
            member = group.members.get(member_id)
            code = None
            if member is None:
                code = ErrorCode.unknown_member_id
            elif member_epoch != member.member_epoch:
                code = ErrorCode.stale_member_epoch
            if code is not None:
                return {"group_id": group_id, "error_code": code, "topics": []}
        committed = self._store.offsets.get(group_id, {})
        if topics is None:
            by_topic: dict[str, list[int]] = {}
            for where in committed:
                by_topic.setdefault(where.topic, []).append(where.partition)
            topics = [(name, sorted(partitions)) for name, partitions in sorted(by_topic.items())]
        answer_topics = []
        for name, partitions in topics:
            answers = []
            for partition in partitions:
                if require_stable and self._store.transactional.has_pending(
                    group_id, name, partition
                ):
                    answers.append(
                        {
                            "partition_index": partition,
                            "committed_offset": -1,
                            "committed_leader_epoch": -1,
                            "metadata": "",
                            "error_code": ErrorCode.unstable_offset_commit,
                        }
                    )
                    continue
                value = committed.get(OffsetKey(name, partition))
                answers.append(
                    {
                        "partition_index": partition,
                        "committed_offset": value.offset if value else -1,
                        "committed_leader_epoch": value.leader_epoch if value else -1,
                        "metadata": value.metadata if value else "",
                        "error_code": ErrorCode.none,
                    }
                )
            answer_topics.append({"name": name, "partitions": answers})
        return {"group_id": group_id, "error_code": ErrorCode.none, "topics": answer_topics}

    def delete_offsets(
        self, *, group_id: str, topics: list[tuple[str, list[int]]]
    ) -> CoordinatorResult:
        """OffsetDelete: refused per partition while the group's members subscribe the topic."""
        group = self._store.groups.get(group_id)
        if (
            group is None
            or isinstance(group, ShareGroup)
            or (isinstance(group, ClassicGroup) and group.is_in(ClassicGroupState.DEAD))
        ):
            return CoordinatorResult(
                response={"error_code": ErrorCode.group_id_not_found, "topics": []}
            )
        subscribed: set[str] | None
        if isinstance(group, ConsumerGroup):
            subscribed = group.subscribed_topic_names(name for name, _ in topics)
        elif group.is_in(ClassicGroupState.EMPTY):
            subscribed = set()
        else:
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return CoordinatorResult(
                    response={"error_code": ErrorCode.non_empty_group, "topics": []}
                )
        now = self._clock.now_ms()
        result = CoordinatorResult()
        committed = self._store.offsets.get(group_id, {})
        answers = []
        for name, partitions in topics:
            code = ErrorCode.group_subscribed_to_topic if name in subscribed else ErrorCode.none
            for partition in partitions:
                if code == ErrorCode.none and OffsetKey(name, partition) in committed:
                    result.records.append(
                        CoordinatorRecord(
                            OffsetCommitKey(group_id=group_id, topic=name, partition=partition)
                        )
                    )
            answers.append(
                {
                    "name": name,
                    "partitions": [
                        {"partition_index": partition, "error_code": code}
                        for partition in partitions
                    ],
                }
            )
        for record in result.records:
            self._store.replay(record, now)
        result.response = {"error_code": ErrorCode.none, "topics": answers}
        return result

    def delete_offsets_of_topics(
        self, topics: set[str]
    ) -> tuple[list[CoordinatorRecord], set[str]]:
        """Tombstones for every committed offset of `topics` (deleted topics, Kafka's
        `onPartitionsDeleted`), and the groups they leave with no offset at all."""
        records: list[CoordinatorRecord] = []
        emptied: set[str] = set()
        for group_id, committed in self._store.offsets.items():
            doomed = [where for where in committed if where.topic in topics]
            records.extend(
                CoordinatorRecord(
                    OffsetCommitKey(group_id=group_id, topic=where.topic, partition=where.partition)
                )
                for where in doomed
            )
            if doomed and len(doomed) == len(committed):
                emptied.add(group_id)
        return records, emptied

    def delete_all_offsets_records(self, group_id: str) -> list[CoordinatorRecord]:
        return [
            CoordinatorRecord(
                OffsetCommitKey(group_id=group_id, topic=where.topic, partition=where.partition)
            )
            for where in self._store.offsets.get(group_id, {})
        ]

    def expire_offsets(self) -> CoordinatorResult:
        """Offsets of empty groups past `offsets.retention.minutes`; then the empty groups."""
        now = self._clock.now_ms()
        retention = self._config.offsets_retention_ms
        result = CoordinatorResult()
        for group_id, committed in list(self._store.offsets.items()):
            group = self._store.groups.get(group_id)
            if isinstance(group, ClassicGroup):
                if not group.is_in(ClassicGroupState.EMPTY):
                    continue
            elif isinstance(group, ConsumerGroup) and group.members:
                continue
            # A simple consumer's group (no protocol) ages from its commits alone (KIP-211).
            empty_since = -1
            if isinstance(group, ConsumerGroup) or (
                isinstance(group, ClassicGroup) and group.protocol_type
            ):
                empty_since = group.state_timestamp_ms
            expired = [
                where
                for where, value in committed.items()
                if max(value.commit_timestamp, empty_since) + retention <= now
            ]
            for where in expired:
                result.records.append(
                    CoordinatorRecord(
                        OffsetCommitKey(
                            group_id=group_id, topic=where.topic, partition=where.partition
                        )
                    )
                )
            if len(expired) == len(committed) and isinstance(group, ClassicGroup):
                result.records.append(CoordinatorRecord(GroupMetadataKey(group_id=group_id)))
        for group_id, group in list(self._store.groups.items()):
            if (
                isinstance(group, ClassicGroup)
                and group_id not in self._store.offsets
                and group.is_in(ClassicGroupState.EMPTY)
                and group.state_timestamp_ms + retention <= now
            ):
                result.records.append(CoordinatorRecord(GroupMetadataKey(group_id=group_id)))
        for record in result.records:
            self._store.replay(record, now)
        return result
