"""Bootstrap metadata: records a new cluster starts with beyond its feature levels, written by
`moldau storage format --add-scram` (as kafka-storage writes `bootstrap.checkpoint`).

The file is `<metadata log directory>/bootstrap.checkpoint` (next to `__cluster_metadata-0`)
and holds records in the snapshot layout (`moldau.metadata.snapshot.encode_records`). The
active controller of a cluster that has no metadata.version yet writes them into the log with
the feature levels; a cluster that has one ignores the file.
"""

from __future__ import annotations

import os

from moldau.metadata.records import MetadataRecord
from moldau.metadata.serde import RecordFormatError
from moldau.metadata.snapshot import decode_snapshot_records, encode_records

BOOTSTRAP_FILE_NAME = "bootstrap.checkpoint"


class BootstrapMetadataError(ValueError):
    """A bootstrap file that cannot be read; the message says which and why."""


def write_bootstrap_metadata(metadata_directory: str, records: list[MetadataRecord]) -> str:
    path = os.path.join(metadata_directory, BOOTSTRAP_FILE_NAME)
    temporary = path + ".tmp"
    with open(temporary, "wb") as handle:
        handle.write(encode_records(records))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path


def read_bootstrap_metadata(metadata_directory: str) -> list[MetadataRecord]:
    """The records of the directory's bootstrap file ([] when there is none)."""
    path = os.path.join(metadata_directory, BOOTSTRAP_FILE_NAME)
    try:
        with open(path, "rb") as handle:
            contents = handle.read()
    except FileNotFoundError:
        return []
    try:
        return decode_snapshot_records(contents)
    except RecordFormatError as error:
        raise BootstrapMetadataError(f"{path}: {error}") from None
