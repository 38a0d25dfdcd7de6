"""A broker's life in its cluster (Kafka's BrokerLifecycleManager, KIP-631).

    starting --registered--> recovering (fenced) --heartbeat: caught up, unfenced--> running
    running --stop: heartbeat want_shut_down--> pending controlled shutdown --should_shut_down--> stopped

The broker registers with the active controller (a new incarnation, fenced), then heartbeats
every `broker.heartbeat.interval.ms` with the offset of the metadata it has replayed; the
controller unfences it once it has caught up. A heartbeat refused for a stale epoch or an
unknown registration (the controller lost it, or fenced this broker for good) registers again.
On stop it asks to shut down and waits, bounded, until the controller has moved what it must.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence

from moldau.broker.controller_channel import ControllerChannel
from moldau.controller.feature_control import SUPPORTED_FEATURES as FEATURE_RANGES
from moldau.controller.operations import BrokerHeartbeat, BrokerRegistration
from moldau.metadata.records import BrokerEndpoint
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

# What this broker supports, sent with its registration (Kafka's supported features).
SUPPORTED_FEATURES = [
    {"name": name, "min_supported_version": low, "max_supported_version": high}
    for name, (low, high) in FEATURE_RANGES.items()
]
_REREGISTER = {int(ErrorCode.stale_broker_epoch), int(ErrorCode.broker_id_not_registered)}
RETRY_BACKOFF_S = 0.2


class BrokerLifecycle:
    def __init__(
        self,
        channel: ControllerChannel,
        *,
        broker_id: int,
        cluster_id: str,
        incarnation_id: uuid.UUID,
        endpoints: Callable[[], Sequence[BrokerEndpoint]],
        rack: str | None,
        is_controller: bool,
        metadata_offset: Callable[[], int],
        heartbeat_interval_s: float,
    ) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._cluster_id = cluster_id
        self._incarnation_id = incarnation_id
        self._endpoints = endpoints
        self._rack = rack
        self._is_controller = is_controller
        self._metadata_offset = metadata_offset
        self._interval_s = heartbeat_interval_s
        self.broker_epoch = -1
        self.fenced = True
        self._unfenced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Register and heartbeat until the controller unfences this broker."""
        await self._register()
        self._task = asyncio.get_running_loop().create_task(self._heartbeats())
        await self._unfenced.wait()

    async def _register(self) -> None:
        registration = BrokerRegistration(
            broker_id=self._broker_id,
            incarnation_id=self._incarnation_id,
            endpoints=list(self._endpoints()),
            rack=self._rack,
            is_controller=self._is_controller,
            cluster_id=self._cluster_id,
        )
        while True:
            try:
                result = await self._channel.register_broker(
                    registration, features=SUPPORTED_FEATURES
                )
            except KafkaError as error:
                # An earlier incarnation's session may still be open (a restart right after a
                # crash): it runs out within broker.session.timeout.ms.
                log.info("broker registration refused (%s); retrying", error)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            self.broker_epoch = result.broker_epoch
            log.info("registered as broker %d with epoch %d", self._broker_id, self.broker_epoch)
            return

    async def _heartbeats(self) -> None:
        while True:
            try:
                await self._heartbeat(want_shut_down=False)
            except KafkaError as error:
                if int(error.code) in _REREGISTER:
                    await self._register()
                    continue
                log.info("broker heartbeat failed: %s", error)
            except Exception:
                log.exception("broker heartbeat failed")
            await asyncio.sleep(self._interval_s if not self.fenced else RETRY_BACKOFF_S)

    async def _heartbeat(self, *, want_shut_down: bool) -> bool:
        result = await self._channel.broker_heartbeat(
            BrokerHeartbeat(
                broker_id=self._broker_id,
                broker_epoch=self.broker_epoch,
                current_metadata_offset=self._metadata_offset(),
                want_shut_down=want_shut_down,
            )
        )
        if self.fenced and not result.is_fenced:
            log.info("broker %d is unfenced", self._broker_id)
        self.fenced = result.is_fenced
        if not result.is_fenced:
            self._unfenced.set()
        return result.should_shut_down

    async def stop(self, *, timeout_s: float = 5.0) -> None:
        """Controlled shutdown: ask to shut down until the controller agrees (bounded)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
        if self.broker_epoch < 0:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline:
            try:
                async with asyncio.timeout(max(deadline - loop.time(), 0.01)):
                    if await self._heartbeat(want_shut_down=True):
                        return
            except TimeoutError:
                log.info("controlled shutdown: no controller agreed within %.0f s", timeout_s)
                return
            except KafkaError as error:
                log.info("controlled shutdown heartbeat failed: %s", error)
                return
            await asyncio.sleep(RETRY_BACKOFF_S)
