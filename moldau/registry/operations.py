"""What the registry's API asks of its state: commands that return the `_schemas` records to
write and the answer to give once they are applied (`Change`), and read-only checks.

Commands run on the writer only, one at a time, against a state that has applied every record
written before (store.py guarantees both), so "the next id" and "the next version" are decided
once. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from moldau.registry import records as wire
from moldau.registry.errors import RegistryError
from moldau.registry.model import (
    Compatibility,
    Mode,
    SchemaReference,
    SchemaType,
    StoredSchema,
    SubjectVersion,
)
from moldau.registry.schema_types import parse
from moldau.registry.schemas import ParsedSchema, compatibility_errors
from moldau.registry.state import RegistryState

__all__ = ["Change", "Operations", "SchemaRequest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaRequest:
    """A schema as a client sends it (POST .../versions, lookup, compatibility)."""

    schema_type: SchemaType
    text: str
    references: tuple[SchemaReference, ...] = ()
    normalize: bool = False
    schema_id: int | None = None  # IMPORT mode only
    version: int | None = None  # IMPORT mode only


@dataclass(frozen=True, slots=True)
class Change:
    records: list[wire.Record]
    result: Any = None


@dataclass(slots=True)
class Operations:
    state: RegistryState
    _parsed: dict[int, ParsedSchema] = field(default_factory=dict)

    # --- parsing -------------------------------------------------------------------------

    def parse(self, request: SchemaRequest) -> ParsedSchema:
        return parse(request.schema_type, request.text, request.references, self.state.resolve)

    def parsed(self, schema: StoredSchema) -> ParsedSchema:
        """A registered schema, parsed once (an id's schema never changes)."""
        cached = self._parsed.get(schema.schema_id)
        if cached is None:
            cached = parse(schema.schema_type, schema.text, schema.references, self.state.resolve)
            self._parsed[schema.schema_id] = cached
        return cached

    def _same(
        self, parsed: ParsedSchema, text: str, entry: SubjectVersion, normalize: bool
    ) -> bool:
        if entry.schema.schema_type is not parsed.schema_type:
            return False
        if entry.schema.text == text:
            return True
        return normalize and self.parsed(entry.schema).normalized() == parsed.normalized()

    def _writable(self, subject: str | None) -> None:
        mode = self.state.mode(subject)
        if mode in (Mode.READONLY, Mode.READONLY_OVERRIDE):
            where = f"Subject {subject}" if subject else "The registry"
            raise RegistryError.operation_not_permitted(f"{where} is in read-only mode")

    # --- schemas -------------------------------------------------------------------------

    def register(self, subject: str, request: SchemaRequest) -> Change:
        """{"id": N}: the subject's version with this schema, or a new version after the
        compatibility check (409), reusing the id another subject gave the same schema."""
        self._writable(subject)
        importing = self.state.mode(subject) is Mode.IMPORT
        if (request.schema_id is not None or request.version is not None) and not importing:
            raise RegistryError.operation_not_permitted(
                f"Subject {subject} is not in import mode: ids and versions cannot be given"
            )
        parsed = self.parse(request)
        text = parsed.normalized() if request.normalize else parsed.canonical()
        existing = self.state.subjects.get(subject, {})
        for entry in existing.values():
            if (
                not entry.deleted
                and self._same(parsed, text, entry, request.normalize)
                and request.schema_id in (None, entry.schema.schema_id)
            ):
                return Change([], {"id": entry.schema.schema_id})
        if not importing:
            earlier = [
                self.parsed(entry.schema)
                for _, entry in sorted(existing.items())
                if not entry.deleted
            ]
            errors = compatibility_errors(self.state.compatibility(subject), parsed, earlier)
            if errors:
                raise RegistryError.incompatible(errors)
        schema_id = self._id_for(request, text)
        version = request.version or max(existing, default=0) + 1
        if version in existing and not existing[version].deleted:
            raise RegistryError.operation_not_permitted(
                f"Version {version} of subject {subject} already exists"
            )
        schema = StoredSchema(
            schema_id=schema_id,
            schema_type=request.schema_type,
            text=text,
            references=request.references,
        )
        entry = SubjectVersion(subject=subject, version=version, schema=schema)
        return Change([wire.schema_record(entry)], {"id": schema_id})

    def _id_for(self, request: SchemaRequest, text: str) -> int:
        known = self.state.id_of(request.schema_type, text, request.references)
        if request.schema_id is None:
            return known if known is not None else self.state.max_id + 1
        taken = self.state.schemas.get(request.schema_id)
        if taken is not None and (taken.schema_type, taken.text, taken.references) != (
            request.schema_type,
            text,
            request.references,
        ):
            raise RegistryError.operation_not_permitted(
                f"Overwrite new schema with id {request.schema_id} is not permitted."
            )
        return request.schema_id

    def lookup(self, subject: str, request: SchemaRequest, *, deleted: bool) -> dict[str, Any]:
        """The subject's version holding this schema (40401, 40403)."""
        entries = self.state.versions(subject, deleted=deleted)
        parsed = self.parse(request)
        text = parsed.normalized() if request.normalize else parsed.canonical()
        for entry in reversed(entries):
            if self._same(parsed, text, entry, request.normalize):
                return entry.to_json()
        raise RegistryError.schema_not_found()

    def check(
        self,
        subject: str,
        version: int | None,
        request: SchemaRequest,
        *,
        every_version: bool,
        verbose: bool,
    ) -> dict[str, Any]:
        """POST /compatibility/...: whether the schema may follow the given version (or, with
        `every_version`, the versions its level compares it with)."""
        parsed = self.parse(request)
        level = self.state.compatibility(subject)
        if every_version:
            try:
                entries = self.state.versions(subject)
            except RegistryError:
                entries = []
        else:
            entries = [self.state.version(subject, version)]
            if level.transitive:
                level = Compatibility(level.value.removesuffix("_TRANSITIVE"))
        earlier = [self.parsed(entry.schema) for entry in entries]
        errors = compatibility_errors(level, parsed, earlier)
        answer: dict[str, Any] = {"is_compatible": not errors}
        if verbose:
            answer["messages"] = errors
        return answer

    # --- deletes -------------------------------------------------------------------------

    def _unreferenced(self, subject: str, versions: Sequence[int]) -> None:
        for version in versions:
            users = self.state.referenced_by(subject, version)
            if users:
                raise RegistryError.reference_exists(
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={version}}}: ids {users}"
                )

    def delete_version(self, subject: str, version: int | None, *, permanent: bool) -> Change:
        self._writable(subject)
        entry = self.state.version(subject, version, deleted=True)
        if version is None and permanent:
            entry = self.state.version(subject, None, deleted=True)
        elif version is None:
            entry = self.state.version(subject, None)
        if permanent:
            if not entry.deleted:
                raise RegistryError.version_not_soft_deleted(subject, entry.version)
            self._unreferenced(subject, [entry.version])
            return Change([wire.schema_tombstone(subject, entry.version)], entry.version)
        if entry.deleted:
            raise RegistryError.version_soft_deleted(subject, entry.version)
        self._unreferenced(subject, [entry.version])
        soft = SubjectVersion(
            subject=subject, version=entry.version, schema=entry.schema, deleted=True
        )
        return Change([wire.schema_record(soft)], entry.version)

    def delete_subject(self, subject: str, *, permanent: bool) -> Change:
        self._writable(subject)
        every = self.state.versions(subject, deleted=True)
        live = [entry.version for entry in every if not entry.deleted]
        if permanent:
            if live:
                raise RegistryError.subject_not_soft_deleted(subject)
            versions = [entry.version for entry in every]
            self._unreferenced(subject, versions)
            tombstones = [wire.schema_tombstone(subject, version) for version in versions]
            return Change(tombstones, versions)
        if not live:
            raise RegistryError.subject_soft_deleted(subject)
        self._unreferenced(subject, live)
        records = [
            wire.schema_record(
                SubjectVersion(
                    subject=subject, version=entry.version, schema=entry.schema, deleted=True
                )
            )
            for entry in every
            if not entry.deleted
        ]
        records.append(wire.delete_subject_record(subject, every[-1].version))
        return Change(records, live)

    # --- settings ------------------------------------------------------------------------

    def set_compatibility(self, subject: str | None, level: object) -> Change:
        try:
            parsed = Compatibility(str(level).upper())
        except ValueError:
            raise RegistryError.invalid_compatibility_level(level) from None
        if level is None:
            raise RegistryError.invalid_compatibility_level(level)
        return Change([wire.config_record(subject, parsed.value)], {"compatibility": parsed.value})

    def delete_compatibility(self, subject: str | None) -> Change:
        previous = self.state.configs.get(subject)
        if previous is None and subject is not None:
            raise RegistryError.subject_config_not_found(subject)
        level = (previous or self.state.compatibility(None)).value
        return Change([wire.config_record(subject, None)], {"compatibilityLevel": level})

    def set_mode(self, subject: str | None, mode: object, *, force: bool) -> Change:
        try:
            parsed = Mode(str(mode).upper())
        except ValueError:
            raise RegistryError.invalid_mode(mode) from None
        if parsed is Mode.IMPORT and not force:
            names = [subject] if subject else self.state.subject_names()
            if any(self.state.subjects.get(name) for name in names):
                raise RegistryError.operation_not_permitted(
                    "Cannot import since found existing subjects"
                )
        return Change([wire.mode_record(subject, parsed.value)], {"mode": parsed.value})

    def delete_mode(self, subject: str) -> Change:
        previous = self.state.modes.get(subject)
        if previous is None:
            raise RegistryError.subject_mode_not_found(subject)
        return Change([wire.mode_record(subject, None)], {"mode": previous.value})
