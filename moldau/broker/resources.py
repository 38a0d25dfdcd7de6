"""What a node may take of its process and its cluster: open files and partitions, checked at
start so that a configuration that cannot work stops the node with one line saying what to change.

Open files. A node that owns its process raises its soft RLIMIT_NOFILE to the hard limit (as
most servers do). Segment files are then held open by a cache of `log.open.files.max` files
(`storage.caching_filesystem`; -1, the default, takes half of the limit), so the number of
partitions no longer depends on the limit; the other descriptors are left to connections (two
each while a zero-copy fetch is sent), the metadata log and short-lived files.

Partitions. The internal topics must fit under `max.broker.partitions` and `max.partitions`,
or the node could not create them on its first start.
"""

from __future__ import annotations

import logging
import resource

from moldau.config.values import BrokerConfig

log = logging.getLogger(__name__)

# Descriptors kept out of the segment-file cache: connections, the metadata log, checkpoint and
# snapshot writes, directory fsyncs, listeners, the event loop's own.
RESERVED_DESCRIPTORS = 256
MIN_OPEN_SEGMENT_FILES = 16
_NR_OPEN = "/proc/sys/fs/nr_open"


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one; returns (soft, hard) as they are now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if target == resource.RLIM_INFINITY:  # Linux refuses more than fs.nr_open
        try:
            with open(_NR_OPEN) as nr_open:
                target = int(nr_open.read())
        except (OSError, ValueError):
            target = soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError) as error:
            log.warning("could not raise RLIMIT_NOFILE from %d to %d: %s", soft, target, error)
    return soft, hard


def open_segment_files(config: BrokerConfig, soft_limit: int, hard_limit: int) -> int:
    """How many segment files the node may keep open: `log.open.files.max`, or half of the
    descriptor limit for -1. Raises ValueError (one line: what to change) if it cannot fit."""
    configured = int(config.get("log.open.files.max"))
    limit_text = f"RLIMIT_NOFILE is {soft_limit} (hard limit {hard_limit})"
    if configured == -1:
        budget = (soft_limit - RESERVED_DESCRIPTORS) // 2
        if budget < MIN_OPEN_SEGMENT_FILES:
            raise ValueError(
                f"{limit_text}: a node needs at least "
                f"{RESERVED_DESCRIPTORS + 2 * MIN_OPEN_SEGMENT_FILES} descriptors; raise it "
                "(ulimit -n, LimitNOFILE= in a systemd unit)"
            )
        return budget
    if configured < MIN_OPEN_SEGMENT_FILES:
        raise ValueError(
            f"log.open.files.max={configured}: use -1 (half of RLIMIT_NOFILE) or at least "
            f"{MIN_OPEN_SEGMENT_FILES}"
        )
    if configured + RESERVED_DESCRIPTORS > soft_limit:
        raise ValueError(
            f"log.open.files.max={configured} does not fit: {limit_text} and "
            f"{RESERVED_DESCRIPTORS} are kept for connections and the metadata log; lower "
            f"log.open.files.max to at most {max(soft_limit - RESERVED_DESCRIPTORS, 0)} or "
            "raise the limit (ulimit -n)"
        )
    return configured


def check_partition_limits(config: BrokerConfig) -> None:
    """The internal topics must fit under the partition caps (ValueError: one line)."""
    internal = int(config.get("offsets.topic.num.partitions")) + int(
        config.get("transaction.state.log.num.partitions")
    )
    for name in ("max.broker.partitions", "max.partitions"):
        cap = int(config.get(name))
        if cap < internal:
            raise ValueError(
                f"{name}={cap} leaves no room for the internal topics "
                f"(offsets.topic.num.partitions + transaction.state.log.num.partitions = "
                f"{internal}); raise it to at least {internal}"
            )
