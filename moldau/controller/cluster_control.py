"""Broker registration, heartbeats and fencing (Kafka's ClusterControlManager and
BrokerHeartbeatManager, KIP-631).

A broker registers (a new incarnation gets a new broker epoch, fenced), then heartbeats every
`broker.heartbeat.interval.ms`. The active controller unfences it once it has replayed the
metadata log up to its own registration, and fences it again when its heartbeats stop for
`broker.session.timeout.ms`, or when it asks to shut down (controlled shutdown; moving its
leaderships away first is partition replication's part).

Heartbeats themselves are soft state of the active controller and never reach the log: only
their consequences do (Fence/Unfence records). A controller that becomes active knows no
heartbeat yet, so it counts every registered broker as heard from at that moment.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.controller.operations import (
    BrokerHeartbeat,
    BrokerHeartbeatResult,
    BrokerRegistration,
    BrokerRegistrationResult,
)
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class _Session:
    broker_epoch: int
    last_contact_ms: int
    caught_up_offset: int  # the metadata offset the broker must have replayed to be unfenced
    shutting_down: bool = False


class BrokerHeartbeats:
    """When each broker was last heard from, on the active controller only."""

    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self._sessions: dict[int, _Session] = {}

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """A new active controller: every registered broker was just heard from."""
        self._sessions = {
            broker.broker_id: _Session(
                broker_epoch=broker.broker_epoch,
                last_contact_ms=now_ms,
                caught_up_offset=image.offset,
            )
            for broker in image.brokers.values()
        }

    def session_alive(self, broker_id: int, now_ms: int) -> bool:
        session = self._sessions.get(broker_id)
        return session is not None and now_ms - session.last_contact_ms < self.session_timeout_ms

    def expired(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers whose session ran out."""
        return [
            broker.broker_id
            for broker in image.brokers.values()
            if not broker.fenced and not self.session_alive(broker.broker_id, now_ms)
        ]

    def next_deadline_ms(self, image: MetadataImage) -> int | None:
        deadlines = [
            self._sessions[broker.broker_id].last_contact_ms + self.session_timeout_ms
            for broker in image.brokers.values()
            if not broker.fenced and broker.broker_id in self._sessions
        ]
        return min(deadlines) if deadlines else None


def register_broker(
    image: MetadataImage,
    heartbeats: BrokerHeartbeats,
    registration: BrokerRegistration,
    *,
    now_ms: int,
    unfence: bool,
) -> tuple[list[MetadataRecord], BrokerRegistrationResult]:
    """A new incarnation of a broker, fenced until it has caught up (`unfence`: at once, for
    the broker inside a standalone node's own process)."""
    if registration.cluster_id is not None and registration.cluster_id != image.cluster_id:
        raise KafkaError(
            ErrorCode.inconsistent_cluster_id,
            f"Broker {registration.broker_id} belongs to cluster {registration.cluster_id}, "
            f"not {image.cluster_id}.",
        )
    previous = image.brokers.get(registration.broker_id)
    if (
        not unfence  # (in-process, the previous incarnation was this same process's: gone)
        and previous is not None
        and previous.incarnation_id != registration.incarnation_id
        and not previous.fenced
        and heartbeats.session_alive(registration.broker_id, now_ms)
    ):
        raise KafkaError(
            ErrorCode.duplicate_broker_registration,
            f"Another broker is registered with id {registration.broker_id} and is alive.",
        )
    broker_epoch = image.offset + 1
    if previous is not None:
        broker_epoch = max(broker_epoch, previous.broker_epoch + 1)
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(
            broker_id=registration.broker_id,
            incarnation_id=registration.incarnation_id,
            broker_epoch=broker_epoch,
            endpoints=tuple(registration.endpoints),
            rack=registration.rack,
            fenced=True,
            is_controller=registration.is_controller,
        )
    ]
    if unfence:
        records.append(
            UnfenceBrokerRecord(broker_id=registration.broker_id, broker_epoch=broker_epoch)
        )
    heartbeats._sessions[registration.broker_id] = _Session(
        broker_epoch=broker_epoch,
        last_contact_ms=now_ms,
        # The registration is appended after everything in the image: replaying past the
        # image's end is replaying past it.
        caught_up_offset=image.offset + 1,
    )
    return records, BrokerRegistrationResult(
        broker_id=registration.broker_id, broker_epoch=broker_epoch
    )


def broker_heartbeat(
    image: MetadataImage,
    heartbeats: BrokerHeartbeats,
    heartbeat: BrokerHeartbeat,
    *,
    now_ms: int,
) -> tuple[list[MetadataRecord], BrokerHeartbeatResult]:
    broker = image.brokers.get(heartbeat.broker_id)
    if broker is None:
        raise KafkaError(
            ErrorCode.broker_id_not_registered,
            f"Broker {heartbeat.broker_id} is not registered.",
        )
    if broker.broker_epoch != heartbeat.broker_epoch:
        raise KafkaError(
            ErrorCode.stale_broker_epoch,
            f"Broker {heartbeat.broker_id} has epoch {broker.broker_epoch}, "
            f"not {heartbeat.broker_epoch}.",
        )
    session = heartbeats._sessions.get(heartbeat.broker_id)
    if session is None or session.broker_epoch != broker.broker_epoch:
        session = _Session(
            broker_epoch=broker.broker_epoch, last_contact_ms=now_ms, caught_up_offset=image.offset
        )
        heartbeats._sessions[heartbeat.broker_id] = session
    session.last_contact_ms = now_ms
    caught_up = heartbeat.current_metadata_offset >= session.caught_up_offset
    records: list[MetadataRecord] = []
    fenced = broker.fenced
    if heartbeat.want_shut_down:
        session.shutting_down = True
    if (heartbeat.want_shut_down or heartbeat.want_fence) and not fenced:
        records.append(
            FenceBrokerRecord(broker_id=broker.broker_id, broker_epoch=broker.broker_epoch)
        )
        fenced = True
    elif fenced and caught_up and not heartbeat.want_fence and not session.shutting_down:
        records.append(
            UnfenceBrokerRecord(broker_id=broker.broker_id, broker_epoch=broker.broker_epoch)
        )
        fenced = False
    return records, BrokerHeartbeatResult(
        is_caught_up=caught_up,
        is_fenced=fenced,
        should_shut_down=session.shutting_down,
    )


def fence_expired_brokers(
    image: MetadataImage, heartbeats: BrokerHeartbeats, *, now_ms: int
) -> list[MetadataRecord]:
    records: list[MetadataRecord] = []
    for broker_id in heartbeats.expired(image, now_ms):
        broker = image.brokers[broker_id]
        records.append(FenceBrokerRecord(broker_id=broker_id, broker_epoch=broker.broker_epoch))
    return records
