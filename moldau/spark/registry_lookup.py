"""The schema registry from a Spark task or the driver: blocking calls over `RegistryClient`.

A `SchemaLookup` lives as long as one task (or one planning step on the driver) and asks for
each schema id once: `RegistryClient` keeps what it fetched and parsed, and ids the registry
does not know are remembered too, so a topic full of records with an unknown id costs one HTTP
request, not one per record. Ids never change meaning in a registry, so nothing expires.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from moldau.registry.client import RegistryUnreachable
from moldau.registry.errors import RegistryError
from moldau.registry.model import SchemaType, SubjectVersion
from moldau.registry.schemas import ParsedSchema
from moldau.spark.registry_options import RegistryConnection

__all__ = ["RegistryFailure", "SchemaLookup", "UnknownSchema"]

T = TypeVar("T")
_SCHEMA_NOT_FOUND = 40403
_INVALID_SCHEMA = 42201


class UnknownSchema(LookupError):
    """A record's schema id that the registry does not know (or whose schema is not valid):
    the record's fault, so `mode=PERMISSIVE` gives it null."""


class RegistryFailure(RuntimeError):
    """The registry could not be asked, or refused to answer: never the record's fault."""


class SchemaLookup:
    def __init__(self, connection: RegistryConnection) -> None:
        self.connection = connection
        self.client = connection.client()
        self._parsed: dict[int, ParsedSchema] = {}
        self._unknown: dict[int, str] = {}

    def _run(self, work: Coroutine[Any, Any, T], what: str) -> T:
        try:
            return asyncio.run(work)
        except RegistryUnreachable as error:
            raise RegistryFailure(
                f"no schema registry answered at {self.connection.url} ({what}): {error}"
            ) from None
        except RegistryError as error:
            raise RegistryFailure(
                f"the schema registry refused {what}: {error.message} (error {error.error_code})"
            ) from None

    def parsed(self, schema_id: int) -> ParsedSchema:
        """The schema with this id, parsed (UnknownSchema: no such id, or not a valid schema)."""
        known = self._parsed.get(schema_id)
        if known is not None:
            return known
        if schema_id in self._unknown:
            raise UnknownSchema(self._unknown[schema_id])
        try:
            found = self._run(self._fetch(schema_id), f"schema id {schema_id}")
        except UnknownSchema as error:
            self._unknown[schema_id] = str(error)
            raise
        self._parsed[schema_id] = found
        return found

    async def _fetch(self, schema_id: int) -> ParsedSchema:
        try:
            return await self.client.parsed(await self.client.schema(schema_id))
        except RegistryError as error:
            if error.error_code in (_SCHEMA_NOT_FOUND, _INVALID_SCHEMA):
                raise UnknownSchema(
                    f"schema id {schema_id} is not in the registry ({error.message})"
                ) from None
            raise

    def schema_type(self, schema_id: int) -> SchemaType:
        return self.parsed(schema_id).schema_type

    def version(self, subject: str, version: str) -> SubjectVersion:
        """`version` ("latest" or a number) of `subject`."""
        return self._run(self.client.version(subject, version), f"version {version} of {subject!r}")

    def register(self, subject: str, text: str, schema_type: SchemaType) -> int:
        return self._run(
            self.client.register(subject, text, schema_type=schema_type),
            f"to register the schema under {subject!r}",
        )
