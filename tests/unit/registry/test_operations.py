"""The registry core: commands return `_schemas` records, and only replaying them changes the
state, as on every node reading the topic."""

from __future__ import annotations

import json

import pytest

from moldau.registry.errors import RegistryError
from moldau.registry.model import Compatibility, SchemaReference, SchemaType
from moldau.registry.operations import Change, Operations, SchemaRequest
from moldau.registry.records import decode_key
from moldau.registry.state import RegistryState, parse_version

USER_V1 = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
)
USER_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "int", "default": 0},
        ],
    }
)
USER_BREAKING = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]}
)


def avro(text: str, **fields: object) -> SchemaRequest:
    return SchemaRequest(schema_type=SchemaType.AVRO, text=text, **fields)  # type: ignore[arg-type]


class Registry:
    """Operations over a state that replays every record they return, as the writer does."""

    def __init__(self) -> None:
        self.state = RegistryState()
        self.operations = Operations(self.state)
        self.log: list[tuple[bytes, bytes | None]] = []

    def apply(self, change: Change) -> object:
        for record in change.records:
            self.log.append((record.key, record.value))
            self.state.replay(record.key, record.value)
        return change.result

    def register(self, subject: str, request: SchemaRequest) -> int:
        result = self.apply(self.operations.register(subject, request))
        assert isinstance(result, dict)
        return int(result["id"])


def test_the_same_schema_gets_one_id_across_subjects_and_whitespace() -> None:
    registry = Registry()
    first = registry.register("a-value", avro(USER_V1))
    again = registry.register("a-value", avro(json.dumps(json.loads(USER_V1), indent=4)))
    other = registry.register("b-value", avro(USER_V1))
    assert first == again == other == 1
    assert [entry.version for entry in registry.state.versions("a-value")] == [1]
    assert registry.register("a-value", avro(USER_V2)) == 2
    assert [entry.version for entry in registry.state.versions("a-value")] == [1, 2]


def test_an_incompatible_schema_is_refused_with_409_and_writes_nothing() -> None:
    registry = Registry()
    registry.register("s", avro(USER_V1))
    with pytest.raises(RegistryError) as refused:
        registry.operations.register("s", avro(USER_BREAKING))
    assert (refused.value.http_status, refused.value.error_code) == (409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.value.message
    registry.apply(registry.operations.set_compatibility("s", "none"))
    assert registry.register("s", avro(USER_BREAKING)) == 2


def test_invalid_schemas_are_42201() -> None:
    registry = Registry()
    for text in ("{not json", '{"type": "record", "name": "R"}', '"nope"', "[" * 5000 + "]" * 5000):
        with pytest.raises(RegistryError) as refused:
            registry.operations.register("s", avro(text))
        assert refused.value.error_code == 42201, text[:20]


def test_the_state_rebuilt_from_the_records_is_the_same() -> None:
    registry = Registry()
    registry.register("s", avro(USER_V1))
    registry.register("s", avro(USER_V2))
    registry.register("t", avro(USER_V2))
    registry.apply(registry.operations.set_compatibility(None, "FULL"))
    registry.apply(registry.operations.delete_version("s", 1, permanent=False))
    rebuilt = RegistryState()
    for key, value in registry.log:
        rebuilt.replay(key, value)
    rebuilt.replay(b"not json", b"x")  # a record this registry cannot read is skipped
    rebuilt.replay(b'{"keytype":"FUTURE","magic":7}', b"{}")
    assert rebuilt.subjects == registry.state.subjects
    assert rebuilt.max_id == 2
    assert rebuilt.compatibility("s") is Compatibility.FULL


def test_records_are_written_as_confluents_registry_writes_them() -> None:
    registry = Registry()
    registry.register("s", avro(USER_V1))
    registry.apply(registry.operations.set_compatibility("s", "forward"))
    key, value = registry.log[0]
    assert key == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert json.loads(value or b"") == {
        "subject": "s",
        "version": 1,
        "id": 1,
        "schema": USER_V1.replace(" ", ""),
        "deleted": False,
    }
    assert registry.log[1] == (
        b'{"keytype":"CONFIG","subject":"s","magic":0}',
        b'{"compatibilityLevel":"FORWARD"}',
    )


def test_soft_then_hard_deletes_follow_confluents_order() -> None:
    registry = Registry()
    registry.register("s", avro(USER_V1))
    registry.register("s", avro(USER_V2))
    with pytest.raises(RegistryError) as refused:
        registry.operations.delete_subject("s", permanent=True)
    assert refused.value.error_code == 40405
    with pytest.raises(RegistryError) as refused:
        registry.operations.delete_version("s", 1, permanent=True)
    assert refused.value.error_code == 40407
    assert registry.apply(registry.operations.delete_subject("s", permanent=False)) == [1, 2]
    assert registry.state.subject_names() == []
    assert registry.state.subject_names(deleted=True) == ["s"]
    kinds = [decode_key(key)["keytype"] for key, _ in registry.log[2:]]  # type: ignore[index]
    assert kinds == ["SCHEMA", "SCHEMA", "DELETE_SUBJECT"]
    with pytest.raises(RegistryError) as refused:
        registry.operations.delete_subject("s", permanent=False)
    assert refused.value.error_code == 40404
    assert registry.apply(registry.operations.delete_subject("s", permanent=True)) == [1, 2]
    assert registry.state.subject_names(deleted=True) == []
    assert registry.state.schema(2).text  # ids stay readable; they are never reused
    assert registry.register("s", avro(USER_BREAKING)) == 3


def test_references_resolve_and_a_referenced_version_cannot_be_deleted() -> None:
    registry = Registry()
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "x",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    registry.register("address", avro(address))
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "x",
            "fields": [{"name": "home", "type": "x.Address"}],
        }
    )
    reference = SchemaReference(name="x.Address", subject="address", version=1)
    person_id = registry.register("person", avro(person, references=(reference,)))
    assert registry.state.referenced_by("address", 1) == [person_id]
    with pytest.raises(RegistryError) as refused:
        registry.operations.delete_version("address", 1, permanent=False)
    assert refused.value.error_code == 42206
    missing = SchemaReference(name="x.Address", subject="address", version=9)
    with pytest.raises(RegistryError) as refused:
        registry.operations.register("other", avro(person, references=(missing,)))
    assert refused.value.error_code == 42201


def test_modes_and_levels_are_validated() -> None:
    registry = Registry()
    with pytest.raises(RegistryError) as refused:
        registry.operations.set_compatibility(None, "SIDEWAYS")
    assert refused.value.error_code == 42203
    with pytest.raises(RegistryError) as refused:
        registry.operations.set_mode(None, "WRITEONLY", force=False)
    assert refused.value.error_code == 42204
    registry.apply(registry.operations.set_mode(None, "READONLY", force=False))
    with pytest.raises(RegistryError) as refused:
        registry.operations.register("s", avro(USER_V1))
    assert refused.value.error_code == 42205
    registry.apply(registry.operations.set_mode(None, "IMPORT", force=False))
    assert registry.register("s", avro(USER_V1, schema_id=42, version=7)) == 42
    assert registry.state.version("s", 7).schema.schema_id == 42


@pytest.mark.parametrize(
    ("text", "expected"), [("latest", None), ("-1", None), ("1", 1), ("2147483647", 2147483647)]
)
def test_versions_in_paths(text: str, expected: int | None) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "2147483648", "one", ""])
def test_invalid_versions_are_42202(text: str) -> None:
    with pytest.raises(RegistryError) as refused:
        parse_version(text)
    assert refused.value.error_code == 42202
