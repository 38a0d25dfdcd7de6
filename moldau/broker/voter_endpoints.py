"""A voter keeps its endpoints in the voter set current (KIP-853's UpdateRaftVoter, as Kafka's
voters send it once they follow a leader).

With dynamic voters the other controllers reach a voter at the endpoints the voter set in the
metadata log names. A controller restarted on another address would be cut off from the quorum
until that changes, so every `CHECK_INTERVAL_S` a voter compares its own controller listeners
with its entry in the voter set and, when they differ, asks the quorum's leader to write the
new ones: UpdateRaftVoter on the leader's controller listener, or directly when it leads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from moldau.client.connection import BrokerConnection
from moldau.client.errors import KafkaException
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.raft.voter_set import KRAFT_VERSION_DYNAMIC, Endpoint, VoterNode, directory_uuid

if TYPE_CHECKING:
    from moldau.broker.services import BrokerServices

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0
UPDATE_TIMEOUT_S = 10.0


def local_voter(node: BrokerServices) -> VoterNode | None:
    """This node as a voter with its controller listeners now, if the voter set's entry for it
    names other endpoints; None when it is not a voter or nothing changed."""
    controller = node.controller
    if controller is None:
        return None
    raft = controller.driver.node
    if raft.kraft_version < KRAFT_VERSION_DYNAMIC or not raft.is_voter:
        return None
    current = raft.voter_set.get(node.node_id)
    endpoints = tuple(
        Endpoint(name=listener.endpoint.name, host=host, port=listener.bound_port)
        for listener in node.controller_listeners
        for host in [listener.endpoint.host or "127.0.0.1"]
    )
    if current is None or not endpoints or current.endpoints == endpoints:
        return None
    return VoterNode(node_id=node.node_id, directory_id=raft.directory_id, endpoints=endpoints)


async def keep_voter_endpoints_current(node: BrokerServices) -> None:
    while True:
        await asyncio.sleep(CHECK_INTERVAL_S)
        voter = local_voter(node)
        if voter is None:
            continue
        try:
            await _update(node, voter)
        except (KafkaError, KafkaException, OSError, TimeoutError) as error:
            log.info("updating this voter's endpoints failed (retrying): %s", error)


async def _update(node: BrokerServices, voter: VoterNode) -> None:
    controller = node.controller
    if controller is None:  # (the node is stopping)
        return
    leader_id = controller.leader_id
    if leader_id is None:
        return
    if leader_id == node.node_id:
        await controller.update_voter(voter, timeout_s=UPDATE_TIMEOUT_S)
        log.info("wrote this voter's endpoints %s into the voter set", voter.endpoints)
        return
    addresses = node.quorum_addresses
    address = addresses.get(leader_id) if addresses is not None else None
    if address is None:
        return
    connection = await BrokerConnection.open(
        address[0],
        address[1],
        node_id=leader_id,
        client_id=f"raft-{node.node_id}",
        ssl_context=node.security.controller,
        sasl=node.security.controller_sasl,
    )
    try:
        response = await connection.request(
            ApiKey.UPDATE_RAFT_VOTER,
            {
                "cluster_id": controller.cluster_id,
                "current_leader_epoch": controller.describe_quorum().epoch,
                "voter_id": voter.node_id,
                "voter_directory_id": directory_uuid(voter.directory_id),
                "listeners": [
                    {"name": e.name, "host": e.host, "port": e.port} for e in voter.endpoints
                ],
                "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
            },
            timeout=UPDATE_TIMEOUT_S,
        )
    finally:
        with contextlib.suppress(Exception):
            await connection.close()
    code = ErrorCode(int(response.error_code))
    if code != ErrorCode.none:
        raise KafkaError(code, f"UpdateRaftVoter to node {leader_id}: {code.name}")
    log.info("node %d wrote this voter's endpoints %s", leader_id, voter.endpoints)
