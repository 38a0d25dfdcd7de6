"""Kafka's connection limits: per address (with overrides), per listener and per node, the
inter-broker listener exempt from the node's limit."""

from __future__ import annotations

import pytest

from moldau.net.connection_quotas import ConnectionQuotas, parse_overrides


def test_an_address_gets_its_limit_and_a_released_slot_is_taken_again() -> None:
    quotas = ConnectionQuotas(per_ip=2, per_ip_overrides={"10.0.0.9": 3})
    assert quotas.admit("PLAINTEXT", "10.0.0.1") is None
    assert quotas.admit("PLAINTEXT", "10.0.0.1") is None
    refusal = quotas.admit("PLAINTEXT", "10.0.0.1")
    assert refusal is not None and "max.connections.per.ip 2" in refusal
    assert quotas.admit("PLAINTEXT", "10.0.0.2") is None  # another address
    assert [quotas.admit("PLAINTEXT", "10.0.0.9") for _ in range(4)][-2:] == [
        None,
        "10.0.0.9 has 3 connections (max.connections.per.ip 3)",
    ]
    quotas.release("PLAINTEXT", "10.0.0.1")
    assert quotas.count("10.0.0.1") == 1
    assert quotas.admit("PLAINTEXT", "10.0.0.1") is None


def test_the_node_limit_spares_the_inter_broker_listener_and_listeners_have_their_own() -> None:
    quotas = ConnectionQuotas(
        max_connections=2, per_listener={"CLIENTS": 1}, exempt_listener="INTERNAL"
    )
    assert quotas.admit("CLIENTS", "a") is None
    assert "listener.name.clients.max.connections 1" in (quotas.admit("CLIENTS", "b") or "")
    assert quotas.admit("OTHER", "b") is None
    assert "max.connections 2" in (quotas.admit("OTHER", "c") or "")
    assert quotas.admit("INTERNAL", "d") is None  # replication is never locked out
    quotas.release("OTHER", "b")
    assert quotas.admit("OTHER", "c") is None


def test_overrides_parse_as_kafka_writes_them() -> None:
    assert parse_overrides("hostName:100, 127.0.0.1:200,[::1]:5") == {
        "hostName": 100,
        "127.0.0.1": 200,
        "::1": 5,
    }
    assert parse_overrides("") == {}
    for bad in ("127.0.0.1", "h:x", "h:-1", ":3"):
        with pytest.raises(ValueError):
            parse_overrides(bad)
