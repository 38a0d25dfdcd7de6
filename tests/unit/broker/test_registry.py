"""What ApiVersions advertises is what the dispatcher serves, on both kinds of listener."""

from __future__ import annotations

from moldau.broker.registry import (
    BROKER,
    CONTROLLER,
    handler_for,
    load_handlers,
    supported_versions,
)
from moldau.protocol.adapter import request_schema, response_schema
from moldau.protocol.api_keys import ApiKey


def test_every_advertised_version_has_a_handler_and_its_message_schemas() -> None:
    load_handlers()
    for scope in (BROKER, CONTROLLER):
        advertised = supported_versions(scope)
        assert advertised, scope
        for api_key, low, high in advertised:
            spec = handler_for(api_key, scope)
            assert spec is not None and spec.max_version == high
            # Only Produce v0-2 are advertised below what is served (Kafka 4, KIP-896).
            assert low == spec.min_version or (api_key, low, spec.min_version) == (0, 0, 3)
            for version in range(spec.min_version, high + 1):
                assert request_schema(api_key, version) is not None, (scope, api_key, version)
                assert response_schema(api_key, version) is not None, (scope, api_key, version)


def test_every_handler_is_advertised_but_the_telemetry_apis() -> None:
    """Kafka lists GetTelemetrySubscriptions and PushTelemetry only when a telemetry plugin is
    configured (KIP-714); Moldau has none, so they are served but never listed."""
    handlers = load_handlers()
    for scope in (BROKER, CONTROLLER):
        advertised = {api_key for api_key, _, _ in supported_versions(scope)}
        hidden = set(handlers[scope]) - advertised
        expected = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY}
        assert hidden == (expected if scope == BROKER else set()), scope
        for api_key in hidden:
            spec = handler_for(api_key, scope)
            assert spec is not None
            for version in range(spec.min_version, spec.max_version + 1):
                assert request_schema(api_key, version) is not None
                assert response_schema(api_key, version) is not None
