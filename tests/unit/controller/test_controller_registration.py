"""Controller registration on the active controller (KIP-919): `register_controller` decides
a RegisterControllerRecord, or nothing, or a refusal; replaying it fills the image."""

from __future__ import annotations

import uuid

import pytest

from moldau.config.values import BrokerConfig
from moldau.controller.core import ControllerCore
from moldau.controller.feature_control import SUPPORTED_FEATURES
from moldau.controller.operations import ControllerRegistration
from moldau.metadata.records import BrokerEndpoint, FeatureLevelRecord, RegisterControllerRecord
from moldau.protocol.errors import ErrorCode, KafkaError


def _core(metadata_version: int | None = 25) -> ControllerCore:
    core = ControllerCore(config=BrokerConfig({}))
    records = core.bootstrap_records()
    if metadata_version != 25:
        records = [r for r in records if r.name != "metadata.version"]
        if metadata_version is not None:
            records.append(FeatureLevelRecord(name="metadata.version", feature_level=14))
    core.replay(records, offset=len(records) - 1)
    return core


def _registration(
    controller_id: int = 1, *, incarnation: int = 1, port: int = 19091, features=None
) -> ControllerRegistration:
    return ControllerRegistration(
        controller_id=controller_id,
        incarnation_id=uuid.UUID(int=incarnation),
        endpoints=[BrokerEndpoint(name="CONTROLLER", host="127.0.0.1", port=port)],
        features=dict(SUPPORTED_FEATURES) if features is None else features,
    )


def _commit(core: ControllerCore, registration: ControllerRegistration) -> list:
    records, result = core.register_controller(registration)
    assert result is None
    core.replay(records, offset=core.image.offset + max(1, len(records)))
    return records


def test_a_controller_registration_is_one_record_replayed_into_the_image() -> None:
    core = _core()
    [record] = _commit(core, _registration(1))
    assert record == RegisterControllerRecord(
        controller_id=1,
        incarnation_id=uuid.UUID(int=1),
        endpoints=(BrokerEndpoint(name="CONTROLLER", host="127.0.0.1", port=19091),),
        features=tuple(
            (name, low, high) for name, (low, high) in sorted(SUPPORTED_FEATURES.items())
        ),
    )
    registered = core.image.controllers[1]
    assert registered.incarnation_id == uuid.UUID(int=1)
    assert registered.endpoint("CONTROLLER").port == 19091
    assert dict(registered.features) == dict(SUPPORTED_FEATURES)
    assert core.image.brokers == {}  # a controller is not a broker


def test_the_same_registration_twice_writes_nothing_new() -> None:
    core = _core()
    _commit(core, _registration(1))
    image = core.image
    assert _commit(core, _registration(1)) == []
    assert core.image.controllers == image.controllers


def test_a_new_incarnation_or_new_listeners_replace_the_registration() -> None:
    core = _core()
    _commit(core, _registration(1))
    _commit(core, _registration(2, incarnation=2, port=19092))
    [restart] = _commit(core, _registration(1, incarnation=3))
    assert restart.incarnation_id == uuid.UUID(int=3)
    [moved] = _commit(core, _registration(1, incarnation=3, port=29091))
    assert moved.endpoints[0].port == 29091
    assert core.image.controllers[1].incarnation_id == uuid.UUID(int=3)
    assert core.image.controllers[1].endpoints[0].port == 29091
    assert core.image.controllers[2].incarnation_id == uuid.UUID(int=2)


def test_any_controller_id_registers_voter_or_not() -> None:
    """Kafka takes the id as given: a controller that follows the log before it is added as a
    voter (KIP-853) registers too."""
    core = _core()
    _commit(core, _registration(42))
    assert set(core.image.controllers) == {42}
    with pytest.raises(KafkaError) as refused:
        core.register_controller(_registration(-1))
    assert refused.value.code == ErrorCode.invalid_request


@pytest.mark.parametrize("metadata_version", [None, 14], ids=["no level yet", "3.6-IV2"])
def test_a_metadata_version_before_3_7_refuses_registrations(metadata_version) -> None:
    core = _core(metadata_version)
    with pytest.raises(KafkaError) as refused:
        core.register_controller(_registration(1))
    assert refused.value.code == ErrorCode.unsupported_version
    assert "too old to support controller registrations" in (refused.value.message or "")


def test_a_controller_without_a_finalized_level_is_refused() -> None:
    core = _core()
    features = {**SUPPORTED_FEATURES, "group.version": (0, 0)}  # group.version 1 is finalized
    with pytest.raises(KafkaError) as refused:
        core.register_controller(_registration(1, features=features))
    assert refused.value.code == ErrorCode.unsupported_version
    assert "version 1 of group.version" in (refused.value.message or "")
    assert core.image.controllers == {}
