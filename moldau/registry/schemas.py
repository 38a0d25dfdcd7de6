"""Parsing a schema of any type and checking a new version against earlier ones.

`parse(schema_type, text, references, resolve)` validates a schema (42201 when it is not one)
with its references resolved through the registry (depth-bounded, cycles refused) and returns a
`ParsedSchema`. `compatibility_errors(level, new, earlier)` applies Confluent's levels: BACKWARD
checks that the new schema reads what the latest version wrote, FORWARD the reverse, FULL both;
the transitive levels check every earlier version instead of the latest only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from moldau.registry.errors import RegistryError
from moldau.registry.model import Compatibility, SchemaReference, SchemaType, StoredSchema

__all__ = [
    "MAX_REFERENCE_DEPTH",
    "ParsedSchema",
    "ResolvedReference",
    "compatibility_errors",
]

MAX_NESTING = 64  # containers inside containers, so a hostile schema cannot exhaust the stack
MAX_REFERENCE_DEPTH = 32  # references of references, as deep as a schema may nest them
MAX_REFERENCES = 1000  # distinct schemas one schema may pull in through its references


class ParsedSchema(Protocol):
    schema_type: SchemaType

    def canonical(self) -> str:
        """The text stored and answered; equal texts are the same schema (one id)."""
        ...

    def normalized(self) -> str:
        """A form insensitive to what does not change the schema's meaning (`normalize=true`)."""
        ...

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """Why this schema, as a reader, cannot read what `writer` wrote (empty: it can)."""
        ...


@dataclass(frozen=True, slots=True)
class ResolvedReference:
    """A referenced schema and the name the referring schema knows it by; dependencies come
    before what depends on them."""

    name: str
    schema: StoredSchema


Resolve = Callable[[SchemaReference], StoredSchema]


def _depth(document: Any, limit: int = MAX_NESTING) -> int:
    """How deeply JSON containers nest (stops counting past `limit`)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return depth
        if isinstance(node, dict):
            deepest = max(deepest, depth)
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            deepest = max(deepest, depth)
            stack.extend((value, depth + 1) for value in node)
    return deepest


def load_json(text: str, what: str) -> Any:
    """`text` as JSON (42201 when it is not, or nests deeper than MAX_NESTING)."""
    try:
        document = json.loads(text)
    except RecursionError:
        raise RegistryError.invalid_schema(f"the {what} nests too deeply") from None
    except ValueError as error:
        raise RegistryError.invalid_schema(f"the {what} is not JSON: {error}") from None
    if _depth(document) > MAX_NESTING:
        raise RegistryError.invalid_schema(f"the {what} nests deeper than {MAX_NESTING} levels")
    return document


def of_type(
    references: Sequence[ResolvedReference], schema_type: SchemaType
) -> Sequence[ResolvedReference]:
    """`references`, once each is known to be of `schema_type` (42201 otherwise)."""
    for reference in references:
        if reference.schema.schema_type is not schema_type:
            raise RegistryError.invalid_schema(
                f"reference {reference.name!r} is a {reference.schema.schema_type.value} schema"
            )
    return references


def resolve_references(
    references: Sequence[SchemaReference], resolve: Resolve
) -> list[ResolvedReference]:
    """Every schema reachable through `references`, dependencies first, each once."""
    ordered: list[ResolvedReference] = []
    seen: set[tuple[str, int]] = set()

    def visit(reference: SchemaReference, path: tuple[tuple[str, int], ...]) -> None:
        key = (reference.subject, reference.version)
        if key in path:
            chain = " -> ".join(f"{s} v{v}" for s, v in (*path, key))
            raise RegistryError.invalid_schema(f"reference cycle: {chain}")
        if len(path) >= MAX_REFERENCE_DEPTH:
            raise RegistryError.invalid_schema(
                f"references nested deeper than {MAX_REFERENCE_DEPTH} levels"
            )
        if key in seen:
            return
        schema = resolve(reference)
        for inner in schema.references:
            visit(inner, (*path, key))
        seen.add(key)
        if len(seen) > MAX_REFERENCES:
            raise RegistryError.invalid_schema(f"more than {MAX_REFERENCES} referenced schemas")
        ordered.append(ResolvedReference(reference.name, schema))

    for reference in references:
        visit(reference, ())
    return ordered


def compatibility_errors(
    level: Compatibility, new: ParsedSchema, earlier: Sequence[ParsedSchema]
) -> list[str]:
    """Why `new` may not follow `earlier` (oldest first) under `level`; empty when it may."""
    if level is Compatibility.NONE or not earlier:
        return []
    targets = list(earlier) if level.transitive else [earlier[-1]]
    errors: list[str] = []
    for old in reversed(targets):
        if old.schema_type is not new.schema_type:
            errors.append(
                f"schema type {new.schema_type.value} differs from an earlier version's "
                f"{old.schema_type.value}"
            )
            continue
        if level.backward:
            errors.extend(new.read_errors(old))
        if level.forward:
            errors.extend(old.read_errors(new))
    return errors
