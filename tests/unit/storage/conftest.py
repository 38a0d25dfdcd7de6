"""Fixtures of the storage tests: an in-memory file system and a manual clock."""

from __future__ import annotations

import pytest

from moldau.clock import ManualClock
from moldau.storage.memory_filesystem import MemoryFileSystem


@pytest.fixture
def filesystem() -> MemoryFileSystem:
    return MemoryFileSystem()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)
