"""`moldau quota set | delete | describe` against a real server: users, client ids (alone and
with a user), IPs and the default entities, with kafka-configs' strict describe."""

from __future__ import annotations

import uuid

import pytest

from .test_cli_support import moldau

pytestmark = pytest.mark.timeout(120)


def test_quotas_are_set_described_and_deleted_per_entity(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    alice = f"alice-{uuid.uuid4().hex[:6]}"
    app = f"app-{uuid.uuid4().hex[:6]}"
    done = moldau("quota", "set", "--user", alice, "producer_byte_rate=1048576",
                  "consumer_byte_rate=2097152", bootstrap=b)  # fmt: skip
    assert done.text == f"Completed updating quota configs for user '{alice}'.\n"
    moldau("quota", "set", "--user", alice, "--client", app, "request_percentage=50", bootstrap=b)
    moldau("quota", "set", "--client-default", "producer_byte_rate=524288", bootstrap=b)
    moldau("quota", "set", "--ip", "10.0.0.7", "connection_creation_rate=20", bootstrap=b)

    assert moldau("quota", "describe", "--user", alice, bootstrap=b).text == (
        f"Quota configs for user '{alice}' are consumer_byte_rate=2097152.0, "
        "producer_byte_rate=1048576.0\n"
    )  # strict: not the user's quota with a client id
    both = moldau("quota", "describe", "--user", alice, "--client", app, "--format", "json",
                  bootstrap=b).json()  # fmt: skip
    assert both == [
        {"entity": {"user": alice, "client-id": app}, "quotas": {"request_percentage": 50.0}}
    ]
    assert moldau("quota", "describe", "--client-default", bootstrap=b).text == (
        "Quota configs for the default client-id are producer_byte_rate=524288.0\n"
    )
    everything = moldau("quota", "describe", "--format", "json", bootstrap=b).json()
    assert {"entity": {"ip": "10.0.0.7"}, "quotas": {"connection_creation_rate": 20.0}} in (
        everything
    )
    assert len([e for e in everything if e["entity"].get("user") == alice]) == 2

    moldau("quota", "delete", "--user", alice, "producer_byte_rate", bootstrap=b)
    assert moldau("quota", "describe", "--user", alice, bootstrap=b).text == (
        f"Quota configs for user '{alice}' are consumer_byte_rate=2097152.0\n"
    )
    moldau("quota", "delete", "--user", alice, "consumer_byte_rate", bootstrap=b)
    assert moldau("quota", "describe", "--user", alice, bootstrap=b).text == "No quota configs.\n"
    moldau("quota", "delete", "--client-default", "producer_byte_rate", bootstrap=b)
    moldau("quota", "delete", "--ip", "10.0.0.7", "connection_creation_rate", bootstrap=b)


def test_quota_mistakes_are_one_line(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    refused = moldau("quota", "set", "--user", "u", "--user-default", "producer_byte_rate=1",
                     bootstrap=b, expect=2)  # fmt: skip
    assert refused.stderr == "error: give --user NAME or --user-default, not both\n"
    refused = moldau("quota", "set", "--ip", "10.0.0.7", "--user", "u", "producer_byte_rate=1",
                     bootstrap=b, expect=2)  # fmt: skip
    assert refused.stderr == (
        "error: an IP quota stands alone: give --ip without --user or --client\n"
    )
    refused = moldau("quota", "set", "--user", "u", "producer_byte_rate=fast", bootstrap=b,
                     expect=2)  # fmt: skip
    assert refused.stderr == "error: quota producer_byte_rate=fast: the value is not a number\n"
    refused = moldau("quota", "set", "producer_byte_rate=1", bootstrap=b, expect=2)
    assert refused.stderr.startswith("error: name the entity: --user NAME")
    # The broker's own rule: an IP takes connection_creation_rate only.
    refused = moldau("quota", "set", "--ip", "10.0.0.8", "producer_byte_rate=1", bootstrap=b,
                     expect=1)  # fmt: skip
    assert "(INVALID_REQUEST)" in refused.stderr and refused.stderr.count("\n") == 1
