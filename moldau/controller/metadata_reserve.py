"""Space set aside for the metadata log: a 1 MiB file of zeros beside it (a "ballast" file).

A Raft voter must persist its new epoch before it acts (the quorum-state file, written anew)
every time the node starts. On a disk that partition data filled up that write would not fit,
and the node could not even start to serve reads. So the node keeps this file while the disk
has room, and a start on a full disk gives back `RELEASE_BYTES` of it (enough for the quorum's
files; a 1 MiB reserve lasts 16 such starts). It is written whole again once there is room for
it and a margin more (`restore`, at start and with every log dir re-check).
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

RESERVE_FILE = "metadata-space-reserve"
RESERVE_BYTES = 1024 * 1024
RELEASE_BYTES = 64 * 1024


def free_bytes(directory: str) -> int | None:
    try:
        stat = os.statvfs(directory)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def release_if_full(directory: str, *, needed: int) -> bool:
    """Give back RELEASE_BYTES of the reserve if `directory` has less than `needed` bytes free;
    True if it did."""
    path = os.path.join(directory, RESERVE_FILE)
    free = free_bytes(directory)
    size = _size(path)
    if free is None or free >= needed or size == 0:
        return False
    os.truncate(path, max(size - RELEASE_BYTES, 0))
    logger.warning(
        "only %d bytes free for the metadata log in %s: released %d bytes of its reserve (%d left)",
        free,
        directory,
        min(size, RELEASE_BYTES),
        max(size - RELEASE_BYTES, 0),
    )
    return True


def restore(directory: str, *, margin: int) -> bool:
    """Write the reserve whole if part of it is missing and the disk has room for the missing
    part and `margin` more."""
    path = os.path.join(directory, RESERVE_FILE)
    missing = RESERVE_BYTES - _size(path)
    if missing <= 0:
        return False
    free = free_bytes(directory)
    if free is None or free < missing + margin:
        return False
    temporary = path + ".tmp"
    try:
        with open(temporary, "wb") as handle:
            handle.write(bytes(RESERVE_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        logger.warning("could not write the metadata log's reserve in %s: %s", directory, error)
        try:
            os.remove(temporary)
        except OSError:
            pass
        return False
    return True
