"""Requests of many items (topics, resources) of which the principal may act on some: the
controller is asked about those, and the others are answered with an authorization error in
their place, so results stay in the request's order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from moldau.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from moldau.metadata.records import ConfigResourceType
from moldau.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from moldau.broker.registry import RequestContext

Item = TypeVar("Item")
Result = TypeVar("Result")

# Kafka's text for each authorization error (its `Errors` enum), the message Kafka's brokers
# answer with where they give the error's own (`new ApiError(TOPIC_AUTHORIZATION_FAILED)`).
_DENIAL_MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
}


def denial_message(code: ErrorCode) -> str:
    """Kafka's message for an authorization error code (`config_resource_denial`'s)."""
    return _DENIAL_MESSAGES[code]


async def for_authorized(
    items: Sequence[Item],
    allowed: Callable[[Item], bool],
    call: Callable[[list[Item]], Awaitable[list[Result]]],
    refused: Callable[[Item], Result],
) -> list[Result]:
    """`call` with the allowed items (one result each, in order; not called when none is),
    merged with `refused(item)` for the rest."""
    flags = [allowed(item) for item in items]
    permitted = [item for item, flag in zip(items, flags, strict=True) if flag]
    answers = iter(await call(permitted) if permitted else [])
    return [
        next(answers) if flag else refused(item) for item, flag in zip(items, flags, strict=True)
    ]


def config_resource_denial(
    ctx: RequestContext, operation: AclOperation, config_type: int, name: str
) -> ErrorCode | None:
    """The error for a config resource (DescribeConfigs' and AlterConfigs' types) the
    principal may not `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS), or None: a topic's
    configs are the topic's, a group's the group's, and brokers' and client metrics' the
    cluster's, as in Kafka."""
    if config_type == ConfigResourceType.TOPIC:
        resource, code = ResourceType.TOPIC, ErrorCode.topic_authorization_failed
    elif config_type == ConfigResourceType.GROUP:
        resource, code = ResourceType.GROUP, ErrorCode.group_authorization_failed
    else:
        resource, code = ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed
        name = CLUSTER_NAME
    return None if ctx.authorized(operation, resource, name) else code


def undescribable_topics(ctx: RequestContext, names: Iterable[str]) -> list[str]:
    """The topics of `names` the principal may not DESCRIBE, sorted (a heartbeat naming one
    is refused with TOPIC_AUTHORIZATION_FAILED)."""
    return sorted(
        name
        for name in set(names)
        if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    )
