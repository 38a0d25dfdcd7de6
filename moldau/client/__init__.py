"""Moldau's own asyncio Kafka client, used by the CLI, inter-broker paths and the Spark connector.

It speaks the Kafka protocol only (no broker internals) and follows confluent-kafka's API shape:
`AdminClient`, `Producer`, `Consumer`, `Message`, `KafkaException`. See README.md.
"""

from moldau.client.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    ResourcePatternType,
)
from moldau.client.admin import (
    AdminClient,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
    SyncAdminClient,
)
from moldau.client.config import ClientConfig
from moldau.client.consumer import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    Consumer,
    SyncConsumer,
)
from moldau.client.errors import ConfigException, ErrorCode, KafkaException
from moldau.client.message import Message
from moldau.client.producer import Producer, RecordMetadata, SyncProducer
from moldau.client.transactions import FatalTransactionError
from moldau.types import TopicPartition

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_STORED",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AclResourceType",
    "AdminClient",
    "AlterConfigOp",
    "ClientConfig",
    "ConfigEntry",
    "ConfigException",
    "ConfigResource",
    "ConfigSource",
    "Consumer",
    "ErrorCode",
    "FatalTransactionError",
    "KafkaException",
    "Message",
    "NewTopic",
    "Producer",
    "RecordMetadata",
    "ResourcePatternType",
    "ResourceType",
    "SyncAdminClient",
    "SyncConsumer",
    "SyncProducer",
    "TopicPartition",
]
