"""Legal topic names, as Kafka's `org.apache.kafka.common.internals.Topic` checks them.

A name is 1..249 characters of `[a-zA-Z0-9._-]` and not "." or "..". Because metrics names
turn "." into "_", two topics whose names differ only there would collide: creating one while
the other exists is refused too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from moldau.protocol.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
INTERNAL_TOPICS_MODIFICATION = "internal.topics.modification.enable"


def refuse_internal_topic_change(
    name: str, action: str, code: ErrorCode = ErrorCode.invalid_request
) -> KafkaError:
    """The refusal to `action` ("delete", "append to") an internal topic, saying why and what
    an operator who means it sets."""
    holds = "every consumer group's committed offsets"
    if name == "__transaction_state":
        holds = "every transactional producer's state"
    return KafkaError(
        code,
        f"Cannot {action} internal topic {name}: it holds {holds}. An operator who means it"
        f" can allow it with {INTERNAL_TOPICS_MODIFICATION}=true on the servers.",
    )


def validate_topic_name(name: str) -> None:
    """Raise KafkaError(INVALID_TOPIC_EXCEPTION) saying why `name` cannot be a topic."""
    if not name:
        raise KafkaError(
            ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty"
        )
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}",
        )
    if _LEGAL.fullmatch(name) is None:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'",
        )


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def find_collision(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic whose name equals `name` once "." and "_" are unified."""
    if "." not in name and "_" not in name:
        return None
    unified = unify_collision_chars(name)
    for other in existing:
        if other != name and unify_collision_chars(other) == unified:
            return other
    return None
