"""DescribeUserScramCredentials (key 50), v0: the SCRAM mechanisms and iterations each user
has (KIP-554), from this broker's metadata image.

v0 is flexible. A null or empty user list describes every user with a credential; a named user
without one is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE (once), as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.scram_control import describe_user_scram_credentials
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
def handle_describe_user_scram_credentials(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.DESCRIBE)
    users = None if request.users is None else [user.name for user in request.users]
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "results": describe_user_scram_credentials(ctx.node.metadata_image, users),
    }
