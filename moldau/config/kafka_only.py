"""Kafka's broker and topic config keys that Moldau knows but does not act on.

Each key keeps Kafka's name, type, default and range, so a `server.properties` written for Kafka
loads and DescribeConfigs lists what Kafka lists; its description says why it has no effect here,
and it is read-only. Security keys whose setting would change who may connect, or how, are
refused when set (`moldau.config.cluster.check_properties`): knowing them refuses nothing less.

Facts from Apache Kafka 4.1's configuration reference (kafka_config.html and topic_config.html,
the ConfigDef of its 4.1.1 jars): names, types, defaults and ranges only. group.share.max.groups,
a Kafka 4.0 key 4.1 dropped, stays known so a 4.0 server.properties loads, but is listed by
DescribeConfigs only when set, as Kafka 4.1 lists a key it does not define.
"""

from __future__ import annotations

from typing import Any

from moldau.config.keys import ConfigKey, ConfigType, config_key

__all__ = ["KAFKA_ONLY_BROKER_KEYS", "KAFKA_ONLY_TOPIC_KEYS"]

B, S, INT, SH, L, D, LS, P, C = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
    ConfigType.CLASS,
)
LONG_MAX = 9223372036854775807
DOUBLE_MAX = 1.7976931348623157e308


def _na(reason: str, name: str, type_: ConfigType, default: Any, **limits: Any) -> ConfigKey:
    return config_key(name, type_, default, not_applicable=reason, **limits)


# Why each group has no effect, in Moldau's terms.
_EVENT_LOOP = (
    "a node does its request handling, log recovery, coordinator and cleaner work as tasks on "
    "one asyncio event loop; there is no thread pool to size."
)
_FETCHERS = "a follower runs one replica fetcher per leader broker, whatever this says."
_REQUEST_QUEUE = (
    "requests are not queued between network and I/O threads: each connection's requests are "
    "handled in order as they arrive. queued.max.request.bytes bounds their memory."
)
_SOCKET_BUFFERS = "socket buffer sizes are left to the operating system's autotuning (Kafka's -1)."
_BACKLOG = "each listener's socket listens with a fixed backlog of 1024."
_INTER_NODE_TIMEOUTS = (
    "connections between nodes use Moldau's own timeouts (controller.quorum.request.timeout.ms "
    "for the quorum and the controller channel, replica.fetch.wait.max.ms and "
    "replica.fetch.backoff.ms for replica fetchers), not these client-side ones."
)
_CONNECTION_RATE = (
    "new connections are not rate-limited; max.connections and max.connections.per.ip bound "
    "how many are open."
)
_PURGATORY = (
    "a request waiting for data, replication or a deletion is an asyncio waiter removed when it "
    "completes or times out; there is no purgatory to purge."
)
_FETCH_SESSIONS = (
    "incremental fetch sessions (KIP-227) are not kept: every Fetch is answered with session id "
    "0, so clients send full fetch requests."
)
_FETCH_MAX_BYTES = (
    "a Fetch answer is bounded by the request's own max_bytes and each partition's "
    "partition_max_bytes, not by a broker-wide cap."
)
_LINGER = (
    "the controller and the group coordinator write each batch of records as soon as it is ready."
)
_COORDINATOR_LOADING = (
    "the group and transaction coordinators load their partitions of the internal topics in "
    "reads of 4 MiB."
)
_COORDINATOR_WRITES = (
    "a coordinator's write waits for the in-sync replicas of its partition as a produce with "
    "acks=all does; no separate timeout applies to it."
)
_INTERNAL_TOPIC_CONFIGS = (
    "__consumer_offsets and __transaction_state are created with fixed topic configs "
    "(cleanup.policy=compact, segment.bytes=104857600, Kafka's default here) and follow the "
    "broker's min.insync.replicas; coordinators write their records uncompressed."
)
_METADATA_LOG = (
    "the metadata log is rolled and trimmed by its snapshots "
    "(metadata.log.max.record.bytes.between.snapshots, metadata.log.max.snapshot.interval.ms), "
    "not by segment size or retention."
)
_NO_OP_RECORDS = "the active controller writes no no-op records to the metadata log."
_CONTROLLED_SHUTDOWN = (
    "a broker always shuts down in a controlled way: it asks the controller to move its "
    "leaderships away before it stops."
)
_EARLY_START = (
    "all of a node's listeners start together; there is no set of listeners started before "
    "the others."
)
_LOG_DIR_FAILURE = (
    "a broker whose log directory fails takes it offline and keeps running; no deadline "
    "makes it shut down."
)
_CLEANER_BUFFERS = (
    "the log cleaner builds its offset map in memory as it needs, without fixed buffers, and is "
    "not throttled."
)
_CONSUMER_GROUP_BOUNDS = (
    "consumer groups have no per-group configs (KIP-848 group configs) for these limits to "
    "bound; group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms apply "
    "to every group, and group.max.size only to classic groups."
)
_ASSIGNORS = "consumer groups use Moldau's built-in uniform and range assignors; no others load."
_MIGRATION = "a group's protocol is fixed for as long as it has members; none is converted."
_REBALANCE_PROTOCOLS = "both the classic and the consumer (KIP-848) protocols are always served."
_SHARE_COORDINATOR = (
    "share groups (KIP-932) keep their partitions' state (SPSO, in-flight records, delivery "
    "counts) in memory on the partition leaders; there is no share coordinator and no "
    "__share_group_state topic yet."
)
_SHARE_ASSIGNORS = "share groups use Moldau's built-in simple assignor; no other loads."
_SHARE_GROUPS_BOUND = "the number of share groups is not bounded (Kafka 4.1 dropped this key)."
_TRANSACTIONS_TIMER = (
    "each transaction is aborted by a timer of its own when its transaction.timeout.ms "
    "passes, not by a periodic scan."
)
_TRANSACTIONS_VERIFY = (
    "transactional writes are always verified against the transaction coordinator "
    "(KIP-890 part 1), which answers at once, without retries to back off."
)
_DELEGATION_TOKENS = "delegation tokens are not implemented."
_TIERED_STORAGE = "tiered storage (KIP-405) is not implemented: every log stays on local disk."
_QUOTA_WINDOWS = "there are no controller mutation quotas to sample."
_STREAMS_GROUPS = (
    "streams groups (KIP-1071) are not implemented: StreamsGroupHeartbeat is not served."
)
_TWO_PHASE_COMMIT = (
    "transactions take part in no external two-phase commit (KIP-939): InitProducerId is "
    "served up to v5, without enable_2pc and keep_prepared_txn."
)
_METRICS = "metrics are not exported through Java reporters (JMX or plugins)."
_TELEMETRY = "client telemetry pushes are capped at a fixed 1 MiB (Kafka's default)."
_JVM = "Moldau runs no JVM security providers; TLS is Python's ssl module over OpenSSL."
_KERBEROS = (
    "GSSAPI (Kerberos) is not a mechanism Moldau offers (it is refused in "
    "sasl.enabled.mechanisms), so no Kerberos login takes place."
)
_REFUSED_PLUGIN = (
    "Moldau loads no Java plugin classes; a node configured with one would run without it, so "
    "setting this stops the node at start."
)
_REFUSED_JAAS = (
    "a broker reads JAAS settings per listener and mechanism "
    "(listener.name.<listener>.<mechanism>.sasl.jaas.config); setting the unprefixed key stops "
    "the node at start."
)
_REFUSED_SASL = (
    "Moldau's SASL is PLAIN, SCRAM and OAUTHBEARER (Kafka's two token validators) with its own "
    "login and callbacks (no custom handlers, no token login of its own); setting this stops "
    "the node at start."
)
_REFUSED_TLS = (
    "TLS is Python's ssl module over OpenSSL, without Java key managers, providers or engine "
    "factories; setting this stops the node at start."
)

KAFKA_ONLY_BROKER_KEYS: tuple[ConfigKey, ...] = (
    _na(_EVENT_LOOP, "background.threads", INT, 10, minimum=1),
    _na(_EVENT_LOOP, "num.io.threads", INT, 8, minimum=1),
    _na(_EVENT_LOOP, "num.network.threads", INT, 3, minimum=1),
    _na(_EVENT_LOOP, "num.recovery.threads.per.data.dir", INT, 2, minimum=1),
    _na(_EVENT_LOOP, "group.coordinator.threads", INT, 4, minimum=1),
    _na(_EVENT_LOOP, "log.cleaner.threads", INT, 1, minimum=0),
    _na(_EVENT_LOOP, "num.replica.alter.log.dirs.threads", INT, None),
    _na(_FETCHERS, "num.replica.fetchers", INT, 1),
    _na(_REQUEST_QUEUE, "queued.max.requests", INT, 500, minimum=1),
    _na(_SOCKET_BUFFERS, "socket.send.buffer.bytes", INT, 102400),
    _na(_SOCKET_BUFFERS, "socket.receive.buffer.bytes", INT, 102400),
    _na(_SOCKET_BUFFERS, "replica.socket.receive.buffer.bytes", INT, 65536),
    _na(_BACKLOG, "socket.listen.backlog.size", INT, 50, minimum=1),
    _na(_INTER_NODE_TIMEOUTS, "request.timeout.ms", INT, 30000),
    _na(_INTER_NODE_TIMEOUTS, "replica.socket.timeout.ms", INT, 30000),
    _na(_INTER_NODE_TIMEOUTS, "controller.socket.timeout.ms", INT, 30000),
    _na(_INTER_NODE_TIMEOUTS, "socket.connection.setup.timeout.ms", L, 10000),
    _na(_INTER_NODE_TIMEOUTS, "socket.connection.setup.timeout.max.ms", L, 30000),
    _na(_INTER_NODE_TIMEOUTS, "initial.broker.registration.timeout.ms", INT, 60000),
    _na(_CONNECTION_RATE, "max.connection.creation.rate", INT, 2147483647, minimum=0),
    _na(_PURGATORY, "delete.records.purgatory.purge.interval.requests", INT, 1),
    _na(_PURGATORY, "fetch.purgatory.purge.interval.requests", INT, 1000),
    _na(_PURGATORY, "producer.purgatory.purge.interval.requests", INT, 1000),
    _na(_FETCH_SESSIONS, "max.incremental.fetch.session.cache.slots", INT, 1000, minimum=0),
    _na(_FETCH_MAX_BYTES, "fetch.max.bytes", INT, 57671680, minimum=1024),
    _na(_LINGER, "controller.quorum.append.linger.ms", INT, 25),
    _na(_LINGER, "group.coordinator.append.linger.ms", INT, 5, minimum=0),
    _na(_COORDINATOR_LOADING, "offsets.load.buffer.size", INT, 5242880, minimum=1),
    _na(_COORDINATOR_LOADING, "transaction.state.log.load.buffer.size", INT, 5242880, minimum=1),
    _na(_COORDINATOR_WRITES, "offsets.commit.timeout.ms", INT, 5000, minimum=1),
    _na(_INTERNAL_TOPIC_CONFIGS, "offsets.topic.compression.codec", INT, 0),
    _na(_INTERNAL_TOPIC_CONFIGS, "offsets.topic.segment.bytes", INT, 104857600, minimum=1),
    _na(_INTERNAL_TOPIC_CONFIGS, "transaction.state.log.segment.bytes", INT, 104857600, minimum=1),
    _na(_INTERNAL_TOPIC_CONFIGS, "transaction.state.log.min.isr", INT, 2, minimum=1),
    _na(_METADATA_LOG, "metadata.log.segment.bytes", INT, 1073741824, minimum=12),
    _na(_METADATA_LOG, "metadata.log.segment.ms", L, 604800000),
    _na(_METADATA_LOG, "metadata.max.retention.bytes", L, 104857600),
    _na(_METADATA_LOG, "metadata.max.retention.ms", L, 604800000),
    _na(_NO_OP_RECORDS, "metadata.max.idle.interval.ms", INT, 500, minimum=0),
    _na(_CONTROLLED_SHUTDOWN, "controlled.shutdown.enable", B, True),
    _na(_EARLY_START, "early.start.listeners", S, None),
    _na(_LOG_DIR_FAILURE, "log.dir.failure.timeout.ms", L, 30000, minimum=1),
    _na(_CLEANER_BUFFERS, "log.cleaner.dedupe.buffer.size", L, 134217728),
    _na(_CLEANER_BUFFERS, "log.cleaner.io.buffer.load.factor", D, 0.9),
    _na(_CLEANER_BUFFERS, "log.cleaner.io.buffer.size", INT, 524288, minimum=0),
    _na(_CLEANER_BUFFERS, "log.cleaner.io.max.bytes.per.second", D, DOUBLE_MAX),
    _na(_CONSUMER_GROUP_BOUNDS, "group.consumer.max.heartbeat.interval.ms", INT, 15000, minimum=1),
    _na(_CONSUMER_GROUP_BOUNDS, "group.consumer.max.session.timeout.ms", INT, 60000, minimum=1),
    _na(_CONSUMER_GROUP_BOUNDS, "group.consumer.min.heartbeat.interval.ms", INT, 5000, minimum=1),
    _na(_CONSUMER_GROUP_BOUNDS, "group.consumer.min.session.timeout.ms", INT, 45000, minimum=1),
    _na(_CONSUMER_GROUP_BOUNDS, "group.consumer.max.size", INT, 2147483647, minimum=1),
    _na(_ASSIGNORS, "group.consumer.assignors", LS, "uniform,range"),
    _na(_MIGRATION, "group.consumer.migration.policy", S, "bidirectional"),
    _na(_REBALANCE_PROTOCOLS, "group.coordinator.rebalance.protocols", LS, "classic,consumer"),
    _na(_SHARE_COORDINATOR, "share.coordinator.load.buffer.size", INT, 5242880, minimum=1),
    _na(_SHARE_COORDINATOR, "share.coordinator.state.topic.compression.codec", INT, 0),
    _na(_SHARE_COORDINATOR, "share.coordinator.state.topic.min.isr", SH, 2, minimum=1),
    _na(_SHARE_COORDINATOR, "share.coordinator.state.topic.num.partitions", INT, 50, minimum=1),
    _na(_SHARE_COORDINATOR, "share.coordinator.state.topic.replication.factor", SH, 3, minimum=1),
    _na(
        _SHARE_COORDINATOR, "share.coordinator.state.topic.segment.bytes", INT, 104857600, minimum=1
    ),
    _na(_SHARE_COORDINATOR, "share.coordinator.write.timeout.ms", INT, 5000, minimum=1),
    _na(
        _SHARE_GROUPS_BOUND,
        "group.share.max.groups",
        SH,
        10,
        minimum=1,
        maximum=100,
        described_unset=False,
    ),
    _na(_SHARE_ASSIGNORS, "group.share.assignors", LS, "simple"),
    _na(_SHARE_COORDINATOR, "share.coordinator.append.linger.ms", INT, 5, minimum=0),
    _na(
        _SHARE_COORDINATOR,
        "share.coordinator.snapshot.update.records.per.snapshot",
        INT,
        500,
        minimum=0,
    ),
    _na(_SHARE_COORDINATOR, "share.coordinator.threads", INT, 1, minimum=1),
    _na(_PURGATORY, "share.fetch.purgatory.purge.interval.requests", INT, 1000),
    _na(_STREAMS_GROUPS, "group.streams.heartbeat.interval.ms", INT, 5000, minimum=1),
    _na(_STREAMS_GROUPS, "group.streams.max.heartbeat.interval.ms", INT, 15000, minimum=1),
    _na(_STREAMS_GROUPS, "group.streams.max.session.timeout.ms", INT, 60000, minimum=1),
    _na(_STREAMS_GROUPS, "group.streams.max.size", INT, 2147483647, minimum=1),
    _na(_STREAMS_GROUPS, "group.streams.max.standby.replicas", INT, 2, minimum=0),
    _na(_STREAMS_GROUPS, "group.streams.min.heartbeat.interval.ms", INT, 5000, minimum=1),
    _na(_STREAMS_GROUPS, "group.streams.min.session.timeout.ms", INT, 45000, minimum=1),
    _na(_STREAMS_GROUPS, "group.streams.num.standby.replicas", INT, 0, minimum=0),
    _na(_STREAMS_GROUPS, "group.streams.session.timeout.ms", INT, 45000, minimum=1),
    _na(_TWO_PHASE_COMMIT, "transaction.two.phase.commit.enable", B, False),
    _na(
        _TRANSACTIONS_TIMER,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        INT,
        10000,
        minimum=1,
    ),
    _na(_TRANSACTIONS_VERIFY, "transaction.partition.verification.enable", B, True),
    _na(_TRANSACTIONS_VERIFY, "add.partitions.to.txn.retry.backoff.max.ms", INT, 100, minimum=0),
    _na(_TRANSACTIONS_VERIFY, "add.partitions.to.txn.retry.backoff.ms", INT, 20, minimum=1),
    _na(_DELEGATION_TOKENS, "delegation.token.expiry.time.ms", L, 86400000, minimum=1),
    _na(_DELEGATION_TOKENS, "delegation.token.max.lifetime.ms", L, 604800000, minimum=1),
    _na(_DELEGATION_TOKENS, "delegation.token.secret.key", P, None),
    _na(_DELEGATION_TOKENS, "delegation.token.expiry.check.interval.ms", L, 3600000, minimum=1),
    _na(_TIERED_STORAGE, "log.local.retention.bytes", L, -2, minimum=-2),
    _na(_TIERED_STORAGE, "log.local.retention.ms", L, -2, minimum=-2),
    _na(_TIERED_STORAGE, "remote.fetch.max.wait.ms", INT, 500, minimum=1),
    _na(_TIERED_STORAGE, "remote.list.offsets.request.timeout.ms", L, 30000, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.copier.thread.pool.size", INT, 10, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.copy.max.bytes.per.second", L, LONG_MAX, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.copy.quota.window.num", INT, 11, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.copy.quota.window.size.seconds", INT, 1, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.expiration.thread.pool.size", INT, 10, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.fetch.max.bytes.per.second", L, LONG_MAX, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.fetch.quota.window.num", INT, 11, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.fetch.quota.window.size.seconds", INT, 1, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.thread.pool.size", INT, 2, minimum=1),
    _na(
        _TIERED_STORAGE,
        "remote.log.metadata.manager.class.name",
        S,
        "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager",
    ),
    _na(_TIERED_STORAGE, "remote.log.metadata.manager.class.path", S, None),
    _na(_TIERED_STORAGE, "remote.log.metadata.manager.impl.prefix", S, "rlmm.config."),
    _na(_TIERED_STORAGE, "remote.log.metadata.manager.listener.name", S, None),
    _na(_TIERED_STORAGE, "remote.log.reader.max.pending.tasks", INT, 100, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.reader.threads", INT, 10, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.storage.manager.class.name", S, None),
    _na(_TIERED_STORAGE, "remote.log.storage.manager.class.path", S, None),
    _na(_TIERED_STORAGE, "remote.log.storage.manager.impl.prefix", S, "rsm.config."),
    _na(_TIERED_STORAGE, "remote.log.storage.system.enable", B, False),
    _na(_TIERED_STORAGE, "remote.log.index.file.cache.total.size.bytes", L, 1073741824, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.manager.task.interval.ms", L, 30000, minimum=1),
    _na(_TIERED_STORAGE, "remote.log.metadata.custom.metadata.max.bytes", INT, 128, minimum=0),
    _na(_QUOTA_WINDOWS, "controller.quota.window.num", INT, 11, minimum=1),
    _na(_QUOTA_WINDOWS, "controller.quota.window.size.seconds", INT, 1, minimum=1),
    _na(_METRICS, "kafka.metrics.polling.interval.secs", INT, 10, minimum=1),
    _na(_METRICS, "kafka.metrics.reporters", LS, ""),
    _na(_METRICS, "metric.reporters", LS, "org.apache.kafka.common.metrics.JmxReporter"),
    _na(_METRICS, "metrics.num.samples", INT, 2, minimum=1),
    _na(_METRICS, "metrics.recording.level", S, "INFO"),
    _na(_METRICS, "metrics.sample.window.ms", L, 30000, minimum=1),
    _na(_TELEMETRY, "telemetry.max.bytes", INT, 1048576, minimum=1),
    _na(_JVM, "security.providers", S, None),
    _na(_KERBEROS, "sasl.kerberos.kinit.cmd", S, "/usr/bin/kinit"),
    _na(_KERBEROS, "sasl.kerberos.min.time.before.relogin", L, 60000),
    _na(_KERBEROS, "sasl.kerberos.principal.to.local.rules", LS, "DEFAULT"),
    _na(_KERBEROS, "sasl.kerberos.service.name", S, None),
    _na(_KERBEROS, "sasl.kerberos.ticket.renew.jitter", D, 0.05),
    _na(_KERBEROS, "sasl.kerberos.ticket.renew.window.factor", D, 0.8),
    _na(
        _REFUSED_PLUGIN,
        "principal.builder.class",
        C,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
    ),
    _na(_REFUSED_PLUGIN, "alter.config.policy.class.name", C, None),
    _na(_REFUSED_PLUGIN, "create.topic.policy.class.name", C, None),
    _na(_REFUSED_PLUGIN, "client.quota.callback.class", C, None),
    _na(_REFUSED_JAAS, "sasl.jaas.config", P, None),
    _na(_REFUSED_SASL, "sasl.client.callback.handler.class", C, None),
    _na(_REFUSED_SASL, "sasl.login.callback.handler.class", C, None),
    _na(_REFUSED_SASL, "sasl.login.class", C, None),
    _na(_REFUSED_SASL, "sasl.login.refresh.buffer.seconds", SH, 300),
    _na(_REFUSED_SASL, "sasl.login.refresh.min.period.seconds", SH, 60),
    _na(_REFUSED_SASL, "sasl.login.refresh.window.factor", D, 0.8),
    _na(_REFUSED_SASL, "sasl.login.refresh.window.jitter", D, 0.05),
    _na(_REFUSED_SASL, "sasl.oauthbearer.token.endpoint.url", S, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.algorithm", S, "RS256"),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.claim.aud", S, None),
    _na(
        _REFUSED_SASL,
        "sasl.oauthbearer.assertion.claim.exp.seconds",
        INT,
        300,
        minimum=0,
        maximum=86400,
    ),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.claim.iss", S, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.claim.jti.include", B, False),
    _na(
        _REFUSED_SASL,
        "sasl.oauthbearer.assertion.claim.nbf.seconds",
        INT,
        60,
        minimum=0,
        maximum=3600,
    ),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.claim.sub", S, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.file", S, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.private.key.file", S, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.private.key.passphrase", P, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.assertion.template.file", S, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.client.credentials.client.id", S, None),
    _na(_REFUSED_SASL, "sasl.oauthbearer.client.credentials.client.secret", P, None),
    _na(
        _REFUSED_SASL,
        "sasl.oauthbearer.jwt.retriever.class",
        C,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
    ),
    _na(
        _REFUSED_SASL,
        "sasl.oauthbearer.jwt.validator.class",
        C,
        "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
    ),
    _na(_REFUSED_SASL, "sasl.oauthbearer.scope", S, None),
    _na(_REFUSED_SASL, "sasl.server.callback.handler.class", C, None),
    _na(_REFUSED_SASL, "sasl.server.max.receive.size", INT, 524288),
    _na(_REFUSED_SASL, "sasl.login.connect.timeout.ms", INT, None),
    _na(_REFUSED_SASL, "sasl.login.read.timeout.ms", INT, None),
    _na(_REFUSED_SASL, "sasl.login.retry.backoff.max.ms", L, 10000),
    _na(_REFUSED_SASL, "sasl.login.retry.backoff.ms", L, 100),
    _na(_REFUSED_TLS, "ssl.keymanager.algorithm", S, "SunX509"),
    _na(_REFUSED_TLS, "ssl.trustmanager.algorithm", S, "PKIX"),
    _na(_REFUSED_TLS, "ssl.provider", S, None),
    _na(_REFUSED_TLS, "ssl.secure.random.implementation", S, None),
    _na(_REFUSED_TLS, "ssl.allow.dn.changes", B, False),
    _na(_REFUSED_TLS, "ssl.allow.san.changes", B, False),
    _na(_REFUSED_TLS, "ssl.engine.factory.class", C, None),
)

KAFKA_ONLY_TOPIC_KEYS: tuple[ConfigKey, ...] = (
    _na(_TIERED_STORAGE, "local.retention.bytes", L, -2, minimum=-2),
    _na(_TIERED_STORAGE, "local.retention.ms", L, -2, minimum=-2),
    _na(_TIERED_STORAGE, "remote.log.copy.disable", B, False),
    _na(_TIERED_STORAGE, "remote.log.delete.on.disable", B, False),
    _na(_TIERED_STORAGE, "remote.storage.enable", B, False),
)
