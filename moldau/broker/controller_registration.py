"""A controller registers itself with the active controller (Kafka's
ControllerRegistrationManager, KIP-919).

    waiting    --image caught up, metadata.version >= 3.7-IV0-->   sending
    sending    --refused or unanswered: back off 0.1 s doubling to 10 s-->   sending
    sending    --acknowledged-->   acknowledged (no resend until the image shows it, the
                                   active controller changes or RESEND_AFTER_S passes)
    any        --the image holds this incarnation's listeners and features-->   registered
    registered --the image loses it, or another incarnation replaces it-->   sending

Every node with the controller role runs one, voter or not. "Caught up" is the image having
replayed everything this node's quorum member knows to be committed, as Kafka's metadata loader
publishes only then. Registering again after a restart is what makes the new incarnation id
and listeners reach the image. Off the hot paths: the publisher callback only sets an event,
and a registered controller's task sleeps until its registration or the leader changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from moldau.controller.feature_control import supports_controller_registration
from moldau.controller.operations import ControllerRegistration
from moldau.controller.quorum_controller import QuorumController
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import KafkaError

log = logging.getLogger(__name__)

FIRST_BACKOFF_S = 0.1
MAX_BACKOFF_S = 10.0
# An acknowledged registration not in this node's image by then is sent again (it is harmless:
# the active controller writes nothing for a registration it has).
RESEND_AFTER_S = 5.0


class ControllerRegistrationManager:
    def __init__(
        self,
        controller: QuorumController,
        registration: Callable[[], ControllerRegistration],
        send: Callable[[ControllerRegistration], Awaitable[None]],
    ) -> None:
        """`registration` builds what to send (the listeners as bound now), `send` delivers it
        to the active controller and raises KafkaError with a refusal."""
        self._controller = controller
        self._registration = registration
        self._send = send
        self._changed = asyncio.Event()
        self._registered = False
        self._task: asyncio.Task[None] | None = None

    @property
    def registered(self) -> bool:
        """This incarnation's registration is in this node's image."""
        return self._registered

    def start(self) -> None:
        self._controller.add_publisher(self._on_metadata)
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self._controller.remove_publisher(self._on_metadata)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def _on_metadata(self, delta: MetadataDelta, image: MetadataImage) -> None:
        if (
            not self._registered
            or delta.controller_id is not None
            or self._controller.node_id in delta.changed_controllers()
        ):
            self._changed.set()

    def _is_registered(self, image: MetadataImage, wanted: ControllerRegistration) -> bool:
        current = image.controllers.get(wanted.controller_id)
        return (
            current is not None
            and current.incarnation_id == wanted.incarnation_id
            and current.endpoints == tuple(wanted.endpoints)
            and dict(current.features) == dict(wanted.features)
        )

    def _may_register(self, image: MetadataImage) -> bool:
        return (
            self._controller.leader_id is not None
            and self._controller.caught_up
            and supports_controller_registration(image)
        )

    async def _wait_for_change(self, timeout_s: float | None = None) -> None:
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        failures = 0
        # The active controller that took this registration, and when: wait for the image.
        acknowledged: tuple[int | None, float] | None = None
        while True:
            image = self._controller.image
            wanted = self._registration()
            registered = self._is_registered(image, wanted)
            if registered != self._registered:
                self._registered = registered
                log.info(
                    "controller %d is %s (incarnation %s)",
                    wanted.controller_id,
                    "registered" if registered else "not registered",
                    wanted.incarnation_id,
                )
            if registered or not self._may_register(image):
                acknowledged = None
                await self._wait_for_change()
                continue
            if acknowledged is not None:
                leader, at = acknowledged
                remaining = at + RESEND_AFTER_S - loop.time()
                if leader == self._controller.leader_id and remaining > 0:
                    await self._wait_for_change(remaining)
                    continue
                acknowledged = None
            leader = self._controller.leader_id
            try:
                await self._send(wanted)
            except Exception as error:  # refused, or no active controller answered in time
                delay = min(FIRST_BACKOFF_S * 2**failures, MAX_BACKOFF_S)
                failures += 1
                if isinstance(error, KafkaError):
                    log.info("controller registration failed (%s); again in %.1f s", error, delay)
                else:
                    log.exception("controller registration failed; again in %.1f s", delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            acknowledged = (leader, loop.time())
