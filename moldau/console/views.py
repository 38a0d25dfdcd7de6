"""What the console's read-only pages show, gathered from the cluster with `AdminClient`.

Each function asks what its page needs and nothing more: the overview DescribeCluster,
DescribeQuorum and Metadata; the topic list Metadata and DescribeLogDirs; a topic its
Metadata, ListOffsets (earliest, latest), DescribeConfigs and DescribeLogDirs; a group
DescribeGroups (or ConsumerGroupDescribe), OffsetFetch and ListOffsets, as
kafka-consumer-groups.sh computes lag (log end offset minus committed offset).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from moldau.client.admin import AdminClient, ConfigResource, GroupListing, ResourceType
from moldau.client.cluster import TopicInfo
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.offsets import EARLIEST, LATEST, ListOffsetsResult
from moldau.console.lag import LagHistory
from moldau.console.model import (
    GroupDetail,
    Overview,
    PartitionLag,
    PartitionRow,
    TopicDetail,
    TopicRow,
    TopicsView,
)
from moldau.types import TopicPartition

__all__ = ["group_detail", "list_groups", "overview", "topic_detail", "topics"]


async def overview(admin: AdminClient) -> Overview:
    cluster = await admin.describe_cluster(include_fenced_brokers=True)
    try:
        quorum, quorum_error = await admin.describe_quorum(), None
    except KafkaException as error:
        quorum, quorum_error = None, str(error)
    metadata = await admin.list_topics()
    partitions = [p for t in metadata.topics.values() for p in t.partitions.values()]
    return Overview(
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=tuple(cluster.brokers.values()),
        quorum=quorum,
        quorum_error=quorum_error,
        topic_count=len(metadata.topics),
        partition_count=len(partitions),
        under_replicated=sum(1 for p in partitions if len(p.isr) < len(p.replicas)),
        offline=sum(1 for p in partitions if p.leader < 0),
    )


async def topics(admin: AdminClient) -> TopicsView:
    metadata = await admin.list_topics()
    sizes, sizes_error = await _partition_sizes(admin, None, metadata.topics.values())
    rows = []
    for name in sorted(metadata.topics):
        topic = metadata.topics[name]
        partitions = list(topic.partitions.values())
        sized = [sizes.get(TopicPartition(name, p.partition)) for p in partitions]
        rows.append(
            TopicRow(
                name=name,
                partitions=len(partitions),
                replication_factor=max((len(p.replicas) for p in partitions), default=0),
                internal=topic.is_internal,
                under_replicated=sum(1 for p in partitions if len(p.isr) < len(p.replicas)),
                size_bytes=None if sizes_error else sum(s or 0 for s in sized),
            )
        )
    return TopicsView(topics=tuple(rows), sizes_error=sizes_error)


async def topic_detail(admin: AdminClient, name: str) -> TopicDetail:
    topic = await admin.describe_topic(name)
    partitions = [TopicPartition(name, p) for p in topic.partitions]
    earliest: Mapping[TopicPartition, int] = {}
    latest: Mapping[TopicPartition, int] = {}
    offsets_error = None
    try:
        earliest = _offsets(await admin.list_offsets(dict.fromkeys(partitions, EARLIEST)))
        latest = _offsets(await admin.list_offsets(dict.fromkeys(partitions, LATEST)))
    except KafkaException as error:
        offsets_error = str(error)
    sizes, sizes_error = await _partition_sizes(admin, partitions, [topic])
    try:
        configs = await admin.describe_configs(ConfigResource(ResourceType.TOPIC, name))
        configs_error = None
    except KafkaException as error:
        configs, configs_error = {}, str(error)
    rows = tuple(
        PartitionRow(
            partition=p.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            replicas=p.replicas,
            isr=p.isr,
            offline_replicas=p.offline_replicas,
            earliest=earliest.get(TopicPartition(name, p.partition)),
            latest=latest.get(TopicPartition(name, p.partition)),
            size_bytes=sizes.get(TopicPartition(name, p.partition)),
        )
        for p in topic.partitions.values()
    )
    return TopicDetail(
        name=name,
        topic_id=None if topic.topic_id is None else str(topic.topic_id),
        internal=topic.is_internal,
        partitions=rows,
        offsets_error=offsets_error,
        sizes_error=sizes_error,
        configs=tuple(configs.values()),
        configs_error=configs_error,
    )


async def list_groups(admin: AdminClient) -> list[GroupListing]:
    return await admin.list_groups()


async def group_detail(admin: AdminClient, group_id: str, history: LagHistory) -> GroupDetail:
    """The group, its members, and the lag of every partition it is assigned or has committed
    offsets for; the total lag is added to `history`."""
    [description] = await admin.describe_groups([group_id])
    if description.state == "Dead" and not description.members:
        raise KafkaException(ErrorCode.group_id_not_found, f"group '{group_id}'")
    committed = {
        tp: offset
        for tp, offset in (await admin.list_consumer_group_offsets(group_id)).items()
        if offset >= 0
    }
    owners = {tp: member for member in description.members for tp in member.assignment}
    partitions = sorted(set(owners) | set(committed))
    log_end: Mapping[TopicPartition, int] = {}
    offsets_error = None
    if partitions:
        try:
            log_end = _offsets(await admin.list_offsets(dict.fromkeys(partitions, LATEST)))
        except KafkaException as error:
            offsets_error = str(error)
    lags = tuple(
        PartitionLag(
            topic=tp.topic,
            partition=tp.partition,
            committed=committed.get(tp),
            log_end_offset=log_end.get(tp),
            member=owners.get(tp),
        )
        for tp in partitions
    )
    total = sum(lag.lag or 0 for lag in lags)
    return GroupDetail(
        group_id=group_id,
        state=description.state,
        protocol_type=description.protocol_type,
        protocol=description.protocol,
        coordinator=description.coordinator,
        members=description.members,
        partitions=lags,
        offsets_error=offsets_error,
        history=tuple(history.record(group_id, total)),
    )


def _offsets(results: Mapping[TopicPartition, ListOffsetsResult]) -> dict[TopicPartition, int]:
    return {tp: result.offset for tp, result in results.items()}


async def _partition_sizes(
    admin: AdminClient, partitions: list[TopicPartition] | None, topics: Iterable[TopicInfo]
) -> tuple[dict[TopicPartition, int], str | None]:
    """Each partition's size on its leader (another replica's where the leader did not say),
    from DescribeLogDirs; ({}, why) when a broker would not answer it."""
    leaders = {
        TopicPartition(topic.name, p.partition): p.leader
        for topic in topics
        for p in topic.partitions.values()
    }
    try:
        described = await admin.describe_log_dirs(partitions=partitions)
    except KafkaException as error:
        return {}, str(error)
    sizes: dict[TopicPartition, int] = {}
    for broker_id, dirs in described.items():
        for log_dir in dirs.values():
            for tp, replica in log_dir.replicas.items():
                if replica.is_future:
                    continue
                if tp not in sizes or leaders.get(tp) == broker_id:
                    sizes[tp] = replica.size
    return sizes, None
