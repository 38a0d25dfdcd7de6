"""UpdateFeatures (key 57), v0-2: finalize feature levels cluster-wide (KIP-584, KIP-778, KIP-1022).

v0 asks for a downgrade with `allow_downgrade`; v1 replaces it with `upgrade_type` (1 upgrade,
2 safe downgrade, 3 unsafe downgrade) and adds `validate_only`; v2 answers with the top-level
error alone. The request is all or nothing: when one update fails, none is made, the top-level
error says which and why, and in v0-1 every feature's result carries that error too. A broker
that is not the active controller passes the request on; a controller that is not active
answers NOT_CONTROLLER.
"""

from __future__ import annotations

from typing import Any

from moldau.broker.registry import RequestContext, handler
from moldau.controller.feature_control import SAFE_DOWNGRADE, UPGRADE, FeatureUpdate
from moldau.metadata.acls import AclOperation
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import KafkaError


@handler(ApiKey.UPDATE_FEATURES, 0, 2, forward=True)
async def handle_update_features(ctx: RequestContext, request: Any) -> dict[str, Any]:
    ctx.require_cluster(AclOperation.ALTER)
    updates = [
        FeatureUpdate(
            feature=update.feature,
            max_version_level=int(update.max_version_level),
            upgrade_type=(
                int(update.upgrade_type)
                if ctx.api_version >= 1
                else (SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE)
            ),
        )
        for update in request.feature_updates
    ]
    try:
        result = await ctx.controller.update_features(
            updates, validate_only=bool(getattr(request, "validate_only", False))
        )
        code, message = result.error_code, result.error_message
    except KafkaError as error:
        code, message = error.code, error.message
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "results": [  # (v0-1 only)
            {"feature": update.feature, "error_code": code, "error_message": message}
            for update in updates
        ],
    }
