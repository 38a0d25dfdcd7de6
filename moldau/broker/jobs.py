"""Background jobs of a broker: retention, time-based flushes, the checkpoint files (high
watermarks every `replica.high.watermark.checkpoint.interval.ms`, recovery points and log start
offsets every `log.flush.offset.checkpoint.interval.ms` and
`log.flush.start.offset.checkpoint.interval.ms`, as Kafka's; a file whose content did not change
is not rewritten), the log cleaner, the re-check of full log dirs and the expiration of idle
producer ids (`producer.id.expiration.ms`, checked
every `producer.id.expiration.check.interval.ms`, as Kafka's LogManager does).

Each job runs its blocking storage work in a worker thread (never on the event loop) and is
owned by the node, which cancels and awaits it on shutdown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

log = logging.getLogger(__name__)


def start(node: BrokerServices) -> list[asyncio.Task[None]]:
    log_manager = node.log_manager
    assert log_manager is not None
    retention_interval_s = int(node.config.get("log.retention.check.interval.ms")) / 1000.0
    flush_interval_ms = node.config.get("log.flush.scheduler.interval.ms")
    tasks = [
        asyncio.create_task(
            _every(retention_interval_s, log_manager.run_retention, "retention"),
            name="retention",
        ),
    ]
    if flush_interval_ms is not None and int(flush_interval_ms) < 2**62:
        tasks.append(
            asyncio.create_task(
                _every(
                    int(flush_interval_ms) / 1000.0,
                    lambda: log_manager.flush_dirty(node.clock.now_ms()),
                    "flush",
                ),
                name="flush",
            )
        )
    for key, checkpoint, name in (
        ("replica.high.watermark.checkpoint.interval.ms", log_manager.checkpoint_high_watermarks,
         "high-watermark-checkpoint"),
        ("log.flush.offset.checkpoint.interval.ms", log_manager.checkpoint_recovery_points,
         "recovery-point-checkpoint"),
        ("log.flush.start.offset.checkpoint.interval.ms", log_manager.checkpoint_log_start_offsets,
         "log-start-offset-checkpoint"),
    ):  # fmt: skip
        interval_s = int(node.config.get(key)) / 1000.0
        tasks.append(asyncio.create_task(_every(interval_s, checkpoint, name), name=name))
    recheck_interval_s = int(node.config.get("log.dir.recheck.interval.ms")) / 1000.0

    def recheck() -> None:
        log_manager.recheck_log_dirs()
        if node.controller is not None:
            node.controller.restore_metadata_reserve()

    tasks.append(
        asyncio.create_task(
            _every(recheck_interval_s, recheck, "log dir re-check"), name="log-dir-recheck"
        )
    )
    expiration_check_s = int(node.config.get("producer.id.expiration.check.interval.ms")) / 1000.0

    def expire_producers() -> None:
        # (read each time: producer.id.expiration.ms is a dynamic broker config)
        log_manager.producer_id_expiration_ms = int(node.config.get("producer.id.expiration.ms"))
        log_manager.remove_expired_producers()

    tasks.append(
        asyncio.create_task(
            _every(expiration_check_s, expire_producers, "producer id expiration"),
            name="producer-id-expiration",
        )
    )
    if node.config.get("log.cleaner.enable"):
        log_manager.cleaner.backoff_seconds = int(node.config.get("log.cleaner.backoff.ms")) / 1000
        log_manager.start_cleaner()
        node.on_stop(log_manager.stop_cleaner)
    return tasks


async def _every(interval_s: float, work: Callable[[], object], name: str) -> None:
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(max(interval_s, 0.01))
        try:
            result = await loop.run_in_executor(None, work)
            if isinstance(result, Awaitable):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background job %s failed", name)
