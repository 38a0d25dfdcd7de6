"""DescribeUserScramCredentials (key 50), v0: the SCRAM mechanisms each user has (KIP-554).

v0 is flexible. Moldau stores no SCRAM credentials yet, so, as Kafka answers for users without
any: every named user is RESOURCE_NOT_FOUND, a user named twice is DUPLICATE_RESOURCE (once),
and a null or empty user list (all users) gives no results.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
USER_NOT_FOUND = "Attempt to describe a user credential that does not exist: "


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)
def handle_describe_user_scram_credentials(ctx: RequestContext, request: Any) -> dict[str, Any]:
    counts = Counter(user.name for user in request.users or ())
    results = []
    for name, count in counts.items():
        if count > 1:
            code, message = ErrorCode.duplicate_resource, DUPLICATE_USER + name
        else:
            code, message = ErrorCode.resource_not_found, USER_NOT_FOUND + name
        results.append(
            {"user": name, "error_code": code, "error_message": message, "credential_infos": []}
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "results": results,
    }
