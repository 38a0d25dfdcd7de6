"""The registry's in-memory index, rebuilt by replaying `_schemas` (`replay(key, value)`), and
its queries. Only replay changes it: the writer's operations (operations.py) return records, and
a record takes effect when the reader applies it, on every node alike.

Invariants: an id names one schema forever (the same type, text and references); a subject's
versions only grow (a hard-deleted version's number may be reused, as in Confluent's registry);
`max_id` is the largest id ever replayed, so the next id is `max_id + 1`.
"""

from __future__ import annotations

from typing import Any

from moldau.registry import records as wire
from moldau.registry.errors import RegistryError
from moldau.registry.model import (
    DEFAULT_COMPATIBILITY,
    Compatibility,
    Mode,
    SchemaReference,
    SchemaType,
    StoredSchema,
    SubjectVersion,
)

__all__ = ["MAX_VERSION", "RegistryState", "parse_version"]

MAX_VERSION = 2**31 - 1
Identity = tuple[SchemaType, str, tuple[SchemaReference, ...]]


def parse_version(text: str | int) -> int | None:
    """A version path segment: a number in [1, 2^31-1], or None for "latest" (and -1)."""
    if isinstance(text, int):
        value = text
    elif text == "latest":
        return None
    else:
        try:
            value = int(text)
        except ValueError:
            raise RegistryError.invalid_version(text) from None
    if value == -1:
        return None
    if not 1 <= value <= MAX_VERSION:
        raise RegistryError.invalid_version(text)
    return value


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SubjectVersion]] = {}
        self.schemas: dict[int, StoredSchema] = {}
        self.configs: dict[str | None, Compatibility] = {}
        self.modes: dict[str | None, Mode] = {}
        self.max_id = 0
        self._ids: dict[Identity, int] = {}
        self._users: dict[int, set[str]] = {}  # schema id -> subjects with a version of it

    # --- replay --------------------------------------------------------------------------

    def replay(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one `_schemas` record; records this registry cannot read are skipped."""
        document = wire.decode_key(key)
        if document is None:
            return
        keytype = document.get("keytype")
        body = wire.decode_value(value)
        subject = document.get("subject")
        if keytype == "SCHEMA" and isinstance(subject, str):
            self._replay_schema(subject, document.get("version"), body)
        elif keytype == "CONFIG":
            self._replay_setting(self.configs, subject, body, "compatibilityLevel", Compatibility)
        elif keytype == "MODE":
            self._replay_setting(self.modes, subject, body, "mode", Mode)
        elif keytype == "DELETE_SUBJECT" and isinstance(subject, str) and body is not None:
            last = body.get("version")
            for version, entry in self.subjects.get(subject, {}).items():
                if isinstance(last, int) and version <= last and not entry.deleted:
                    self._put(
                        SubjectVersion(
                            subject=subject, version=version, schema=entry.schema, deleted=True
                        )
                    )

    def _replay_schema(self, subject: str, version: object, body: dict[str, object] | None) -> None:
        if body is None:
            if isinstance(version, int):
                versions = self.subjects.get(subject, {})
                removed = versions.pop(version, None)
                if not versions:
                    self.subjects.pop(subject, None)
                if removed is not None:
                    schema_id = removed.schema.schema_id
                    if all(entry.schema.schema_id != schema_id for entry in versions.values()):
                        self._users.get(schema_id, set()).discard(subject)
            return
        try:
            entry = wire.subject_version_of(body)
        except (KeyError, ValueError, TypeError):
            return
        known = self.schemas.get(entry.schema.schema_id)
        if known is not None:  # the id's first schema stays its schema
            entry = SubjectVersion(
                subject=entry.subject, version=entry.version, schema=known, deleted=entry.deleted
            )
        self._put(entry)

    def _put(self, entry: SubjectVersion) -> None:
        schema = entry.schema
        self.subjects.setdefault(entry.subject, {})[entry.version] = entry
        self._users.setdefault(schema.schema_id, set()).add(entry.subject)
        self.schemas.setdefault(schema.schema_id, schema)
        self._ids.setdefault(_identity(schema), schema.schema_id)
        self.max_id = max(self.max_id, schema.schema_id)

    @staticmethod
    def _replay_setting(
        table: dict[str | None, Any],
        subject: object,
        body: dict[str, object] | None,
        field: str,
        kind: type[Compatibility] | type[Mode],
    ) -> None:
        scope = subject if isinstance(subject, str) else None
        if body is None:
            table.pop(scope, None)
            return
        try:
            table[scope] = kind(str(body.get(field)).upper())
        except ValueError:
            return

    # --- queries -------------------------------------------------------------------------

    def id_of(
        self, schema_type: SchemaType, text: str, references: tuple[SchemaReference, ...]
    ) -> int | None:
        return self._ids.get((schema_type, text, references))

    def subject_names(self, *, deleted: bool = False) -> list[str]:
        return sorted(
            subject
            for subject, versions in self.subjects.items()
            if deleted or any(not entry.deleted for entry in versions.values())
        )

    def versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        """The subject's versions, oldest first (40401 when it has none to show)."""
        entries = [
            entry
            for _, entry in sorted(self.subjects.get(subject, {}).items())
            if deleted or not entry.deleted
        ]
        if not entries:
            raise RegistryError.subject_not_found(subject)
        return entries

    def version(
        self, subject: str, version: int | None, *, deleted: bool = False
    ) -> SubjectVersion:
        """One version (None: the latest); 40401 unknown subject, 40402 unknown version."""
        entries = self.versions(subject, deleted=deleted)
        if version is None:
            return entries[-1]
        for entry in entries:
            if entry.version == version:
                return entry
        raise RegistryError.version_not_found(subject, version)

    def schema(self, schema_id: int) -> StoredSchema:
        schema = self.schemas.get(schema_id)
        if schema is None:
            raise RegistryError.schema_not_found(f"Schema {schema_id} not found")
        return schema

    def uses_of(self, schema_id: int, *, deleted: bool = False) -> list[SubjectVersion]:
        return [
            entry
            for subject in sorted(self._users.get(schema_id, ()))
            for _, entry in sorted(self.subjects[subject].items())
            if entry.schema.schema_id == schema_id and (deleted or not entry.deleted)
        ]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas whose references name this subject version."""
        return sorted(
            {
                entry.schema.schema_id
                for versions in self.subjects.values()
                for entry in versions.values()
                if not entry.deleted
                and any(
                    r.subject == subject and r.version == version for r in entry.schema.references
                )
            }
        )

    def compatibility(self, subject: str | None) -> Compatibility:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, DEFAULT_COMPATIBILITY)

    def mode(self, subject: str | None) -> Mode:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, Mode.READWRITE)

    def resolve(self, reference: SchemaReference) -> StoredSchema:
        """A reference's schema (42201 when the subject version does not exist)."""
        entry = self.subjects.get(reference.subject, {}).get(reference.version)
        if entry is None:
            raise RegistryError.invalid_schema(
                f"reference {reference.name!r} names subject {reference.subject!r} version "
                f"{reference.version}, which does not exist"
            )
        return entry.schema


def _identity(schema: StoredSchema) -> Identity:
    return (schema.schema_type, schema.text, schema.references)
