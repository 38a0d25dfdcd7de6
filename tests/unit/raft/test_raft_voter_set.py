"""The voter set along the log and Raft's control records (KIP-853)."""

import pytest

from moldau.raft.control_records import (
    KRAFT_VERSION,
    LEADER_CHANGE,
    VOTERS,
    bootstrap_checkpoint,
    control_changes,
    control_record_type,
    kraft_version_payload,
    leader_change_payload,
    read_snapshot_header,
    snapshot_header,
    split_snapshot,
    voters_payload,
)
from moldau.raft.log import OffsetAndEpoch
from moldau.raft.snapshots import MemorySnapshotStore
from moldau.raft.voter_set import (
    Endpoint,
    VoterNode,
    VoterSet,
    VoterSetHistory,
    directory_id_of,
    directory_uuid,
)

ONE = VoterSet.of_nodes(
    [
        VoterNode(
            node_id=1,
            directory_id="AAAAAAAAAAAAAAAAAAAAAQ",
            endpoints=(Endpoint(name="CONTROLLER", host="127.0.0.1", port=9093),),
        )
    ]
)
TWO = ONE.adding(VoterNode(node_id=2, directory_id="AAAAAAAAAAAAAAAAAAAAAg"))


def test_a_voter_is_its_id_and_directory_id_when_both_are_known():
    assert TWO.has_voter(2, "AAAAAAAAAAAAAAAAAAAAAg")
    assert TWO.has_voter(2, None)
    assert not TWO.has_voter(2, "AAAAAAAAAAAAAAAAAAAAAw")
    assert TWO.majority == 2 and VoterSet().majority == 1 and not VoterSet().voter_ids
    with pytest.raises(ValueError, match="twice"):
        TWO.adding(VoterNode(node_id=2))


def test_the_history_answers_by_offset_and_forgets_a_truncated_tail():
    history = VoterSetHistory(VoterSet(), kraft_version=0)
    history.add_kraft_version(0, 1)
    history.add_voters(1, ONE)
    history.add_voters(10, TWO)
    assert history.latest == TWO and history.kraft_version == 1
    assert history.value_at(0) == VoterSet() and history.value_at(5) == ONE
    assert history.value_at(10) == TWO and history.last_change_offset == 10
    assert history.truncate_from(10) and history.latest == ONE
    assert not history.truncate_from(10)
    assert history.truncate_from(0) and history.kraft_version == 0


def test_control_records_say_their_kafka_type_and_what_they_change():
    assert control_record_type(leader_change_payload(1, (1, 2))) == LEADER_CHANGE
    assert control_record_type(kraft_version_payload(1)) == KRAFT_VERSION
    assert control_record_type(voters_payload(TWO)) == VOTERS
    assert control_record_type(b"not json") == LEADER_CHANGE
    changes = control_changes(
        (leader_change_payload(1, (1,)), kraft_version_payload(1), voters_payload(TWO))
    )
    assert changes.kraft_version == 1 and changes.voters == TWO
    assert control_changes((leader_change_payload(1, (1,)),)).voters is None


def test_a_snapshot_header_is_read_from_its_first_bytes_and_split_from_the_state():
    store = MemorySnapshotStore()
    snapshot_id = OffsetAndEpoch(epoch=3, offset=40)
    store.create(snapshot_id, snapshot_header(1, TWO) + b"state")
    header = read_snapshot_header(store, snapshot_id)
    assert header is not None and header.voters == TWO and header.kraft_version == 1
    assert split_snapshot(store.load(snapshot_id))[1] == b"state"
    assert split_snapshot(b"state without header") == (None, b"state without header")
    bootstrap = split_snapshot(bootstrap_checkpoint(ONE))
    assert bootstrap[0] is not None and bootstrap[0].voters == ONE and bootstrap[1] == b""


def test_directory_ids_go_on_the_wire_as_uuids():
    text = "RtITmaKQTJe4OFefbV5JFg"
    assert directory_id_of(directory_uuid(text)) == text
    assert directory_uuid(None) is None and directory_id_of(None) is None
