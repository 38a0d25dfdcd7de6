"""Users' SCRAM credentials through the admin API: AlterUserScramCredentials (the client salts
the password, as Kafka's admin client does) and DescribeUserScramCredentials (KIP-554)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.client.cluster import Cluster
from moldau.client.errors import check_error
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.sasl.scram import MECHANISM_NAMES, MECHANISM_TYPES, salted_password

DEFAULT_ITERATIONS = 8192  # kafka-configs' default for a password given in the clear


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """Set `user`'s credential for `mechanism`: from a password, or already salted."""

    user: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes

    @classmethod
    def from_password(
        cls, user: str, mechanism: str, password: str, *, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramUpsertion:
        salt = secrets.token_bytes(32)
        salted = salted_password(mechanism, password.encode(), salt, iterations)
        return cls(user, mechanism, iterations, salt, salted)


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    user: str
    mechanism: str


async def alter_user_scram_credentials(
    cluster: Cluster, alterations: Sequence[ScramUpsertion | ScramDeletion]
) -> None:
    """Apply the changes; raises KafkaException for the first user refused."""
    connection = await cluster.any_connection()
    response = await connection.request(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        {
            "deletions": [
                {"name": a.user, "mechanism": MECHANISM_TYPES[a.mechanism]}
                for a in alterations
                if isinstance(a, ScramDeletion)
            ],
            "upsertions": [
                {
                    "name": a.user,
                    "mechanism": MECHANISM_TYPES[a.mechanism],
                    "iterations": a.iterations,
                    "salt": a.salt,
                    "salted_password": a.salted_password,
                }
                for a in alterations
                if isinstance(a, ScramUpsertion)
            ],
        },
    )
    for result in response.results:
        check_error(result.error_code, result.error_message, context=f"user {result.user}")


async def describe_user_scram_credentials(
    cluster: Cluster, users: Sequence[str] | None = None
) -> dict[str, list[tuple[str, int]]]:
    """user -> [(mechanism, iterations)]; every user with credentials when `users` is None.
    A named user without any raises KafkaException (RESOURCE_NOT_FOUND)."""
    connection = await cluster.any_connection()
    response = await connection.request(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        {"users": None if users is None else [{"name": name} for name in users]},
    )
    check_error(response.error_code, response.error_message, context="DescribeUserScramCredentials")
    described = {}
    for result in response.results:
        check_error(result.error_code, result.error_message, context=f"user {result.user}")
        described[result.user] = [
            (MECHANISM_NAMES.get(int(info.mechanism), str(info.mechanism)), int(info.iterations))
            for info in result.credential_infos
        ]
    return described
