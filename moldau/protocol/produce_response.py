"""A hand-written encoder of Produce responses (v3-13): the hot path skips kio's generic writer.

Takes the dict a Produce handler returns (the newest version's field names, as for `adapter`)
and writes the body of the version asked for. A field it does not know makes it return None, so
the caller falls back to the generic encoder and nothing is silently dropped.

Layout: responses array of (name string | topic_id uuid (v13+), partition_responses array of
(index int32, error_code int16, base_offset int64, log_append_time int64, log_start_offset int64
(v5+), record_errors array of (batch_index int32, batch_index_error_message nullable string) and
error_message nullable string (v8+), tag 0 current_leader (leader_id int32, leader_epoch int32)
(v10+))), throttle_time_ms int32, tag 0 node_endpoints array of (node_id int32, host string,
port int32, rack nullable string) (v10+). v9+ is flexible: compact arrays and strings, tagged
fields after every struct.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from moldau.protocol.wire import tagged_fields, uvarint

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_PARTITION_HEAD: Final = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
_I64: Final = struct.Struct(">q")
_LEADER: Final = struct.Struct(">ii")
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)

_TOP_FIELDS: Final = frozenset({"responses", "throttle_time", "node_endpoints"})
_TOPIC_FIELDS: Final = frozenset({"name", "topic_id", "partition_responses"})
_PARTITION_FIELDS: Final = frozenset(
    {
        "index",
        "error_code",
        "base_offset",
        "log_append_time",
        "log_start_offset",
        "record_errors",
        "error_message",
        "current_leader",
    }
)


class _Unknown(Exception):
    """The data holds something this encoder does not write."""


def _string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = value.encode()
    return (uvarint(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _array_length(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _I32.pack(count)


def _millis(value: Any) -> int:
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    return int(value)


def _field(data: Mapping[str, Any], name: str, default: Any) -> Any:
    value = data.get(name, default)
    return default if value is None else value


def _check(data: Any, known: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(data, Mapping) or not known.issuperset(data):
        raise _Unknown
    return data


# What a Produce handler answers for a partition that took its records (or failed with only an
# error code): all ints, so the partition is one pack plus the version's fixed tail of empty
# record_errors, null error_message and no tagged fields.
_COMMON_FIELDS: Final = frozenset(
    {"index", "error_code", "base_offset", "log_append_time", "log_start_offset"}
)
_COMMON_HEAD: Final = struct.Struct(">ihqqq")
_COMMON_TAIL: Final = {
    **dict.fromkeys(range(5, 8), b""),
    8: _I32.pack(0) + _I16.pack(-1),
    **dict.fromkeys(range(9, 14), b"\x01\x00\x00"),
}


def _partition(out: bytearray, data: Mapping[str, Any], version: int, flexible: bool) -> None:
    if version >= 5 and data.keys() == _COMMON_FIELDS:
        try:
            out += _COMMON_HEAD.pack(
                data["index"],
                data["error_code"],
                data["base_offset"],
                data["log_append_time"],
                data["log_start_offset"],
            )
        except struct.error:  # not all ints (a datetime append time): the general path below
            pass
        else:
            out += _COMMON_TAIL[version]
            return
    out += _PARTITION_HEAD.pack(
        int(_field(data, "index", 0)),
        int(_field(data, "error_code", 0)),
        int(_field(data, "base_offset", 0)),
        _millis(_field(data, "log_append_time", -1)),
    )
    if version >= 5:
        out += _I64.pack(int(_field(data, "log_start_offset", -1)))
    if version >= 8:
        record_errors: Sequence[Any] = _field(data, "record_errors", ())
        out += _array_length(len(record_errors), flexible)
        for record_error in record_errors:
            error = _check(record_error, frozenset({"batch_index", "batch_index_error_message"}))
            out += _I32.pack(int(_field(error, "batch_index", 0)))
            out += _string(error.get("batch_index_error_message"), flexible)
            if flexible:
                out += b"\x00"
        out += _string(data.get("error_message"), flexible)
    if flexible:
        leader = data.get("current_leader")
        if leader is not None and version >= 10:
            leader = _check(leader, frozenset({"leader_id", "leader_epoch"}))
            leader_id = int(_field(leader, "leader_id", -1))
            leader_epoch = int(_field(leader, "leader_epoch", -1))
            if (leader_id, leader_epoch) != (-1, -1):
                out += tagged_fields([(0, _LEADER.pack(leader_id, leader_epoch) + b"\x00")])
                return
        out += b"\x00"


def _node_endpoints(endpoints: Sequence[Any]) -> bytes:
    out = bytearray(uvarint(len(endpoints) + 1))
    for endpoint in endpoints:
        node = _check(endpoint, frozenset({"node_id", "host", "port", "rack"}))
        out += _I32.pack(int(_field(node, "node_id", 0)))
        out += _string(str(_field(node, "host", "")), True)
        out += _I32.pack(int(_field(node, "port", 0)))
        out += _string(node.get("rack"), True)
        out += b"\x00"
    return bytes(out)


def encode_produce_response(version: int, data: Mapping[str, Any]) -> bytes | None:
    """The body of a Produce response (no size prefix or header), or None if `data` holds a
    field this encoder does not know (encode it with the generic adapter then)."""
    if not 3 <= version <= 13:
        return None
    flexible = version >= 9
    try:
        top = _check(data, _TOP_FIELDS)
        responses: Sequence[Any] = _field(top, "responses", ())
        out = bytearray(_array_length(len(responses), flexible))
        for topic_data in responses:
            topic = _check(topic_data, _TOPIC_FIELDS)
            if version >= 13:
                topic_id = topic.get("topic_id")
                out += (topic_id if isinstance(topic_id, uuid.UUID) else uuid.UUID(int=0)).bytes
            else:
                out += _string(str(_field(topic, "name", "")), flexible)
            partitions: Sequence[Any] = _field(topic, "partition_responses", ())
            out += _array_length(len(partitions), flexible)
            for partition in partitions:
                _partition(out, _check(partition, _PARTITION_FIELDS), version, flexible)
            if flexible:
                out += b"\x00"
        out += _I32.pack(_millis(_field(top, "throttle_time", 0)))
        if flexible:
            endpoints: Sequence[Any] = _field(top, "node_endpoints", ())
            if endpoints and version >= 10:
                out += tagged_fields([(0, _node_endpoints(endpoints))])
            else:
                out += b"\x00"
    except (_Unknown, TypeError, ValueError):
        return None
    return bytes(out)
