"""Client quota alterations are validated as Kafka's ClientQuotaControlManager validates them."""

from __future__ import annotations

from moldau.controller.operations import ClientQuotaAlteration, ClientQuotaOp
from moldau.controller.quota_control import alter_client_quotas
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode


def test_an_entity_naming_one_type_twice_once_as_default_is_an_invalid_request() -> None:
    """Found by fuzzing: ("user", None) beside ("user", "alice") made sorting the entity compare
    None with a string, and the request failed with UNKNOWN_SERVER_ERROR and a traceback."""
    alteration = ClientQuotaAlteration(
        entity=[("user", "alice"), ("user", None)],
        ops=[ClientQuotaOp(key="producer_byte_rate", value=1024.0)],
    )
    records, results = alter_client_quotas(
        MetadataImage.empty(), [alteration, alteration], validate_only=False
    )
    assert records == []
    assert [r.error_code for r in results] == [ErrorCode.invalid_request] * 2
    _, [alone] = alter_client_quotas(MetadataImage.empty(), [alteration], validate_only=False)
    assert alone.error_code == ErrorCode.invalid_request
