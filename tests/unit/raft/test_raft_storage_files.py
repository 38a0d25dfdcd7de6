import json
import os

import pytest

from moldau.raft.meta_properties import (
    MetaProperties,
    StorageFormatError,
    ensure_formatted,
    read_meta_properties,
)
from moldau.raft.quorum_state import ElectionState, FileQuorumStateStore


def test_quorum_state_is_written_with_kafkas_keys_and_read_back(tmp_path):
    store = FileQuorumStateStore(str(tmp_path / "m"))
    assert store.read() is None
    store.write(ElectionState(epoch=3, leader_id=1, voted_id=1, voters=(1,)))
    with open(store.path) as handle:
        data = json.load(handle)
    assert data["leaderId"] == 1 and data["leaderEpoch"] == 3 and data["votedId"] == 1
    assert data["currentVoters"] == [{"voterId": 1}]
    assert store.read() == ElectionState(epoch=3, leader_id=1, voted_id=1, voters=(1,))
    store.write(ElectionState(epoch=4, voters=(1,)))
    assert store.read() == ElectionState(epoch=4, leader_id=None, voted_id=None, voters=(1,))
    assert not os.path.exists(store.path + ".tmp")


def test_first_start_formats_every_directory_with_one_cluster_id(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "a")]
    cluster_id = ensure_formatted(dirs, node_id=3)
    assert len(cluster_id) == 22
    a, b = read_meta_properties(dirs[0]), read_meta_properties(dirs[1])
    assert a.cluster_id == b.cluster_id == cluster_id
    assert a.node_id == b.node_id == 3 and a.version == 1
    assert a.directory_id != b.directory_id
    assert ensure_formatted(dirs, node_id=3) == cluster_id
    assert read_meta_properties(dirs[0]) == a  # a second start leaves the files alone


def test_a_new_directory_joins_the_existing_cluster(tmp_path):
    first = ensure_formatted([str(tmp_path / "a")], node_id=1)
    assert ensure_formatted([str(tmp_path / "a"), str(tmp_path / "b")], node_id=1) == first
    assert read_meta_properties(str(tmp_path / "b")).cluster_id == first


def test_the_configured_cluster_id_is_used_and_enforced(tmp_path):
    assert (
        ensure_formatted([str(tmp_path / "a")], node_id=1, cluster_id="MkU3OEVBNTcwNTJENDM2Qk")
        == "MkU3OEVBNTcwNTJENDM2Qk"
    )
    with pytest.raises(StorageFormatError, match=r"cluster\.id"):
        ensure_formatted([str(tmp_path / "a")], node_id=1, cluster_id="another")


def test_a_directory_of_another_node_or_cluster_is_refused(tmp_path):
    ensure_formatted([str(tmp_path / "a")], node_id=1)
    with pytest.raises(StorageFormatError, match=r"node\.id=1"):
        ensure_formatted([str(tmp_path / "a")], node_id=2)
    ensure_formatted([str(tmp_path / "b")], node_id=1)
    with pytest.raises(StorageFormatError, match="different clusters"):
        ensure_formatted([str(tmp_path / "a"), str(tmp_path / "b")], node_id=1)


def test_meta_properties_text_round_trip_and_errors():
    properties = MetaProperties(cluster_id="abc", node_id=4, directory_id="xyz")
    assert MetaProperties.from_text("#comment\n" + properties.to_text()) == properties
    with pytest.raises(StorageFormatError):
        MetaProperties.from_text("version=1\nnode.id=4\n")
