"""Protobuf schemas: a `.proto` text or a base64 `FileDescriptorProto` (what confluent-kafka's
`ProtobufSerializer` sends), validated by building it in a descriptor pool with its imports
(references, or protobuf's well-known types), printed back as `.proto` text for identity, and
checked with Confluent's documented Protobuf rules.

Incompatible (in either direction, as Confluent's checker): the package changed, a message
removed, a field's number given a type of another wire kind (the compatible groups: int32, uint32,
int64, uint64, bool; sint32, sint64; fixed32, sfixed32; fixed64, sfixed64; string, bytes and
messages of the same name), a field's message or enum type renamed, a singular field made
repeated or back (except length-delimited ones), a required field added or removed, a field
moved into an existing oneof, several existing fields moved into a new oneof.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from moldau.registry.errors import RegistryError
from moldau.registry.model import SchemaType
from moldau.registry.proto_text import SCALAR_TYPES, parse_proto_text
from moldau.registry.schemas import of_type

__all__ = ["ProtobufSchema", "parse_protobuf"]

F = descriptor_pb2.FieldDescriptorProto
_SCALAR_NAMES = {number: name for name, number in SCALAR_TYPES.items()}
_WIRE_GROUPS = (
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE},
)
_LENGTH_DELIMITED = {F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE}
_WELL_KNOWN = (
    "any", "api", "duration", "empty", "field_mask", "source_context", "struct", "timestamp",
    "type", "wrappers", "descriptor",
)  # fmt: skip


def _well_known_file(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """`google/protobuf/<x>.proto` as protobuf ships it (imports Confluent resolves itself)."""
    stem = name.removeprefix("google/protobuf/").removesuffix(".proto")
    if not name.startswith("google/protobuf/") or stem not in _WELL_KNOWN:
        return None
    module = importlib.import_module(f"google.protobuf.{stem}_pb2")
    file = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(file)
    return file


@dataclass(slots=True)
class ProtobufSchema:
    file: descriptor_pb2.FileDescriptorProto
    text: str
    pool: descriptor_pool.DescriptorPool  # the file and its imports, built
    dependencies: dict[str, descriptor_pb2.FileDescriptorProto] = field(default_factory=dict)
    schema_type: SchemaType = SchemaType.PROTOBUF

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> str:
        return self.text

    def serialized(self) -> str:
        """The base64 `FileDescriptorProto` (`format=serialized`)."""
        return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode()

    def read_errors(self, writer: Any) -> list[str]:
        assert isinstance(writer, ProtobufSchema)
        return _compare(self.file, writer.file)


def parse_protobuf(text: str, references: Sequence[Any]) -> ProtobufSchema:
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for reference in of_type(references, SchemaType.PROTOBUF):
        files[reference.name] = _file_of(reference.schema.text, reference.name, files)
    file = _file_of(text, "schema.proto", files)
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto: descriptor_pb2.FileDescriptorProto) -> None:
        if proto.name in added:
            return
        for dependency in proto.dependency:
            known = files.get(dependency) or _well_known_file(dependency)
            if known is None:
                raise RegistryError.invalid_schema(f"import {dependency!r} has no reference")
            files.setdefault(dependency, known)
            add(known)
        try:
            pool.Add(proto)
        except (TypeError, ValueError) as error:
            raise RegistryError.invalid_schema(f"{proto.name}: {error}") from None
        added.add(proto.name)

    add(file)
    try:
        pool.FindFileByName(file.name)
    except (KeyError, TypeError) as error:
        raise RegistryError.invalid_schema(str(error)) from None
    return ProtobufSchema(file=file, text=print_proto(file), pool=pool, dependencies=files)


def _file_of(
    text: str, name: str, known: dict[str, descriptor_pb2.FileDescriptorProto]
) -> descriptor_pb2.FileDescriptorProto:
    stripped = text.strip()
    if stripped and not any(c in stripped for c in " \n{;"):
        try:
            raw = base64.b64decode(stripped, validate=True)
            file = descriptor_pb2.FileDescriptorProto.FromString(raw)
        except (binascii.Error, DecodeError, ValueError):
            pass
        else:
            file.name = name
            return file
    kinds: dict[str, str] = {}
    for dependency in list(known.values()) + [
        f for f in (_well_known_file(d) for d in _imports(text)) if f is not None
    ]:
        _collect_kinds(dependency, kinds)
    try:
        return parse_proto_text(text, name=name, known_types=kinds)
    except (ValueError, RecursionError) as error:
        raise RegistryError.invalid_schema(f"{name}: {error}") from None


def _imports(text: str) -> list[str]:
    """The files a `.proto` text imports (to resolve well-known types before parsing)."""
    return [
        line.split('"')[1]
        for line in text.splitlines()
        if line.strip().startswith("import") and '"' in line
    ]


def _collect_kinds(file: descriptor_pb2.FileDescriptorProto, kinds: dict[str, str]) -> None:
    def walk(messages: Any, enums: Any, scope: str) -> None:
        for message in messages:
            kinds[f"{scope}.{message.name}"] = "message"
            walk(message.nested_type, message.enum_type, f"{scope}.{message.name}")
        for enum in enums:
            kinds[f"{scope}.{enum.name}"] = "enum"

    walk(file.message_type, file.enum_type, f".{file.package}" if file.package else "")


# --- printing ------------------------------------------------------------------------------


def print_proto(file: descriptor_pb2.FileDescriptorProto) -> str:
    syntax = file.syntax or "proto2"
    lines = [f'syntax = "{syntax}";']
    if file.package:
        lines.append(f"package {file.package};")
    for index, dependency in enumerate(file.dependency):
        public = "public " if index in file.public_dependency else ""
        lines.append(f'import {public}"{dependency}";')
    for option, value in file.options.ListFields():
        lines.append(f"option {option.name} = {_option_value(value)};")
    for message in file.message_type:
        _print_message(message, lines, "", syntax)
    for enum in file.enum_type:
        _print_enum(enum, lines, "")
    for service in file.service:
        lines.append(f"service {service.name} {{")
        for method in service.method:
            client = "stream " if method.client_streaming else ""
            server = "stream " if method.server_streaming else ""
            lines.append(
                f"  rpc {method.name}({client}{method.input_type}) "
                f"returns ({server}{method.output_type});"
            )
        lines.append("}")
    return "\n".join(lines) + "\n"


def _option_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def _type_of(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return field.type_name if field.type_name else _SCALAR_NAMES.get(field.type, "bytes")


def _print_message(
    message: descriptor_pb2.DescriptorProto, lines: list[str], indent: str, syntax: str
) -> None:
    lines.append(f"{indent}message {message.name} {{")
    inner = indent + "  "
    entries = {nested.name: nested for nested in message.nested_type if nested.options.map_entry}
    real_oneofs = {
        f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional
    }
    printed_oneofs: set[int] = set()
    for item in message.field:
        if item.HasField("oneof_index") and item.oneof_index in real_oneofs:
            if item.oneof_index in printed_oneofs:
                continue
            printed_oneofs.add(item.oneof_index)
            lines.append(f"{inner}oneof {message.oneof_decl[item.oneof_index].name} {{")
            for member in message.field:
                if member.HasField("oneof_index") and member.oneof_index == item.oneof_index:
                    lines.append(f"{inner}  {_field_line(member, entries, syntax, oneof=True)}")
            lines.append(f"{inner}}}")
        else:
            lines.append(inner + _field_line(item, entries, syntax, oneof=False))
    for nested in message.nested_type:
        if not nested.options.map_entry:
            _print_message(nested, lines, inner, syntax)
    for enum in message.enum_type:
        _print_enum(enum, lines, inner)
    for reserved in message.reserved_range:
        end = "max" if reserved.end >= 536870912 else str(reserved.end - 1)
        span = str(reserved.start) if end == str(reserved.start) else f"{reserved.start} to {end}"
        lines.append(f"{inner}reserved {span};")
    if message.reserved_name:
        names = ", ".join(f'"{name}"' for name in message.reserved_name)
        lines.append(f"{inner}reserved {names};")
    lines.append(f"{indent}}}")


def _field_line(
    item: descriptor_pb2.FieldDescriptorProto,
    entries: dict[str, descriptor_pb2.DescriptorProto],
    syntax: str,
    *,
    oneof: bool,
) -> str:
    entry_name = item.type_name.rsplit(".", 1)[-1]
    if item.label == F.LABEL_REPEATED and entry_name in entries and item.type_name:
        key, value = entries[entry_name].field[0], entries[entry_name].field[1]
        kind = f"map<{_type_of(key)}, {_type_of(value)}>"
    else:
        label = ""
        if not oneof:
            if item.label == F.LABEL_REPEATED:
                label = "repeated "
            elif item.label == F.LABEL_REQUIRED:
                label = "required "
            elif syntax == "proto2" or item.proto3_optional:
                label = "optional "
        kind = label + _type_of(item)
    options = []
    if item.HasField("default_value"):
        quoted = item.type in (F.TYPE_STRING, F.TYPE_BYTES)
        options.append(
            f"default = {_option_value(item.default_value) if quoted else item.default_value}"
        )
    if item.options.HasField("packed"):
        options.append(f"packed = {_option_value(item.options.packed)}")
    if item.options.deprecated:
        options.append("deprecated = true")
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{kind} {item.name} = {item.number}{suffix};"


def _print_enum(enum: descriptor_pb2.EnumDescriptorProto, lines: list[str], indent: str) -> None:
    lines.append(f"{indent}enum {enum.name} {{")
    for value in enum.value:
        lines.append(f"{indent}  {value.name} = {value.number};")
    for reserved in enum.reserved_range:
        span = (
            str(reserved.start)
            if reserved.end == reserved.start
            else f"{reserved.start} to {reserved.end}"
        )
        lines.append(f"{indent}  reserved {span};")
    lines.append(f"{indent}}}")


# --- compatibility -------------------------------------------------------------------------


def _messages(
    file: descriptor_pb2.FileDescriptorProto,
) -> dict[str, descriptor_pb2.DescriptorProto]:
    found: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(messages: Any, scope: str) -> None:
        for message in messages:
            name = f"{scope}.{message.name}" if scope else message.name
            if not message.options.map_entry:
                found[name] = message
            walk(message.nested_type, name)

    walk(file.message_type, file.package)
    return found


def _wire_compatible(reader: int, writer: int) -> bool:
    return reader == writer or any(reader in group and writer in group for group in _WIRE_GROUPS)


def _compare(
    reader: descriptor_pb2.FileDescriptorProto, writer: descriptor_pb2.FileDescriptorProto
) -> list[str]:
    errors: list[str] = []
    if reader.package != writer.package:
        errors.append(f"PACKAGE_CHANGED: {writer.package!r} to {reader.package!r}")
    reader_messages = _messages(reader)
    for name, written in _messages(writer).items():
        read = reader_messages.get(name)
        if read is None:
            errors.append(f"MESSAGE_REMOVED: {name}")
            continue
        _compare_message(name, read, written, errors)
    return errors


def _compare_message(
    name: str,
    reader: descriptor_pb2.DescriptorProto,
    writer: descriptor_pb2.DescriptorProto,
    errors: list[str],
) -> None:
    reader_fields = {f.number: f for f in reader.field}
    writer_fields = {f.number: f for f in writer.field}

    def real_oneof(message: descriptor_pb2.DescriptorProto, item: Any) -> str | None:
        if not item.HasField("oneof_index") or item.proto3_optional:
            return None
        return str(message.oneof_decl[item.oneof_index].name)

    moved_into_new: dict[str, int] = {}
    writer_oneofs = {real_oneof(writer, f) for f in writer.field} - {None}
    for number, written in writer_fields.items():
        read = reader_fields.get(number)
        where = f"{name}.{written.name} ({number})"
        if read is None:
            if written.label == F.LABEL_REQUIRED:
                errors.append(f"REQUIRED_FIELD_REMOVED: {where}")
            continue
        if not _wire_compatible(read.type, written.type):
            errors.append(
                f"FIELD_SCALAR_KIND_CHANGED: {where} from {_type_of(written)} to {_type_of(read)}"
            )
        elif read.type_name and written.type_name and read.type_name != written.type_name:
            errors.append(
                f"FIELD_NAMED_TYPE_CHANGED: {where} from {written.type_name} to {read.type_name}"
            )
        repeated = (read.label == F.LABEL_REPEATED, written.label == F.LABEL_REPEATED)
        if repeated[0] != repeated[1] and read.type not in _LENGTH_DELIMITED:
            errors.append(f"FIELD_LABEL_CHANGED: {where}")
        if (read.label == F.LABEL_REQUIRED) != (written.label == F.LABEL_REQUIRED):
            errors.append(f"REQUIRED_FIELD_CHANGED: {where}")
        reader_oneof, writer_oneof = real_oneof(reader, read), real_oneof(writer, written)
        if reader_oneof is not None and writer_oneof is None:
            if reader_oneof in writer_oneofs:
                errors.append(f"FIELD_MOVED_TO_EXISTING_ONEOF: {where} into {reader_oneof}")
            else:
                moved_into_new[reader_oneof] = moved_into_new.get(reader_oneof, 0) + 1
    for number, read in reader_fields.items():
        if number not in writer_fields and read.label == F.LABEL_REQUIRED:
            errors.append(f"REQUIRED_FIELD_ADDED: {name}.{read.name} ({number})")
    for oneof, count in moved_into_new.items():
        if count > 1:
            errors.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {name}.{oneof}")
