"""AlterUserScramCredentials (key 51), v0: set or delete users' SCRAM credentials (KIP-554).

v0 is flexible. The client salts the password (salt, iterations, salted password); the
controller keeps the stored and server keys derived from it in the metadata log
(UserScramCredentialRecord), where every broker's authenticator reads them. A broker that is
not the active controller forwards the request (KIP-590). Validation is Kafka's
(`moldau.controller.scram_control`).
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.operations import ScramCredentialDeletion, ScramCredentialUpsertion
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, forward=True)
async def handle_alter_user_scram_credentials(ctx: RequestContext, request: Any) -> dict[str, Any]:
    if not ctx.authorized_cluster(AclOperation.ALTER):  # (each user says it)
        users = [entry.name for entry in (*request.deletions, *request.upsertions)]
        return {
            "throttle_time": 0,
            "results": [
                {
                    "user": user,
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "error_message": "Cluster authorization failed.",
                }
                for user in dict.fromkeys(users)
            ],
        }
    results = await ctx.controller.alter_user_scram_credentials(
        [
            ScramCredentialDeletion(name=entry.name, mechanism=int(entry.mechanism))
            for entry in request.deletions
        ],
        [
            ScramCredentialUpsertion(
                name=entry.name,
                mechanism=int(entry.mechanism),
                iterations=int(entry.iterations),
                salt=bytes(entry.salt),
                salted_password=bytes(entry.salted_password),
            )
            for entry in request.upsertions
        ],
    )
    return {
        "throttle_time": 0,
        "results": [
            {
                "user": result.user,
                "error_code": result.error_code,
                "error_message": result.error_message,
            }
            for result in results
        ],
    }
