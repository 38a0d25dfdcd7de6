"""ApiVersions (key 18), v0-4: the versions of every API this broker serves.

v1 adds throttle_time_ms; v3 is flexible and adds client software name/version (KIP-511) and the
supported/finalized features tagged fields. An unsupported ApiVersions version is answered by the
dispatcher with a v0 UNSUPPORTED_VERSION response carrying the ranges. The response header is
always v0.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import BROKER, CONTROLLER, RequestContext, handler, supported_versions
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.API_VERSIONS, 0, 4, scopes=(BROKER, CONTROLLER))
def handle_api_versions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    name = getattr(request, "client_software_name", None)
    if ctx.api_version >= 3 and name is not None:
        ctx.extras["client_software"] = (name, getattr(request, "client_software_version", ""))
    return {
        "error_code": ErrorCode.none,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, low, high in supported_versions(ctx.scope)
        ],
        "throttle_time": 0,
        "finalized_features_epoch": -1,
    }
