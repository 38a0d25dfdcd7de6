"""Client quotas through the admin API: DescribeClientQuotas and AlterClientQuotas (KIP-546), as
Kafka's admin client sends them for `kafka-configs --entity-type users|clients|ips`.

An entity is a mapping from entity type ("user", "client-id", "ip") to a name, where None is the
type's default entity (`<default>`, `--entity-default` in kafka-configs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from moldau.client.cluster import Cluster
from moldau.client.errors import check_error
from moldau.protocol.api_keys import ApiKey

__all__ = [
    "ENTITY_TYPES",
    "ClientQuotaEntity",
    "QuotaAlteration",
    "alter_client_quotas",
    "describe_client_quotas",
]

ENTITY_TYPES = ("user", "client-id", "ip")
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

ClientQuotaEntity = Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    """Set `set` (key -> value) and remove `remove` (keys) on `entity`."""

    entity: ClientQuotaEntity
    set: Mapping[str, float]
    remove: Sequence[str] = ()


def _entity_wire(entity: ClientQuotaEntity) -> list[dict[str, str | None]]:
    return [{"entity_type": kind, "entity_name": name} for kind, name in entity.items()]


async def describe_client_quotas(
    cluster: Cluster, entity: ClientQuotaEntity, *, strict: bool
) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    """The quotas of the entities matching `entity` (an empty one matches all): each entity
    with its key -> value. `strict` leaves out entities that have types `entity` does not
    name (kafka-configs describes strictly)."""
    components = [
        {
            "entity_type": kind,
            "match_type": MATCH_DEFAULT if name is None else MATCH_EXACT,
            "match": name,
        }
        for kind, name in entity.items()
    ]
    connection = await cluster.any_connection()
    response = await connection.request(
        ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": strict}
    )
    check_error(response.error_code, response.error_message, context="DescribeClientQuotas")
    return [
        (
            {part.entity_type: part.entity_name for part in entry.entity},
            {value.key: float(value.value) for value in entry.values},
        )
        for entry in response.entries or ()
    ]


async def alter_client_quotas(
    cluster: Cluster, alterations: Sequence[QuotaAlteration], *, validate_only: bool = False
) -> None:
    """Apply the changes; raises KafkaException for the first entity refused."""
    connection = await cluster.any_connection()
    response = await connection.request(
        ApiKey.ALTER_CLIENT_QUOTAS,
        {
            "entries": [
                {
                    "entity": _entity_wire(alteration.entity),
                    "ops": [
                        *(
                            {"key": key, "value": value, "remove": False}
                            for key, value in alteration.set.items()
                        ),
                        *({"key": key, "value": 0.0, "remove": True} for key in alteration.remove),
                    ],
                }
                for alteration in alterations
            ],
            "validate_only": validate_only,
        },
    )
    for entry in response.entries:
        entity = {part.entity_type: part.entity_name for part in entry.entity}
        check_error(entry.error_code, entry.error_message, context=f"quota of {entity}")
