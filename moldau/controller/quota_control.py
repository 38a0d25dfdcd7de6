"""Client quotas in the metadata, as Kafka's ClientQuotaControlManager and ClientQuotasImage
(KIP-546).

`alter_client_quotas` validates each entity and quota key as Kafka does and returns the
`ClientQuotaRecord`s of the changes (a value equal to the current one writes nothing);
`describe_client_quotas` matches the image's quotas against a filter. Entities are (type, name)
pairs of the types "user", "client-id" (either or both) or "ip" (alone); a None name is the
default entity of its type.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Mapping, Sequence

from moldau.controller.operations import (
    ClientQuotaAlteration,
    ClientQuotaFilter,
    ClientQuotaResult,
)
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import ClientQuotaEntity, ClientQuotaRecord, MetadataRecord
from moldau.protocol.errors import ErrorCode, KafkaError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

# Quota keys by the entity types they apply to, with whether the value must be integral.
USER_AND_CLIENT_QUOTAS: Mapping[str, bool] = {
    "producer_byte_rate": True,
    "consumer_byte_rate": True,
    "request_percentage": False,
    "controller_mutation_rate": False,
}
IP_QUOTAS: Mapping[str, bool] = {"connection_creation_rate": True}

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


def entity_key(entity: Sequence[tuple[str, str | None]]) -> ClientQuotaEntity:
    # A type may come twice (refused later, as Kafka does), once with the default's None name.
    return tuple(sorted(((t, n) for t, n in entity), key=lambda p: (p[0], p[1] is not None, p[1])))


def alter_client_quotas(
    image: MetadataImage, alterations: Sequence[ClientQuotaAlteration], *, validate_only: bool
) -> tuple[list[MetadataRecord], list[ClientQuotaResult]]:
    records: list[MetadataRecord] = []
    results: list[ClientQuotaResult] = []
    entity_counts = Counter(entity_key(a.entity) for a in alterations)
    for alteration in alterations:
        try:
            if entity_counts[entity_key(alteration.entity)] > 1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    f"Ignoring duplicate entity {_describe_entity(alteration.entity)}",
                )
            new_records = _alter_entity(image, alteration)
        except KafkaError as error:
            results.append(
                ClientQuotaResult(
                    entity=alteration.entity, error_code=error.code, error_message=error.message
                )
            )
            continue
        results.append(ClientQuotaResult(entity=alteration.entity))
        if not validate_only:
            records.extend(new_records)
    return records, results


def _alter_entity(image: MetadataImage, alteration: ClientQuotaAlteration) -> list[MetadataRecord]:
    key_counts = Counter(op.key for op in alteration.ops)
    for key, count in key_counts.items():
        if count > 1:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Duplicate quota key {key} not updating quota for this entity "
                f"{_describe_entity(alteration.entity)}",
            )
    entity = _validate_entity(alteration.entity)
    valid_keys = _quota_keys(dict(entity))
    current = image.client_quotas.get(entity, {})
    records: list[MetadataRecord] = []
    for op in alteration.ops:
        if op.remove:
            if op.key in current:
                records.append(ClientQuotaRecord(entity=entity, key=op.key, remove=True))
            continue
        if op.key not in valid_keys:
            raise KafkaError(ErrorCode.invalid_request, f"Invalid configuration key {op.key}")
        if valid_keys[op.key] and abs(op.value - round(op.value)) > 1e-6:
            raise KafkaError(
                ErrorCode.invalid_request, f"Configuration {op.key} must be a Long value"
            )
        if current.get(op.key) != op.value:
            records.append(ClientQuotaRecord(entity=entity, key=op.key, value=float(op.value)))
    return records


def _validate_entity(entity: Sequence[tuple[str, str | None]]) -> ClientQuotaEntity:
    if not entity:
        raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    seen: set[str] = set()
    for entity_type, name in entity:
        if entity_type in seen:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Invalid empty client quota entity, duplicate entity entry {entity_type}",
            )
        seen.add(entity_type)
        if entity_type not in ENTITY_TYPES:
            raise KafkaError(
                ErrorCode.invalid_request, f"Unhandled client quota entity type: {entity_type}"
            )
        if name is not None and name == "":
            raise KafkaError(ErrorCode.invalid_request, f"Empty {entity_type} not supported")
    return entity_key(entity)


def _quota_keys(entity: Mapping[str, str | None]) -> Mapping[str, bool]:
    if IP in entity:
        if len(entity) > 1:
            raise KafkaError(
                ErrorCode.invalid_request,
                "Invalid quota entity combination, IP entity should not be combined with User "
                "or ClientId",
            )
        address = entity[IP]
        if address is not None:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise KafkaError(
                    ErrorCode.invalid_request, f"{address} is not a valid IP or resolvable host."
                ) from None
        return IP_QUOTAS
    return USER_AND_CLIENT_QUOTAS


def describe_client_quotas(
    image: MetadataImage, components: Sequence[ClientQuotaFilter], *, strict: bool
) -> list[tuple[ClientQuotaEntity, Mapping[str, float]]]:
    """Entities matching every component (and, when strict, no other entity types).

    Raises INVALID_REQUEST for a malformed filter and UNSUPPORTED_VERSION for an unknown
    entity type, as Kafka does."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        entity_type = component.entity_type
        if not entity_type:
            raise KafkaError(ErrorCode.invalid_request, "Invalid empty entity type.")
        if entity_type in exact or entity_type in specified:
            raise KafkaError(
                ErrorCode.invalid_request,
                f"Entity type {entity_type} cannot appear more than once in the filter.",
            )
        if entity_type not in ENTITY_TYPES:
            raise KafkaError(
                ErrorCode.unsupported_version, f"Unsupported entity type {entity_type}"
            )
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[entity_type] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[entity_type] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            specified.add(entity_type)
        else:
            raise KafkaError(
                ErrorCode.invalid_request, f"Unknown match type {component.match_type}"
            )
    named = set(exact) | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        raise KafkaError(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    matches = []
    for entity, quotas in sorted(image.client_quotas.items(), key=_sort_key):
        names = dict(entity)
        if any(t not in names or names[t] != name for t, name in exact.items()):
            continue
        if any(t not in names for t in specified):
            continue
        if strict and len(names) != len(named):
            continue
        matches.append((entity, quotas))
    return matches


def _sort_key(item: tuple[ClientQuotaEntity, object]) -> list[tuple[str, str]]:
    return [(entity_type, name or "") for entity_type, name in item[0]]


def _describe_entity(entity: Sequence[tuple[str, str | None]]) -> str:
    parts = ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)
    return f"ClientQuotaEntity({parts})"
