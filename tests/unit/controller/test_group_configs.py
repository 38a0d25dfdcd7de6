"""Group configs (config resources of type GROUP): share groups' share.* settings, checked as
Kafka 4.1 checks them against the broker's group.share.* bounds, stored in the metadata image,
described with their sources; the group configs Moldau does not act on are refused."""

from __future__ import annotations

import re

import pytest

from moldau.config.cluster import check_properties
from moldau.config.share_groups import (
    AutoOffsetReset,
    InvalidGroupConfig,
    ShareGroupConfig,
    ShareGroupSettings,
)
from moldau.config.values import BrokerConfig, ConfigError, ConfigSource
from moldau.controller.config_description import describe_configs
from moldau.controller.operations import (
    AlterableConfig,
    AlterConfigOp,
    ConfigResource,
    IncrementalAlterConfigsResource,
)
from moldau.metadata.records import ConfigResourceType
from moldau.protocol.errors import ErrorCode

from .test_controller_core import commit, make_core

SET, DELETE = AlterConfigOp.SET, AlterConfigOp.DELETE


def alter(core, group: str, *changes: tuple[str, AlterConfigOp, str | None]):
    [result] = commit(
        core,
        core.incremental_alter_configs(
            [
                IncrementalAlterConfigsResource(
                    resource=ConfigResource(
                        resource_type=int(ConfigResourceType.GROUP), resource_name=group
                    ),
                    configs=[AlterableConfig(name=n, op=op, value=v) for n, op, v in changes],
                )
            ]
        ),
    )
    return result


def test_share_configs_are_set_described_and_deleted() -> None:
    core = make_core(**{"group.share.record.lock.duration.ms": "20000"})
    result = alter(
        core,
        "queue",
        ("share.auto.offset.reset", SET, "earliest"),
        ("share.isolation.level", SET, "read_committed"),
        ("share.record.lock.duration.ms", SET, "45000"),
    )
    assert result.error_code == ErrorCode.none, result.error_message
    assert dict(core.image.group_configs["queue"]) == {
        "share.auto.offset.reset": "earliest",
        "share.isolation.level": "read_committed",
        "share.record.lock.duration.ms": "45000",
    }
    described = {
        c.name: c
        for c in describe_configs(
            core.image,
            core.config,
            resource_type=int(ConfigResourceType.GROUP),
            resource_name="queue",
            node_id=1,
        )
    }
    assert sorted(described) == [
        "share.auto.offset.reset",
        "share.heartbeat.interval.ms",
        "share.isolation.level",
        "share.record.lock.duration.ms",
        "share.session.timeout.ms",
    ]
    assert described["share.auto.offset.reset"].source is ConfigSource.GROUP_CONFIG
    assert described["share.session.timeout.ms"].value == "45000"
    assert described["share.session.timeout.ms"].source is ConfigSource.DEFAULT_CONFIG
    other = describe_configs(
        core.image,
        core.config,
        resource_type=int(ConfigResourceType.GROUP),
        resource_name="other",
        node_id=1,
        keys={"share.record.lock.duration.ms"},
    )
    assert [(c.name, c.value) for c in other] == [("share.record.lock.duration.ms", "20000")]
    alter(core, "queue", ("share.auto.offset.reset", DELETE, None))
    assert "share.auto.offset.reset" not in core.image.group_configs["queue"]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("consumer.session.timeout.ms", "30000", "does not support the group config"),
        ("streams.num.standby.replicas", "1", "does not support the group config"),
        ("share.colour", "blue", "Unknown group config name: share.colour"),
        ("share.auto.offset.reset", "soonest", "it must be latest, earliest or by_duration"),
        ("share.auto.offset.reset", "by_duration:yesterday", "Invalid duration yesterday"),
        ("share.isolation.level", "read_maybe", "String must be one of"),
        ("share.record.lock.duration.ms", "5000", "must be between 15000 and 60000"),
        ("share.session.timeout.ms", "90000", "must be between 45000 and 60000"),
        ("share.heartbeat.interval.ms", "soon", "Not a number of type INT"),
    ],
)
def test_configs_moldau_does_not_honour_or_out_of_bounds_are_refused(
    name: str, value: str, message: str
) -> None:
    core = make_core()
    result = alter(core, "queue", (name, SET, value))
    assert result.error_code == ErrorCode.invalid_config
    assert message in (result.error_message or "")
    assert "queue" not in core.image.group_configs


def test_a_heartbeat_interval_must_stay_below_the_session_timeout() -> None:
    core = make_core(
        **{
            "group.share.min.session.timeout.ms": "1000",
            "group.share.max.heartbeat.interval.ms": "60000",
        }
    )
    result = alter(core, "g", ("share.session.timeout.ms", SET, "5000"))
    assert result.error_code == ErrorCode.invalid_config  # the broker's 5000 ms heartbeat
    result = alter(
        core,
        "g",
        ("share.session.timeout.ms", SET, "8000"),
        ("share.heartbeat.interval.ms", SET, "8000"),
    )
    assert result.error_code == ErrorCode.invalid_config
    assert "must be less than share.session.timeout.ms" in (result.error_message or "")


def test_effective_settings_are_the_groups_over_the_brokers() -> None:
    broker = ShareGroupConfig.from_properties(
        BrokerConfig({"group.share.record.lock.duration.ms": "20000"})
    )
    settings = ShareGroupSettings.of(
        {
            "share.auto.offset.reset": "by_duration:P1DT2H3M4.5S",
            "share.isolation.level": "read_committed",
        },
        broker,
    )
    assert settings.record_lock_duration_ms == 20000
    assert settings.session_timeout_ms == 45000 and settings.heartbeat_interval_ms == 5000
    assert settings.auto_offset_reset == AutoOffsetReset(
        "by_duration", ((26 * 60 + 3) * 60 + 4) * 1000 + 500
    )
    assert settings.isolation_level == 1
    assert ShareGroupSettings.of({}, broker).auto_offset_reset == AutoOffsetReset("latest")


def test_broker_properties_out_of_their_bounds_stop_the_node() -> None:
    with pytest.raises(
        InvalidGroupConfig, match=re.escape("group.share.min.record.lock.duration.ms")
    ):
        ShareGroupConfig.from_properties(
            BrokerConfig({"group.share.record.lock.duration.ms": "2000"})
        )
    fine = ShareGroupConfig.from_properties(
        BrokerConfig(
            {
                "group.share.record.lock.duration.ms": "2000",
                "group.share.min.record.lock.duration.ms": "1000",
            }
        )
    )
    assert fine.record_lock_duration_ms == 2000
    with pytest.raises(ConfigError, match=re.escape("group.share.heartbeat.interval.ms")):
        check_properties(BrokerConfig({"group.share.heartbeat.interval.ms": "1000"}))
