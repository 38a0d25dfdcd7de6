"""The configuration keys Moldau understands, with Kafka's names, types and defaults.

Broker properties (`server.properties`) and topic configs share one table: a topic config
`retention.ms` takes its default from the broker property `log.retention.ms` (its "synonym"),
exactly as Kafka's `LogConfig` does, so DescribeConfigs can report the source of every value.
"""

from __future__ import annotations

from collections.abc import Iterable

from moldau.config.kafka_only import KAFKA_ONLY_BROKER_KEYS, KAFKA_ONLY_TOPIC_KEYS
from moldau.config.keys import ConfigKey, ConfigType, config_key
from moldau.config.share_groups import SHARE_BROKER_KEYS

__all__ = [
    "BROKER_KEYS",
    "COMPRESSION_TYPES",
    "LEADER_SELECTOR",
    "LONG_MAX",
    "MAX_BROKER_PARTITIONS_DEFAULT",
    "RACK_AWARE_SELECTOR",
    "TOPIC_KEYS",
    "TOPIC_SYNONYMS",
    "ConfigKey",
    "ConfigType",
]

_key = config_key


# Kafka takes lz4 levels up to 17 and zstd up to 22; Moldau compresses on its event loop, where
# those levels would hold every other request back (ms per MB of records on the reference VM:
# zstd 3: 7, 9: 32, 12: 66, 19: 642; lz4 9: 2, HC 6: 15, HC 12: 135; gzip 6: 32, 9: 103).
_LEVEL_REASON = (
    "Moldau compresses on its event loop; higher levels cost 2-100 times as much per byte and "
    "would hold other requests back"
)
_LEVEL_LIMIT = " Moldau accepts at most 9 (Kafka: lz4 17, zstd 22): " + _LEVEL_REASON + "."


def _compression_levels() -> tuple[ConfigKey, ...]:
    """KIP-390's levels, for batches the broker compresses (a topic's `compression.type` that
    is not `producer`, nor the codec the producer used)."""
    doc = "The level the broker compresses {} batches at (KIP-390){}."
    return (
        config_key(
            "compression.gzip.level",
            ConfigType.INT,
            -1,
            doc.format("gzip", "; -1: zlib's default, 6"),
            minimum=1,
            maximum=9,
            also_valid=(-1,),
        ),
        config_key(
            "compression.lz4.level",
            ConfigType.INT,
            9,
            doc.format("lz4", "; 9 is lz4's fast mode, as in Kafka, other levels LZ4HC's")
            + _LEVEL_LIMIT,
            minimum=1,
            maximum=9,
            range_reason=_LEVEL_REASON,
        ),
        config_key(
            "compression.zstd.level",
            ConfigType.INT,
            3,
            doc.format("zstd", "") + _LEVEL_LIMIT,
            minimum=-131072,
            maximum=9,
            range_reason=_LEVEL_REASON,
        ),
    )


def _by_name(keys: Iterable[ConfigKey]) -> dict[str, ConfigKey]:
    table: dict[str, ConfigKey] = {}
    for key in keys:
        if key.name in table:
            raise AssertionError(f"{key.name} is defined twice")
        table[key.name] = key
    return table


B, S, INT, L, D, LS, P = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)

_WEEK_MS = 7 * 24 * 3600 * 1000
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LONG_MAX = 9223372036854775807
MAX_BROKER_PARTITIONS_DEFAULT = 20_000
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Every broker property: those Moldau acts on, then Kafka's others (moldau.config.kafka_only).
# A broker's DescribeConfigs lists the keys of Kafka 4.1's KafkaConfig whether set or not, and
# the others only once set (`described_unset=False`), as Kafka lists a property it does not
# define: Moldau's own limits and settings (max.partitions, max.broker.partitions,
# log.open.files.max, log.dir.recheck.interval.ms, socket.request.timeout.ms,
# internal.topics.modification.enable, cluster.id for a node that formats itself), keys Kafka
# keeps internal or has dropped that Moldau still acts on
# (producer.id.expiration.check.interval.ms, leader.imbalance.per.broker.percentage), the
# authorizer's (super.users, allow.everyone.if.no.acl.found), the dynamic-only throttles, the
# schema registry's (schema.registry.listeners, schema.registry.authentication.method) and the
# metrics and health endpoints' (http.listeners).
BROKER_KEYS: dict[str, ConfigKey] = _by_name(
    [
        _key("node.id", INT, 1, "The node id of this server.", read_only=True),
        _key("broker.id", INT, -1, "Alias of node.id.", read_only=True),
        _key("process.roles", LS, "broker,controller", "Roles of this node.", read_only=True),
        _key(
            "cluster.id",
            S,
            None,
            "Cluster id; generated at format time.",
            read_only=True,
            described_unset=False,
        ),
        _key("controller.quorum.voters", LS, "", "id@host:port of each voter.", read_only=True),
        _key(
            "controller.quorum.bootstrap.servers",
            LS,
            "",
            "host:port of controllers to find a quorum with dynamic voters (KIP-853).",
            read_only=True,
        ),
        _key("controller.listener.names", LS, "CONTROLLER", read_only=True),
        _key(
            "broker.rack",
            S,
            None,
            "The rack of this broker (rack-aware placement).",
            read_only=True,
        ),
        _key(
            "broker.session.timeout.ms",
            INT,
            9000,
            "Fence a broker silent for this long.",
            read_only=True,
            minimum=1,
        ),
        _key("broker.heartbeat.interval.ms", INT, 2000, read_only=True, minimum=1),
        _key("controller.quorum.election.timeout.ms", INT, 1000, read_only=True, minimum=1),
        _key("controller.quorum.fetch.timeout.ms", INT, 2000, read_only=True, minimum=1),
        _key("controller.quorum.election.backoff.max.ms", INT, 1000, read_only=True, minimum=1),
        _key("controller.quorum.request.timeout.ms", INT, 2000, read_only=True, minimum=1),
        _key("controller.quorum.retry.backoff.ms", INT, 20, read_only=True, minimum=0),
        _key("listeners", LS, "PLAINTEXT://127.0.0.1:9092", read_only=True),
        _key("advertised.listeners", LS, None, read_only=True),
        _key(
            "schema.registry.listeners",
            S,
            None,
            "Moldau: where the node serves the schema registry's HTTP API (Confluent's), as "
            "http[s]://HOST:PORT[,...]. Unset: http://127.0.0.1:8081 on a single node, none in "
            "a larger cluster; empty: none. https listeners use schema.registry.ssl.* over the "
            "node's ssl.* settings.",
            read_only=True,
            described_unset=False,
        ),
        _key(
            "http.listeners",
            S,
            None,
            "Moldau: where the node serves /metrics (Prometheus' text format), /health and "
            "/ready over HTTP, as http[s]://HOST:PORT[,...]. Unset: http://127.0.0.1:9644 on a "
            "single node, none in a larger cluster; empty: none. https listeners use the node's "
            "ssl.* settings.",
            read_only=True,
            described_unset=False,
        ),
        _key(
            "schema.registry.authentication.method",
            S,
            "NONE",
            "Moldau (Confluent's authentication.method): BASIC asks every request of the schema "
            "registry for HTTP basic credentials of one of the cluster's SASL users (PLAIN or "
            "SCRAM) and checks its permission on the subject against the ACLs of the subject's "
            "topic; NONE lets everyone in.",
            read_only=True,
            valid_values=("NONE", "BASIC"),
            described_unset=False,
        ),
        _key(
            "listener.security.protocol.map",
            LS,
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            read_only=True,
        ),
        _key("inter.broker.listener.name", S, None, read_only=True),
        _key(
            "log.dirs",
            LS,
            "./moldau-data",
            "Directories holding the partition logs.",
            read_only=True,
        ),
        _key("log.dir", S, "./moldau-data", read_only=True),
        _key("metadata.log.dir", S, None, read_only=True),
        _key(
            "metadata.log.max.record.bytes.between.snapshots",
            L,
            20971520,
            "Snapshot the metadata image once this many bytes were committed to the metadata "
            "log after the latest snapshot.",
            read_only=True,
            minimum=1,
        ),
        _key(
            "metadata.log.max.snapshot.interval.ms",
            L,
            3600000,
            "Snapshot the metadata image when a record committed this long ago is in no "
            "snapshot yet. 0: no time-based snapshots.",
            read_only=True,
            minimum=0,
        ),
        _key("num.partitions", INT, 1, minimum=1),
        _key(
            "max.partitions",
            INT,
            2147483647,
            "The most partitions the cluster may have (KIP-578); CreateTopics and "
            "CreatePartitions above it answer POLICY_VIOLATION.",
            minimum=1,
            described_unset=False,
        ),
        _key(
            "max.broker.partitions",
            INT,
            MAX_BROKER_PARTITIONS_DEFAULT,
            "The most partition replicas one broker may host, internal topics included "
            "(KIP-578; Moldau's default is finite); more answer POLICY_VIOLATION.",
            minimum=1,
            described_unset=False,
        ),
        _key("default.replication.factor", INT, 1),
        _key(
            "max.request.partition.size.limit",
            INT,
            2000,
            "The most partitions one DescribeTopicPartitions answer holds.",
            read_only=True,
            minimum=1,
        ),
        _key("min.insync.replicas", INT, 1, minimum=1),
        _key("auto.create.topics.enable", B, True),
        _key("delete.topic.enable", B, True),
        _key(
            "internal.topics.modification.enable",
            B,
            False,
            "Let clients delete and produce to the internal topics (__consumer_offsets,"
            " __transaction_state), which hold every group's offsets and every transaction's"
            " state. Off by default: only an operator repairing a cluster should set it.",
            read_only=True,
            described_unset=False,
        ),
        _key("message.max.bytes", INT, 1048588, minimum=0),
        _key("socket.request.max.bytes", INT, 104857600, read_only=True, minimum=1),
        _key(
            "queued.max.request.bytes",
            L,
            268435456,
            "Bytes of large requests (over 64 KiB) a node holds at once; a connection whose "
            "request does not fit stops being read until memory is released. -1: no limit "
            "(Kafka's default; Moldau bounds it by default).",
            read_only=True,
            minimum=-1,
        ),
        _key(
            "socket.request.timeout.ms",
            L,
            30000,
            "Moldau's own: a request must arrive whole within this time of its first byte, or "
            "its connection is closed (clients that trickle bytes). -1: no limit.",
            read_only=True,
            minimum=-1,
            described_unset=False,
        ),
        _key("connections.max.idle.ms", L, 600000, read_only=True),
        _key(
            "max.connections",
            INT,
            2147483647,
            "Connections the node takes at once (per listener too: "
            "listener.name.<listener>.max.connections); beyond it a new one is closed. The "
            "inter-broker listener's do not count against the node's limit.",
            read_only=True,
            minimum=0,
        ),
        _key(
            "max.connections.per.ip",
            INT,
            2147483647,
            "Connections one address may hold; beyond it a new one is closed.",
            read_only=True,
            minimum=0,
        ),
        _key(
            "max.connections.per.ip.overrides",
            S,
            "",
            "Per-address limits over max.connections.per.ip: host:count pairs separated by "
            "commas (hostName:100,127.0.0.1:200).",
            read_only=True,
        ),
        _key("log.segment.bytes", INT, 1073741824, minimum=14),
        _key("log.roll.ms", L, None),
        _key("log.roll.hours", INT, 168),
        _key("log.roll.jitter.hours", INT, 0, read_only=True, minimum=0),
        _key("log.roll.jitter.ms", L, None),
        _key("log.retention.ms", L, None),
        _key("log.retention.minutes", INT, None),
        _key("log.retention.hours", INT, 168),
        _key("log.retention.bytes", L, -1),
        _key("log.retention.check.interval.ms", L, 300000, minimum=1),
        _key("log.cleanup.policy", LS, "delete", valid_values=("delete", "compact")),
        _key("log.cleaner.enable", B, True),
        _key("log.cleaner.backoff.ms", L, 15000),
        _key("log.cleaner.delete.retention.ms", L, 86400000),
        _key("log.cleaner.min.compaction.lag.ms", L, 0),
        _key("log.cleaner.max.compaction.lag.ms", L, 9223372036854775807),
        _key("log.cleaner.min.cleanable.ratio", D, 0.5),
        _key("log.index.size.max.bytes", INT, 10485760, minimum=4),
        _key("log.index.interval.bytes", INT, 4096, minimum=0),
        _key("log.flush.interval.messages", L, 9223372036854775807, minimum=1),
        _key("log.flush.interval.ms", L, None),
        _key("log.flush.scheduler.interval.ms", L, 9223372036854775807),
        _key(
            "log.flush.offset.checkpoint.interval.ms",
            INT,
            60000,
            "How often each log dir's recovery-point-offset-checkpoint is written.",
            read_only=True,
            minimum=1,
        ),
        _key(
            "log.flush.start.offset.checkpoint.interval.ms",
            INT,
            60000,
            "How often each log dir's log-start-offset-checkpoint is written.",
            read_only=True,
            minimum=1,
        ),
        _key(
            "log.message.timestamp.type",
            S,
            "CreateTime",
            valid_values=("CreateTime", "LogAppendTime"),
        ),
        _key("log.message.timestamp.before.max.ms", L, 9223372036854775807),
        _key("log.message.timestamp.after.max.ms", L, 3600000),
        _key("log.preallocate", B, False),
        _key("log.segment.delete.delay.ms", L, 60000),
        _key(
            "log.dir.recheck.interval.ms",
            L,
            10000,
            "Moldau: how often a log dir that ran out of space is probed (a 64 KiB write and "
            "fsync); once the probe succeeds the directory is online again.",
            read_only=True,
            minimum=1,
            described_unset=False,
        ),
        _key(
            "log.open.files.max",
            INT,
            -1,
            "Moldau: the most segment files (.log, .index, .timeindex, .txnindex) kept open at "
            "once; the least recently used are closed and reopened when next used. -1: half "
            "of RLIMIT_NOFILE.",
            read_only=True,
            minimum=-1,
            described_unset=False,
        ),
        _key("compression.type", S, "producer", valid_values=COMPRESSION_TYPES),
        *_compression_levels(),
        _key("unclean.leader.election.enable", B, False),
        _key(
            "auto.leader.rebalance.enable",
            B,
            True,
            "The active controller moves leaderships back to preferred replicas in the ISR.",
            read_only=True,
        ),
        _key(
            "leader.imbalance.check.interval.seconds",
            L,
            300,
            "How often the active controller looks for imbalanced leaderships.",
            read_only=True,
            minimum=1,
        ),
        _key(
            "leader.imbalance.per.broker.percentage",
            INT,
            10,
            "A broker's share of the partitions it prefers but does not lead above which they "
            "are moved back to it (as Kafka's ZooKeeper controller applied it).",
            read_only=True,
            minimum=0,
            described_unset=False,
        ),
        _key("replica.lag.time.max.ms", L, 30000),
        _key(
            "replica.high.watermark.checkpoint.interval.ms",
            L,
            5000,
            "How often each log dir's replication-offset-checkpoint (high watermarks) is written.",
            read_only=True,
            minimum=1,
        ),
        _key(
            "replica.selector.class",
            ConfigType.CLASS,
            None,
            "Where consumers read (KIP-392): unset or LeaderSelector, the leader; "
            "RackAwareReplicaSelector, a replica in the consumer's client.rack.",
            read_only=True,
            valid_values=(LEADER_SELECTOR, RACK_AWARE_SELECTOR),
        ),
        _key("replica.fetch.max.bytes", INT, 1048576),
        _key("replica.fetch.wait.max.ms", INT, 500, minimum=0),
        _key("replica.fetch.min.bytes", INT, 1, minimum=1),
        _key("replica.fetch.response.max.bytes", INT, 10485760, minimum=0),
        _key("replica.fetch.backoff.ms", INT, 1000, minimum=0),
        # Replication throttles (KIP-73), in bytes/s; they cover the replicas the topics'
        # `*.replication.throttled.replicas` name (moldau.replication.throttle).
        _key("leader.replication.throttled.rate", L, LONG_MAX, minimum=0, described_unset=False),
        _key("follower.replication.throttled.rate", L, LONG_MAX, minimum=0, described_unset=False),
        # The throttle of replica moves between a broker's log dirs (AlterReplicaLogDirs,
        # moldau.storage.log_mover), over its own windows.
        _key(
            "replica.alter.log.dirs.io.max.bytes.per.second",
            L,
            LONG_MAX,
            "The most bytes per second this broker's moves of replicas between its log dirs "
            "copy, all moves together.",
            minimum=0,
            described_unset=False,
        ),
        _key("alter.log.dirs.replication.quota.window.num", INT, 11, minimum=1, read_only=True),
        _key(
            "alter.log.dirs.replication.quota.window.size.seconds",
            INT,
            1,
            minimum=1,
            read_only=True,
        ),
        # Client quotas (moldau.broker.quotas): the rate of each is measured over
        # quota.window.num windows of quota.window.size.seconds, as in Kafka.
        _key(
            "quota.window.num",
            INT,
            11,
            "The number of samples to retain in memory for client quotas.",
            minimum=1,
            read_only=True,
        ),
        _key(
            "quota.window.size.seconds",
            INT,
            1,
            "The time span of each sample for client quotas.",
            minimum=1,
            read_only=True,
        ),
        _key("replication.quota.window.num", INT, 11, minimum=1, read_only=True),
        _key("replication.quota.window.size.seconds", INT, 1, minimum=1, read_only=True),
        _key("offsets.topic.num.partitions", INT, 50, read_only=True),
        _key("offsets.topic.replication.factor", INT, 3, read_only=True),
        _key("offsets.retention.minutes", INT, 10080),
        _key("offsets.retention.check.interval.ms", L, 600000),
        _key("offset.metadata.max.bytes", INT, 4096),
        _key("group.initial.rebalance.delay.ms", INT, 3000),
        _key("group.min.session.timeout.ms", INT, 6000),
        _key("group.max.session.timeout.ms", INT, 1800000),
        _key("group.max.size", INT, 2147483647),
        _key("group.consumer.session.timeout.ms", INT, 45000),
        _key("group.consumer.heartbeat.interval.ms", INT, 5000),
        _key("transaction.state.log.num.partitions", INT, 50, read_only=True),
        _key("transaction.state.log.replication.factor", INT, 3, read_only=True),
        _key("transaction.max.timeout.ms", INT, 900000),
        _key("transactional.id.expiration.ms", INT, 604800000),
        _key(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            INT,
            3600000,
            "How often the transaction coordinator forgets transactional ids idle for "
            "transactional.id.expiration.ms.",
            read_only=True,
            minimum=1,
        ),
        _key(
            "producer.id.expiration.ms",
            INT,
            86400000,
            "How long a partition remembers an idle producer id (no open transaction, last batch"
            " timestamp this old) for duplicate detection.",
            minimum=1,
        ),
        _key(
            "producer.id.expiration.check.interval.ms",
            INT,
            600000,
            "How often partitions forget producer ids idle for producer.id.expiration.ms.",
            read_only=True,
            minimum=1,
            described_unset=False,
        ),
        _key(
            "security.inter.broker.protocol",
            S,
            "PLAINTEXT",
            "The security protocol brokers use to reach each other: the inter-broker listener "
            "is the one of that name (unless inter.broker.listener.name is set; not both).",
            read_only=True,
            valid_values=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        ),
        # TLS (moldau.config.tls). Each may be given per listener as
        # listener.name.<listener>.<key>, which wins over the unprefixed key.
        _key(
            "ssl.keystore.type",
            S,
            "JKS",
            "PEM or PKCS12 (JKS is refused: convert it with keytool to PKCS12).",
            read_only=True,
            valid_values=("JKS", "PKCS12", "PEM"),
        ),
        _key(
            "ssl.keystore.location",
            S,
            None,
            "The keystore file: PEM (the private key and its certificate chain) or PKCS12.",
            read_only=True,
        ),
        _key(
            "ssl.keystore.password",
            P,
            None,
            "Password of a PKCS12 keystore (not allowed with PEM).",
            read_only=True,
            sensitive=True,
        ),
        _key(
            "ssl.keystore.certificate.chain",
            P,
            None,
            "The certificate chain in PEM, inline (ssl.keystore.type=PEM).",
            read_only=True,
            sensitive=True,
        ),
        _key(
            "ssl.keystore.key",
            P,
            None,
            "The private key in PEM (PKCS#8, encrypted when ssl.key.password is set), inline.",
            read_only=True,
            sensitive=True,
        ),
        _key(
            "ssl.key.password",
            P,
            None,
            "Password of the private key.",
            read_only=True,
            sensitive=True,
        ),
        _key(
            "ssl.truststore.type",
            S,
            "JKS",
            "PEM or PKCS12 (JKS is refused).",
            read_only=True,
            valid_values=("JKS", "PKCS12", "PEM"),
        ),
        _key(
            "ssl.truststore.location",
            S,
            None,
            "The certificate authorities trusted: a PEM file of certificates, or PKCS12. "
            "Unset: the system's default authorities.",
            read_only=True,
        ),
        _key(
            "ssl.truststore.password",
            P,
            None,
            "Password of a PKCS12 truststore (not allowed with PEM).",
            read_only=True,
            sensitive=True,
        ),
        _key(
            "ssl.truststore.certificates",
            P,
            None,
            "Trusted certificates in PEM, inline (ssl.truststore.type=PEM).",
            read_only=True,
            sensitive=True,
        ),
        _key(
            "ssl.client.auth",
            S,
            "none",
            "required: clients must present a certificate the truststore trusts; requested: "
            "they may (one presented must be trusted); none: none is asked for.",
            read_only=True,
            valid_values=("none", "requested", "required"),
        ),
        _key(
            "ssl.enabled.protocols",
            LS,
            "TLSv1.2,TLSv1.3",
            "TLS versions accepted (TLSv1.2 and TLSv1.3 only).",
            read_only=True,
        ),
        _key(
            "ssl.protocol",
            S,
            "TLSv1.3",
            "The highest TLS version: TLSv1.3 (or TLS) or TLSv1.2.",
            read_only=True,
        ),
        _key(
            "ssl.cipher.suites",
            LS,
            "",
            "Cipher suites by their IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...); "
            "empty: OpenSSL's defaults. TLS 1.3 suites cannot be narrowed.",
            read_only=True,
        ),
        _key(
            "ssl.endpoint.identification.algorithm",
            S,
            "https",
            "https: this node's connections to other nodes check the peer's certificate names "
            "its host; empty: they do not (the chain is still verified).",
            read_only=True,
        ),
        _key(
            "ssl.principal.mapping.rules",
            S,
            "DEFAULT",
            "How a client certificate's distinguished name becomes the principal: "
            "RULE:pattern/replacement/[LU], ..., DEFAULT (the whole name).",
            read_only=True,
        ),
        _key(
            "sasl.enabled.mechanisms",
            LS,
            "GSSAPI",
            "The SASL mechanisms SASL listeners accept: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
            "OAUTHBEARER (GSSAPI, Kafka's default, is refused). Per listener: "
            "listener.name.<listener>.sasl.enabled.mechanisms.",
            read_only=True,
        ),
        _key(
            "sasl.mechanism.inter.broker.protocol",
            S,
            "GSSAPI",
            "The mechanism brokers authenticate to each other with, when the inter-broker "
            "listener is SASL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; not OAUTHBEARER, for "
            "which a node has no token of its own).",
            read_only=True,
        ),
        _key(
            "sasl.mechanism.controller.protocol",
            S,
            "GSSAPI",
            "The mechanism nodes authenticate to the controllers with, when the controller "
            "listener is SASL (PLAIN: SCRAM credentials live in the metadata log).",
            read_only=True,
        ),
        _key(
            "connections.max.reauth.ms",
            L,
            0,
            "KIP-368: the lifetime of a SASL session; a connection past it must re-authenticate "
            "or is closed on its next request. 0: sessions never expire.",
            read_only=True,
            minimum=0,
        ),
        _key(
            "connection.failed.authentication.delay.ms",
            INT,
            100,
            "How long a failed authentication waits before it is answered and its connection "
            "closed (slows down password guessing).",
            read_only=True,
            minimum=0,
        ),
        # OAUTHBEARER's KIP-768 validator (listener.name.<l>.oauthbearer.sasl.server.callback.
        # handler.class=...OAuthBearerValidatorCallbackHandler); each may be given per listener.
        _key(
            "sasl.oauthbearer.jwks.endpoint.url",
            S,
            None,
            "Where the identity provider's JSON Web Key Set is: an https: (or http:) URL, "
            "fetched in the background, or a file: URL, read at start; OAUTHBEARER tokens must "
            "be signed by one of its keys.",
            read_only=True,
        ),
        _key(
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            L,
            3600000,
            "How often the JWKS is fetched again (a token naming an unknown key id also asks "
            "for a fetch, at most once every 10 s).",
            read_only=True,
            minimum=0,
        ),
        _key(
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
            L,
            100,
            "The first wait before a failed JWKS fetch is tried again (doubling each time).",
            read_only=True,
            minimum=0,
        ),
        _key(
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
            L,
            10000,
            "The longest wait between failed JWKS fetches.",
            read_only=True,
            minimum=0,
        ),
        _key(
            "sasl.oauthbearer.expected.audience",
            LS,
            None,
            "Audiences a token must name one of (its aud claim); unset: a token naming an "
            "audience is refused, as Kafka's jose4j validator does.",
            read_only=True,
        ),
        _key(
            "sasl.oauthbearer.expected.issuer",
            S,
            None,
            "The issuer (iss claim) a token must have; unset: any.",
            read_only=True,
        ),
        _key(
            "sasl.oauthbearer.sub.claim.name",
            S,
            "sub",
            "The claim holding the principal's name (the principal is User:<name>).",
            read_only=True,
        ),
        _key(
            "sasl.oauthbearer.scope.claim.name",
            S,
            "scope",
            "The claim holding the token's scope.",
            read_only=True,
        ),
        _key(
            "sasl.oauthbearer.clock.skew.seconds",
            INT,
            30,
            "How far the identity provider's clock may be from this node's when exp and nbf "
            "are checked.",
            read_only=True,
            minimum=0,
        ),
        _key(
            "authorizer.class.name",
            S,
            "",
            "The authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer checks every "
            "request against the ACLs in the metadata log; empty allows everything.",
            read_only=True,
        ),
        _key(
            "super.users",
            S,
            None,
            "Principals (User:name, separated by semicolons) the authorizer allows everything.",
            read_only=True,
            described_unset=False,
        ),
        _key(
            "allow.everyone.if.no.acl.found",
            B,
            False,
            "Whether an action on a resource no ACL names is allowed (otherwise it is denied).",
            read_only=True,
            described_unset=False,
        ),
        *SHARE_BROKER_KEYS,  # share groups (KIP-932): moldau.config.share_groups
        *KAFKA_ONLY_BROKER_KEYS,
    ]
)

# Topic config -> the broker property that supplies its default (Kafka's "synonym").
TOPIC_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
}

TOPIC_KEYS: dict[str, ConfigKey] = _by_name(
    [
        _key("cleanup.policy", LS, "delete", valid_values=("delete", "compact")),
        _key("compression.type", S, "producer", valid_values=COMPRESSION_TYPES),
        *_compression_levels(),
        _key("delete.retention.ms", L, 86400000, minimum=0),
        _key("file.delete.delay.ms", L, 60000, minimum=0),
        _key("flush.messages", L, 9223372036854775807, minimum=1),
        _key("flush.ms", L, 9223372036854775807, minimum=0),
        _key("index.interval.bytes", INT, 4096, minimum=0),
        _key("max.compaction.lag.ms", L, 9223372036854775807, minimum=1),
        _key("max.message.bytes", INT, 1048588, minimum=0),
        _key(
            "message.timestamp.type", S, "CreateTime", valid_values=("CreateTime", "LogAppendTime")
        ),
        _key("message.timestamp.before.max.ms", L, 9223372036854775807, minimum=0),
        _key("message.timestamp.after.max.ms", L, 3600000, minimum=0),
        _key("min.cleanable.dirty.ratio", D, 0.5, minimum=0),
        _key("min.compaction.lag.ms", L, 0, minimum=0),
        _key("min.insync.replicas", INT, 1, minimum=1),
        _key("preallocate", B, False),
        _key("retention.bytes", L, -1),
        _key("retention.ms", L, _WEEK_MS, minimum=-1),
        _key("segment.bytes", INT, 1073741824, minimum=14),
        _key("segment.index.bytes", INT, 10485760, minimum=4),
        _key("segment.jitter.ms", L, 0, minimum=0),
        _key("segment.ms", L, _WEEK_MS, minimum=1),
        _key("unclean.leader.election.enable", B, False),
        # `partition:broker,...` or `*` (no broker property supplies a default).
        _key("leader.replication.throttled.replicas", LS, ""),
        _key("follower.replication.throttled.replicas", LS, ""),
        *KAFKA_ONLY_TOPIC_KEYS,
    ]
)
