"""Broker registration, heartbeats, fencing and controlled shutdown (Kafka's
ClusterControlManager and BrokerHeartbeatManager, KIP-631), and controller registration
(KIP-919: `register_controller`).

A broker registers (a new incarnation gets a new broker epoch, fenced), then heartbeats every
`broker.heartbeat.interval.ms`. Each heartbeat moves it through Kafka's states:

    FENCED               --caught up, never asked to shut down-->         UNFENCED
    FENCED               --want_shut_down-->                              SHUTDOWN_NOW
    UNFENCED             --want_fence (and want_shut_down)-->             FENCED (SHUTDOWN_NOW)
    UNFENCED             --want_shut_down, leading nothing-->             SHUTDOWN_NOW
    UNFENCED             --want_shut_down, leading partitions-->          CONTROLLED_SHUTDOWN
    CONTROLLED_SHUTDOWN  --leads nothing, every active broker replayed
                           past the leaderships' move-->                  SHUTDOWN_NOW
    any but FENCED       --no heartbeat for broker.session.timeout.ms-->  FENCED

Fencing (and SHUTDOWN_NOW, which fences and answers `should_shut_down`) takes the broker out
of every ISR and moves its leaderships first (`partition_control.broker_leaves`); so does
entering controlled shutdown, which keeps the broker unfenced, marked in the image
(BrokerRegistrationChangeRecord) so that it is given no leadership, ISR place or new replica.
Unfencing makes leaderless partitions electable again (`partition_control.broker_joins`).

Heartbeats themselves are soft state of the active controller and never reach the log: only
their consequences do. A controller that becomes active knows no heartbeat yet, so it counts
every registered broker as heard from at that moment.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.config.values import BrokerConfig
from moldau.controller import feature_control, partition_control
from moldau.controller.operations import (
    BrokerHeartbeat,
    BrokerHeartbeatResult,
    BrokerRegistration,
    BrokerRegistrationResult,
    ControllerRegistration,
)
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    UnfenceBrokerRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError


@dataclass(slots=True)
class _Session:
    broker_epoch: int
    last_contact_ms: int
    caught_up_offset: int  # the metadata offset the broker must have replayed to be unfenced
    metadata_offset: int = -1  # what it said it had replayed in its last heartbeat
    # In controlled shutdown: the offset every active broker must have replayed (the move of
    # this broker's leaderships) before it may shut down.
    controlled_shutdown_offset: int | None = None
    # It asked to shut down: a late heartbeat of this incarnation does not unfence it again.
    shutting_down: bool = False


class BrokerHeartbeats:
    """When each broker was last heard from, on the active controller only. Every `now_ms` here
    is the controller's monotonic clock (`moldau.clock.monotonic_ms`), as Kafka's
    BrokerHeartbeatManager uses `Time.nanoseconds`: a wall-clock step must neither fence every
    broker at once nor keep a silent one unfenced."""

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

    def lowest_active_offset(self, image: MetadataImage) -> int | None:
        """The least metadata offset that active brokers (unfenced, not shutting down) said
        they had replayed; None when there are none (Kafka's lowestActiveOffset)."""
        offsets = [
            self._sessions[broker.broker_id].metadata_offset
            if broker.broker_id in self._sessions
            else -1
            for broker in image.active_brokers()
        ]
        return min(offsets) if offsets else None


def register_broker(
    image: MetadataImage,
    config: BrokerConfig,
    heartbeats: BrokerHeartbeats,
    registration: BrokerRegistration,
    *,
    now_ms: int,
    unfence: bool,
) -> tuple[list[MetadataRecord], BrokerRegistrationResult]:
    """A new incarnation of a broker, fenced until it has caught up (`unfence`: at once, for
    the broker inside a standalone node's own process). A previous incarnation still unfenced
    in the image (its session ran out unnoticed, or it registers again) is fenced first, moving
    its leaderships away."""
    if registration.cluster_id is not None and registration.cluster_id != image.cluster_id:
        raise KafkaError(
            ErrorCode.inconsistent_cluster_id,
            f"Broker {registration.broker_id} belongs to cluster {registration.cluster_id}, "
            f"not {image.cluster_id}.",
        )
    broker_id = registration.broker_id
    previous = image.brokers.get(broker_id)
    if (
        not unfence  # (in-process, the previous incarnation was this same process's: gone)
        and previous is not None
        and previous.incarnation_id != registration.incarnation_id
        and not previous.fenced
        and heartbeats.session_alive(broker_id, now_ms)
    ):
        raise KafkaError(
            ErrorCode.duplicate_broker_registration,
            f"Another broker is registered with id {broker_id} and is alive.",
        )
    broker_epoch = image.offset + 1
    records: list[MetadataRecord] = []
    if previous is not None:
        broker_epoch = max(broker_epoch, previous.broker_epoch + 1)
        if not previous.fenced and not unfence:
            records.extend(_fence(image, config, broker_id))
    records.append(
        RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=registration.incarnation_id,
            broker_epoch=broker_epoch,
            endpoints=tuple(registration.endpoints),
            rack=registration.rack,
            fenced=True,
            is_controller=registration.is_controller,
        )
    )
    if unfence:
        records.append(UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=broker_epoch))
        records.extend(partition_control.broker_joins(image, config, broker_id))
    heartbeats._sessions[broker_id] = _Session(
        broker_epoch=broker_epoch,
        last_contact_ms=now_ms,
        # The registration is appended after everything in the image: replaying past the
        # image's end is replaying past it.
        caught_up_offset=image.offset + 1,
    )
    return records, BrokerRegistrationResult(broker_id=broker_id, broker_epoch=broker_epoch)


def broker_heartbeat(
    image: MetadataImage,
    config: BrokerConfig,
    heartbeats: BrokerHeartbeats,
    heartbeat: BrokerHeartbeat,
    *,
    now_ms: int,
) -> tuple[list[MetadataRecord], BrokerHeartbeatResult]:
    broker_id = heartbeat.broker_id
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise KafkaError(
            ErrorCode.broker_id_not_registered,
            f"Broker {broker_id} is not registered.",
        )
    if broker.broker_epoch != heartbeat.broker_epoch:
        raise KafkaError(
            ErrorCode.stale_broker_epoch,
            f"Broker {broker_id} has epoch {broker.broker_epoch}, not {heartbeat.broker_epoch}.",
        )
    session = heartbeats._sessions.get(broker_id)
    if session is None or session.broker_epoch != broker.broker_epoch:
        session = _Session(
            broker_epoch=broker.broker_epoch, last_contact_ms=now_ms, caught_up_offset=image.offset
        )
        heartbeats._sessions[broker_id] = session
    session.last_contact_ms = now_ms
    session.metadata_offset = heartbeat.current_metadata_offset
    caught_up = heartbeat.current_metadata_offset >= session.caught_up_offset
    if heartbeat.want_shut_down:
        session.shutting_down = True
    records: list[MetadataRecord] = []
    fenced = broker.fenced
    shut_down = False
    if fenced:
        if heartbeat.want_shut_down:
            shut_down = True
        elif caught_up and not (
            heartbeat.want_fence or session.shutting_down or broker.in_controlled_shutdown
        ):
            records.append(
                UnfenceBrokerRecord(broker_id=broker_id, broker_epoch=broker.broker_epoch)
            )
            records.extend(partition_control.broker_joins(image, config, broker_id))
            fenced = False
    elif broker.in_controlled_shutdown:
        if session.controlled_shutdown_offset is None:  # (decided by an earlier controller)
            session.controlled_shutdown_offset = image.offset
        if partition_control.leads_partitions(image, broker_id):
            records.extend(partition_control.broker_leaves(image, config, broker_id))
            session.controlled_shutdown_offset = image.offset + 1
        else:
            lowest = heartbeats.lowest_active_offset(image)
            if lowest is None or lowest >= session.controlled_shutdown_offset:
                records.extend(_fence(image, config, broker_id))
                fenced = shut_down = True
    elif heartbeat.want_fence:
        records.extend(_fence(image, config, broker_id))
        fenced = True
        shut_down = heartbeat.want_shut_down
    elif heartbeat.want_shut_down:
        if partition_control.leads_partitions(image, broker_id):
            records.append(
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id,
                    broker_epoch=broker.broker_epoch,
                    in_controlled_shutdown=True,
                )
            )
            records.extend(partition_control.broker_leaves(image, config, broker_id))
            # These records land after everything in the image (as the registration's do).
            session.controlled_shutdown_offset = image.offset + 1
        else:
            records.extend(_fence(image, config, broker_id))
            fenced = shut_down = True
    return records, BrokerHeartbeatResult(
        is_caught_up=caught_up, is_fenced=fenced, should_shut_down=shut_down
    )


def register_controller(
    image: MetadataImage, registration: ControllerRegistration
) -> tuple[list[MetadataRecord], None]:
    """A controller's listeners and features (KIP-919), from any node with the controller role:
    voters and controllers that follow the log until they are added (KIP-853) alike, as Kafka
    takes any id. UNSUPPORTED_VERSION before metadata.version 3.7-IV0, or when the controller
    does not support a finalized level (as for a broker). The same registration again writes
    nothing; a new incarnation (a restart) or other listeners replace the one in the image."""
    if not feature_control.supports_controller_registration(image):
        raise KafkaError(
            ErrorCode.unsupported_version,
            "The current MetadataVersion is too old to support controller registrations.",
        )
    if registration.controller_id < 0:
        raise KafkaError(
            ErrorCode.invalid_request,
            f"Controller id {registration.controller_id} is not a node id.",
        )
    reason = feature_control.unsupported_levels(image, registration.features)
    if reason is not None:
        raise KafkaError(ErrorCode.unsupported_version, reason)
    record = RegisterControllerRecord(
        controller_id=registration.controller_id,
        incarnation_id=registration.incarnation_id,
        endpoints=tuple(registration.endpoints),
        features=tuple(
            (name, low, high) for name, (low, high) in sorted(registration.features.items())
        ),
        zk_migration_ready=registration.zk_migration_ready,
    )
    if image_after(image, [record]).controllers == image.controllers:
        return [], None  # registered as it is already: nothing new to commit
    return [record], None


def fence_expired_brokers(
    image: MetadataImage, config: BrokerConfig, heartbeats: BrokerHeartbeats, *, now_ms: int
) -> list[MetadataRecord]:
    """Fence every unfenced broker whose session ran out, one after the other: each broker's
    leaderships move on the image as the previous fencing left it."""
    records: list[MetadataRecord] = []
    for broker_id in sorted(heartbeats.expired(image, now_ms)):
        fencing = _fence(image, config, broker_id)
        records.extend(fencing)
        image = image_after(image, fencing)
    return records


def _fence(image: MetadataImage, config: BrokerConfig, broker_id: int) -> list[MetadataRecord]:
    """Kafka's handleBrokerFenced: leave every ISR and leadership, then the FenceBrokerRecord."""
    records: list[MetadataRecord] = list(partition_control.broker_leaves(image, config, broker_id))
    records.append(
        FenceBrokerRecord(broker_id=broker_id, broker_epoch=image.brokers[broker_id].broker_epoch)
    )
    return records


def image_after(image: MetadataImage, records: list[MetadataRecord]) -> MetadataImage:
    """The image `records` would make of `image` once committed (to decide on what follows
    them in the same operation)."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply()
