"""A broker that has started serves clients as a live broker at once: its Metadata answer lists
it and names a controller from that list, even when its copy of the metadata log lags.

The controller unfences a broker in a heartbeat's answer; the record that says so reaches the
broker's own image only with its next fetch of the metadata log. A broker that began serving on
the heartbeat's word answered Metadata without itself among the brokers, yet named itself the
controller, and librdkafka's admin client then waited for that controller until its request
timed out. Here the broker's fetches of the metadata log are held back (`lagging_fetches`, both
nodes run in this process as `moldau.Server`), so the lag is there on every run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.broker.quorum_transport import QuorumTransport

from .cluster import controller_and_broker_in_process
from .wire import Connection

FETCH_LAG_S = 0.5


@pytest.fixture
def lagging_fetches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every quorum request this process sends waits FETCH_LAG_S first (the only sender here is
    the broker, an observer fetching the metadata log from the single voter)."""
    send = QuorumTransport._request

    async def late(self: QuorumTransport, destination_id: int, message: Any) -> None:
        await asyncio.sleep(FETCH_LAG_S)
        await send(self, destination_id, message)

    monkeypatch.setattr(QuorumTransport, "_request", late)


PLAINTEXT = {
    "listener.security.protocol.map": "BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "broker.heartbeat.interval.ms": "500",
}


def test_a_started_broker_lists_itself_and_names_a_listed_controller(
    tmp_path: Path, lagging_fetches: None
) -> None:
    with controller_and_broker_in_process(tmp_path, common=PLAINTEXT) as bootstrap:
        host, port = bootstrap.split(":")
        with Connection(host, int(port), timeout=10) as connection:
            metadata = connection.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert [(b.node_id, b.port) for b in metadata.brokers] == [(2, int(port))]
        assert metadata.controller_id == 2
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("first", num_partitions=1, replication_factor=1)])[
            "first"
        ].result(20)
