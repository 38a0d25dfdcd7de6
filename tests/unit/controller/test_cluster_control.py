"""Broker registration, heartbeats and fencing on the active controller (KIP-631)."""

from __future__ import annotations

import uuid

import pytest

from moldau.config.values import BrokerConfig
from moldau.controller.core import ControllerCore
from moldau.controller.operations import BrokerHeartbeat, BrokerRegistration
from moldau.metadata.records import BrokerEndpoint, FenceBrokerRecord, UnfenceBrokerRecord
from moldau.protocol.errors import ErrorCode, KafkaError

SESSION_MS = 9000


def _core() -> ControllerCore:
    return ControllerCore(config=BrokerConfig({"broker.session.timeout.ms": str(SESSION_MS)}))


def _commit(core: ControllerCore, operation):
    records, result = operation
    core.replay(records, offset=core.image.offset + max(1, len(records)))
    return records, result


def _registration(broker_id: int, incarnation: int = 1, **kwargs) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id,
        incarnation_id=uuid.UUID(int=incarnation),
        endpoints=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id)],
        **kwargs,
    )


def _heartbeat(
    core: ControllerCore, broker_id: int, *, now_ms: int, offset: int | None = None, **kw
):
    epoch = core.image.brokers[broker_id].broker_epoch
    return _commit(
        core,
        core.broker_heartbeat(
            BrokerHeartbeat(
                broker_id=broker_id,
                broker_epoch=epoch,
                current_metadata_offset=core.image.offset if offset is None else offset,
                **kw,
            ),
            now_ms=now_ms,
        ),
    )


def test_a_registered_broker_stays_fenced_until_it_has_replayed_its_registration() -> None:
    core = _core()
    _commit(core, core.register_broker(_registration(2), now_ms=0, unfence=False))
    assert core.image.brokers[2].fenced
    records, result = _heartbeat(core, 2, now_ms=100, offset=-1)
    assert records == [] and result.is_fenced and not result.is_caught_up
    records, result = _heartbeat(core, 2, now_ms=200)
    assert [type(r) for r in records] == [UnfenceBrokerRecord]
    assert result.is_caught_up and not result.is_fenced
    assert not core.image.brokers[2].fenced
    assert [b.broker_id for b in core.image.live_brokers()] == [2]


def test_a_broker_whose_heartbeats_stop_is_fenced_after_the_session_timeout() -> None:
    core = _core()
    _commit(core, core.register_broker(_registration(1), now_ms=0, unfence=False))
    _commit(core, core.register_broker(_registration(2), now_ms=0, unfence=False))
    _heartbeat(core, 1, now_ms=1000)
    _heartbeat(core, 2, now_ms=1000)
    _heartbeat(core, 1, now_ms=9000)
    records, _ = core.fence_expired_brokers(now_ms=9999)
    assert records == []
    records, _ = _commit(core, core.fence_expired_brokers(now_ms=10_000))
    assert records == [
        FenceBrokerRecord(broker_id=2, broker_epoch=core.image.brokers[2].broker_epoch)
    ]
    assert [b.broker_id for b in core.image.live_brokers()] == [1]
    assert core.heartbeats.next_deadline_ms(core.image) == 9000 + SESSION_MS
    # It comes back: the same incarnation heartbeats again and is unfenced.
    _, result = _heartbeat(core, 2, now_ms=12_000)
    assert not result.is_fenced


def test_a_heartbeat_with_an_old_epoch_is_refused() -> None:
    core = _core()
    _commit(core, core.register_broker(_registration(3), now_ms=0, unfence=False))
    old_epoch = core.image.brokers[3].broker_epoch
    _commit(
        core,
        core.register_broker(_registration(3, incarnation=2), now_ms=SESSION_MS, unfence=False),
    )
    with pytest.raises(KafkaError) as caught:
        core.broker_heartbeat(
            BrokerHeartbeat(broker_id=3, broker_epoch=old_epoch, current_metadata_offset=5),
            now_ms=SESSION_MS + 1,
        )
    assert caught.value.code == ErrorCode.stale_broker_epoch
    with pytest.raises(KafkaError) as caught:
        core.broker_heartbeat(
            BrokerHeartbeat(broker_id=9, broker_epoch=1, current_metadata_offset=5), now_ms=1
        )
    assert caught.value.code == ErrorCode.broker_id_not_registered


def test_a_second_live_incarnation_of_one_id_is_a_duplicate_registration() -> None:
    core = _core()
    _commit(core, core.register_broker(_registration(1, incarnation=1), now_ms=0, unfence=False))
    _heartbeat(core, 1, now_ms=100)
    with pytest.raises(KafkaError) as caught:
        core.register_broker(_registration(1, incarnation=2), now_ms=200, unfence=False)
    assert caught.value.code == ErrorCode.duplicate_broker_registration
    # Once the old one's session is over, the new incarnation replaces it with a higher epoch.
    old_epoch = core.image.brokers[1].broker_epoch
    _, result = _commit(
        core,
        core.register_broker(
            _registration(1, incarnation=2), now_ms=100 + SESSION_MS, unfence=False
        ),
    )
    assert result.broker_epoch > old_epoch


def test_a_broker_of_another_cluster_is_refused() -> None:
    core = _core()
    with pytest.raises(KafkaError) as caught:
        core.register_broker(_registration(1, cluster_id="elsewhere"), now_ms=0, unfence=False)
    assert caught.value.code == ErrorCode.inconsistent_cluster_id


def test_controlled_shutdown_fences_the_broker_and_tells_it_to_stop() -> None:
    core = _core()
    _commit(core, core.register_broker(_registration(1), now_ms=0, unfence=False))
    _heartbeat(core, 1, now_ms=100)
    records, result = _heartbeat(core, 1, now_ms=200, want_shut_down=True)
    assert [type(r) for r in records] == [FenceBrokerRecord]
    assert result.should_shut_down and result.is_fenced
    _, result = _heartbeat(core, 1, now_ms=300)  # (a late heartbeat does not unfence it)
    assert result.is_fenced


def test_a_new_active_controller_counts_every_broker_as_just_heard_from() -> None:
    core = _core()
    _commit(core, core.register_broker(_registration(1), now_ms=0, unfence=True))
    assert core.fence_expired_brokers(now_ms=50_000)[0]  # nobody heard from it since 0
    core.activate(now_ms=50_000)
    assert core.fence_expired_brokers(now_ms=50_000 + SESSION_MS - 1)[0] == []
