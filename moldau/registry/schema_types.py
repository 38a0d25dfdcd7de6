"""A schema's text parsed by the module of its type (Avro, JSON Schema, Protobuf), each of which
builds on `schemas.py`."""

from __future__ import annotations

from collections.abc import Sequence

from moldau.registry.avro import parse_avro
from moldau.registry.errors import RegistryError
from moldau.registry.json_schema import parse_json_schema
from moldau.registry.model import SchemaReference, SchemaType
from moldau.registry.protobuf import parse_protobuf
from moldau.registry.schemas import ParsedSchema, Resolve, resolve_references


def parse(
    schema_type: SchemaType,
    text: str,
    references: Sequence[SchemaReference] = (),
    resolve: Resolve | None = None,
) -> ParsedSchema:
    """The schema `text` of `schema_type`, validated (RegistryError 42201 when invalid)."""
    resolved = resolve_references(references, resolve) if references and resolve else []
    if references and resolve is None:
        raise RegistryError.invalid_schema("references cannot be resolved here")
    if schema_type is SchemaType.AVRO:
        return parse_avro(text, resolved)
    if schema_type is SchemaType.JSON:
        return parse_json_schema(text, resolved)
    return parse_protobuf(text, resolved)
