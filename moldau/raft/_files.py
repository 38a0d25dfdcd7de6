"""Durable small-file writes shared by the quorum-state file, meta.properties and the log."""

from __future__ import annotations

import os


def fsync_directory(directory: str) -> None:
    """Make a file's creation, rename or removal in `directory` durable."""
    directory_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


def write_file_atomically(path: str, text: str) -> None:
    """Replace `path` with `text`: readers see the old or the new content, never a mix."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_directory(directory)
