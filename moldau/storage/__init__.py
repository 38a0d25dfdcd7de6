"""The commit log: Kafka-format partition storage (see README.md in this directory)."""

from moldau.storage.config import LogConfig
from moldau.storage.filesystem import FileSystem, OsFileSystem
from moldau.storage.log_manager import LogManager
from moldau.storage.log_retention import delete_records
from moldau.storage.log_validator import DecodeBudget
from moldau.storage.memory_filesystem import MemoryFileSystem
from moldau.storage.partition_log import PartitionLog
from moldau.storage.results import AppendOrigin, AppendResult, ReadResult, TimestampOffset
from moldau.storage.segment import FileRegion

__all__ = [
    "AppendOrigin",
    "AppendResult",
    "DecodeBudget",
    "FileRegion",
    "FileSystem",
    "LogConfig",
    "LogManager",
    "MemoryFileSystem",
    "OsFileSystem",
    "PartitionLog",
    "ReadResult",
    "TimestampOffset",
    "delete_records",
]
