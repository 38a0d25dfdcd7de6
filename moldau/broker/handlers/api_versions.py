"""ApiVersions (key 18), v0-4: the versions of every API this node serves, and its features.

v1 adds throttle_time_ms; v3 is flexible and adds client software name/version (KIP-511) and, as
tagged fields, the features this software supports, the cluster's finalized feature levels and
their epoch (KIP-584: the metadata offset they were read at). Before v4, supported features whose
minimum level is 0 are left out (older clients refuse a 0 there, KAFKA-17492). An unsupported
ApiVersions version is answered by the dispatcher with a v0 UNSUPPORTED_VERSION response carrying
the ranges. The response header is always v0. Kafka has no DescribeFeatures API: the admin
clients' describeFeatures reads this answer.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import BROKER, CONTROLLER, RequestContext, handler, supported_versions
from moldau.controller.feature_control import (
    KRAFT_VERSION,
    SUPPORTED_FEATURES,
    finalized_levels,
)
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode


@handler(ApiKey.API_VERSIONS, 0, 4, scopes=(BROKER, CONTROLLER))
def handle_api_versions(ctx: RequestContext, request: Any) -> dict[str, Any]:
    name = getattr(request, "client_software_name", None)
    if ctx.api_version >= 3 and name is not None:
        ctx.extras["client_software"] = (name, getattr(request, "client_software_version", ""))
    response: dict[str, Any] = {
        "error_code": ErrorCode.none,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, low, high in supported_versions(ctx.scope)
        ],
        "throttle_time": 0,
        "finalized_features_epoch": -1,
    }
    if ctx.api_version < 3:
        return response
    response["supported_features"] = [
        {"name": feature, "min_version": low, "max_version": high}
        for feature, (low, high) in SUPPORTED_FEATURES.items()
        if low > 0 or ctx.api_version >= 4
    ]
    controller = ctx.node.controller
    if controller is not None:
        image = controller.image
        response["finalized_features_epoch"] = image.offset
        levels = dict(finalized_levels(image))
        kraft_version = controller.describe_quorum().kraft_version
        if kraft_version > 0:  # the quorum's own (KIP-853), not a metadata record
            levels[KRAFT_VERSION] = kraft_version
        response["finalized_features"] = [
            {"name": feature, "min_version_level": level, "max_version_level": level}
            for feature, level in levels.items()
        ]
    return response
