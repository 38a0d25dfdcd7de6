"""What the describe APIs of KIP-848 consumer groups and KIP-932 share groups share: each group
described (or why not), a group the principal may not DESCRIBE answered
GROUP_AUTHORIZATION_FAILED, one whose assignments name a topic it may not DESCRIBE
TOPIC_AUTHORIZATION_FAILED, and the authorized operations when asked for, as Kafka answers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from moldau.broker.registry import RequestContext
from moldau.metadata.acls import AclOperation, ResourceType
from moldau.protocol.errors import ErrorCode, KafkaError

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
Answer = dict[str, Any]


def describe_groups(
    ctx: RequestContext,
    group_ids: Iterable[str],
    *,
    include_authorized_operations: bool,
    describe: Callable[[str], Answer],
    assigned_topics: Callable[[Answer], set[str]],
    failed: Callable[[str, KafkaError], Answer],
) -> list[Answer]:
    """`describe(group_id)` (which may raise KafkaError) for each group, in order."""
    groups = []
    for group_id in group_ids:
        try:
            ctx.require(
                AclOperation.DESCRIBE,
                ResourceType.GROUP,
                group_id,
                ErrorCode.group_authorization_failed,
            )
            answer = describe(group_id)
            if not all(
                ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
                for topic in assigned_topics(answer)
            ):
                raise KafkaError(
                    ErrorCode.topic_authorization_failed,
                    "The group has described topic(s) that the client is not authorized to "
                    "describe.",
                )
        except KafkaError as error:
            answer = failed(group_id, error)
        described = include_authorized_operations and answer["error_code"] == ErrorCode.none
        answer["authorized_operations"] = (
            ctx.authorized_operations(ResourceType.GROUP, group_id)
            if described
            else AUTHORIZED_OPERATIONS_OMITTED
        )
        groups.append(answer)
    return groups


def topics_of(answer: Answer, *assignments: str) -> set[str]:
    """The topic names of the members' `assignments` (fields of each member) in a describe
    answer (a deleted topic's name is not known: nothing to hide)."""
    return {
        entry["topic_name"]
        for member in answer.get("members", ())
        for assignment in assignments
        for entry in member[assignment]["topic_partitions"]
        if entry["topic_name"]
    }
