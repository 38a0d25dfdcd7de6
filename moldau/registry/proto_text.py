"""A `.proto` file's text into a `FileDescriptorProto` (proto2 and proto3: package, imports,
options, messages with nested types, fields, maps, oneofs, reserved ranges and names, enums,
services). Type names are resolved by protobuf's scoping rules against this file and the files it
imports (`known_types`: full name -> "message" or "enum"). Raises ValueError with a line number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from google.protobuf import descriptor_pb2

__all__ = ["SCALAR_TYPES", "parse_proto_text"]

F = descriptor_pb2.FieldDescriptorProto
SCALAR_TYPES = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64, "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}  # fmt: skip
_LABELS = {"optional": F.LABEL_OPTIONAL, "required": F.LABEL_REQUIRED, "repeated": F.LABEL_REPEATED}
_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')"""
    r"""|(?P<word>[A-Za-z_.][\w.]*)|(?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan))"""
    r"""|(?P<symbol>[{}\[\]()<>=;,:])""",
    re.S,
)
MAX_NESTING = 64


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, int]] = []
        position, line = 0, 1
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None:
                raise ValueError(f"line {line}: unexpected character {text[position]!r}")
            if match.lastgroup is not None:
                self.items.append((match.group(), line))
            line += match.group().count("\n")
            position = match.end()
        self.index = 0

    def peek(self) -> str:
        return self.items[self.index][0] if self.index < len(self.items) else ""

    def line(self) -> int:
        return self.items[min(self.index, len(self.items) - 1)][1] if self.items else 1

    def take(self, expected: str | None = None) -> str:
        if self.index >= len(self.items):
            raise ValueError(f"line {self.line()}: unexpected end of file")
        token = self.items[self.index][0]
        if expected is not None and token != expected:
            raise ValueError(f"line {self.line()}: expected {expected!r}, found {token!r}")
        self.index += 1
        return token

    def accept(self, token: str) -> bool:
        if self.peek() == token:
            self.index += 1
            return True
        return False


def _unquote(token: str) -> str:
    if not token or token[0] not in "\"'":
        raise ValueError(f"expected a string, found {token!r}")
    return bytes(token[1:-1], "utf-8").decode("unicode_escape")


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _Tokens(text)
        self.file = descriptor_pb2.FileDescriptorProto()
        # (field, scope) whose type names are resolved once every type is known
        self.pending: list[tuple[descriptor_pb2.FieldDescriptorProto, str, str]] = []
        self.depth = 0

    def parse(self) -> descriptor_pb2.FileDescriptorProto:
        tokens, file = self.tokens, self.file
        file.syntax = "proto2"
        while tokens.peek():
            word = tokens.take()
            if word == "syntax":
                tokens.take("=")
                file.syntax = _unquote(tokens.take())
                tokens.take(";")
            elif word == "edition":
                raise ValueError(f"line {tokens.line()}: protobuf editions are not supported")
            elif word == "package":
                file.package = tokens.take()
                tokens.take(";")
            elif word == "import":
                kind = tokens.peek()
                if kind in ("public", "weak"):
                    tokens.take()
                file.dependency.append(_unquote(tokens.take()))
                if kind == "public":
                    file.public_dependency.append(len(file.dependency) - 1)
                tokens.take(";")
            elif word == "option":
                self._skip_option()
            elif word == "message":
                self._message(file.message_type.add(), self._prefix())
            elif word == "enum":
                self._enum(file.enum_type.add())
            elif word == "service":
                self._service()
            elif word == "extend":
                self._skip_block()
            elif word != ";":
                raise ValueError(f"line {tokens.line()}: unexpected {word!r}")
        return file

    def _prefix(self) -> str:
        return f".{self.file.package}" if self.file.package else ""

    def _skip_option(self) -> None:
        """`option name = value;` (options do not take part in compatibility: skipped)."""
        while self.tokens.peek() not in (";", ""):
            if self.tokens.take() == "{":
                self._skip_braces()
        self.tokens.take(";")

    def _skip_braces(self) -> None:
        depth = 1
        while depth:
            token = self.tokens.take()
            depth += {"{": 1, "}": -1}.get(token, 0)

    def _skip_block(self) -> None:
        while self.tokens.take() != "{":
            pass
        self._skip_braces()

    def _field_options(self, field: descriptor_pb2.FieldDescriptorProto) -> None:
        if not self.tokens.accept("["):
            return
        while True:
            name = self.tokens.take()
            if name == "(":
                name = "(" + self.tokens.take() + self.tokens.take(")")
                while self.tokens.peek().startswith("."):
                    name += self.tokens.take()
            self.tokens.take("=")
            value = self.tokens.take()
            if value == "{":
                self._skip_braces()
            elif name == "default":
                field.default_value = _unquote(value) if value[0] in "\"'" else value
            elif name == "packed":
                field.options.packed = value == "true"
            elif name == "json_name":
                field.json_name = _unquote(value)
            elif name == "deprecated":
                field.options.deprecated = value == "true"
            if not self.tokens.accept(","):
                break
        self.tokens.take("]")

    def _message(self, message: descriptor_pb2.DescriptorProto, scope: str) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ValueError(f"line {self.tokens.line()}: messages nested too deeply")
        message.name = self.tokens.take()
        scope = f"{scope}.{message.name}"
        self.tokens.take("{")
        while not self.tokens.accept("}"):
            self._message_item(message, scope, oneof_index=None)
        self.depth -= 1

    def _message_item(
        self, message: descriptor_pb2.DescriptorProto, scope: str, *, oneof_index: int | None
    ) -> None:
        tokens = self.tokens
        word = tokens.take()
        if word == ";":
            return
        if word == "option":
            self._skip_option()
        elif word == "message":
            self._message(message.nested_type.add(), scope)
        elif word == "enum":
            self._enum(message.enum_type.add())
        elif word == "extend":
            self._skip_block()
        elif word == "extensions":
            while tokens.take() != ";":
                pass
        elif word == "reserved":
            self._reserved(message)
        elif word == "oneof":
            oneof = message.oneof_decl.add()
            oneof.name = tokens.take()
            tokens.take("{")
            index = len(message.oneof_decl) - 1
            while not tokens.accept("}"):
                self._message_item(message, scope, oneof_index=index)
        elif word == "map":
            self._map_field(message, scope)
        else:
            field = message.field.add()
            if word in _LABELS:
                field.label = _LABELS[word]
                if word == "optional" and self.file.syntax == "proto3":
                    field.proto3_optional = True
                word = tokens.take()
            elif word == "group":
                raise ValueError(f"line {tokens.line()}: groups are not supported")
            else:
                field.label = F.LABEL_OPTIONAL
            self._typed(field, word, scope)
            field.name = tokens.take()
            tokens.take("=")
            field.number = int(tokens.take(), 0)
            self._field_options(field)
            tokens.take(";")
            if oneof_index is not None:
                field.oneof_index = oneof_index
            elif field.proto3_optional:
                synthetic = message.oneof_decl.add()
                synthetic.name = f"_{field.name}"
                field.oneof_index = len(message.oneof_decl) - 1

    def _typed(self, field: descriptor_pb2.FieldDescriptorProto, name: str, scope: str) -> None:
        if name in SCALAR_TYPES:
            field.type = SCALAR_TYPES[name]
        else:
            self.pending.append((field, name, scope))

    def _map_field(self, message: descriptor_pb2.DescriptorProto, scope: str) -> None:
        tokens = self.tokens
        tokens.take("<")
        key_type = tokens.take()
        tokens.take(",")
        value_type = tokens.take()
        tokens.take(">")
        field = message.field.add()
        field.name = tokens.take()
        tokens.take("=")
        field.number = int(tokens.take(), 0)
        self._field_options(field)
        tokens.take(";")
        entry = message.nested_type.add()
        entry.name = "".join(part[:1].upper() + part[1:] for part in field.name.split("_"))
        entry.name += "Entry"
        entry.options.map_entry = True
        for number, (name, type_name) in enumerate((("key", key_type), ("value", value_type)), 1):
            part = entry.field.add()
            part.name, part.number, part.label = name, number, F.LABEL_OPTIONAL
            self._typed(part, type_name, f"{scope}.{entry.name}")
        field.label = F.LABEL_REPEATED
        field.type = F.TYPE_MESSAGE
        field.type_name = f"{scope}.{entry.name}"

    def _reserved(
        self, target: descriptor_pb2.DescriptorProto | descriptor_pb2.EnumDescriptorProto
    ) -> None:
        tokens = self.tokens
        while True:
            token = tokens.take()
            if token[0] in "\"'":
                target.reserved_name.append(_unquote(token))
            else:
                start = int(token, 0)
                end = start
                if tokens.accept("to"):
                    bound = tokens.take()
                    end = 536870911 if bound == "max" else int(bound, 0)
                reserved = target.reserved_range.add()
                reserved.start = start
                # messages' ranges are end-exclusive, enums' inclusive
                is_message = isinstance(target, descriptor_pb2.DescriptorProto)
                reserved.end = end + 1 if is_message else end
            if not tokens.accept(","):
                break
        tokens.take(";")

    def _enum(self, enum: descriptor_pb2.EnumDescriptorProto) -> None:
        tokens = self.tokens
        enum.name = tokens.take()
        tokens.take("{")
        while not tokens.accept("}"):
            word = tokens.take()
            if word == ";":
                continue
            if word == "option":
                self._skip_option()
            elif word == "reserved":
                self._reserved(enum)
            else:
                value = enum.value.add()
                value.name = word
                tokens.take("=")
                value.number = int(tokens.take(), 0)
                if tokens.accept("["):
                    while not tokens.accept("]"):
                        tokens.take()
                tokens.take(";")

    def _service(self) -> None:
        tokens = self.tokens
        service = self.file.service.add()
        service.name = tokens.take()
        tokens.take("{")
        while not tokens.accept("}"):
            word = tokens.take()
            if word == "option":
                self._skip_option()
            elif word == "rpc":
                method = service.method.add()
                method.name = tokens.take()
                tokens.take("(")
                method.client_streaming = tokens.accept("stream")
                method.input_type = tokens.take()
                tokens.take(")")
                tokens.take("returns")
                tokens.take("(")
                method.server_streaming = tokens.accept("stream")
                method.output_type = tokens.take()
                tokens.take(")")
                if tokens.accept("{"):
                    self._skip_braces()
                else:
                    tokens.take(";")
            elif word != ";":
                raise ValueError(f"line {tokens.line()}: unexpected {word!r} in a service")

    def resolve(self, known_types: Mapping[str, str]) -> None:
        kinds = dict(known_types)
        prefix = self._prefix()

        def collect(messages: object, enums: object, scope: str) -> None:
            for message in messages:  # type: ignore[attr-defined]
                kinds[f"{scope}.{message.name}"] = "message"
                collect(message.nested_type, message.enum_type, f"{scope}.{message.name}")
            for enum in enums:  # type: ignore[attr-defined]
                kinds[f"{scope}.{enum.name}"] = "enum"

        collect(self.file.message_type, self.file.enum_type, prefix)
        for field, name, scope in self.pending:
            full = _lookup(name, scope, kinds)
            if full is None:
                raise ValueError(f"unknown type {name!r} of field {field.name!r}")
            field.type_name = full
            field.type = F.TYPE_MESSAGE if kinds[full] == "message" else F.TYPE_ENUM
        for service in self.file.service:
            for method in service.method:
                for attribute in ("input_type", "output_type"):
                    name = getattr(method, attribute)
                    full = _lookup(name, prefix, kinds)
                    if full is None:
                        raise ValueError(f"unknown type {name!r} of rpc {method.name!r}")
                    setattr(method, attribute, full)


def _lookup(name: str, scope: str, kinds: Mapping[str, str]) -> str | None:
    """Protobuf's scoping: `.a.B` is absolute; otherwise the innermost scope outwards."""
    if name.startswith("."):
        return name if name in kinds else None
    first, _, rest = name.partition(".")
    prefixes = {key[:i] for key in kinds for i, c in enumerate(key) if c == "." and i}
    while True:
        candidate = f"{scope}.{first}"
        if candidate in kinds or candidate in prefixes:
            full = f"{candidate}.{rest}" if rest else candidate
            return full if full in kinds else None
        if not scope:
            return None
        scope = scope.rsplit(".", 1)[0] if "." in scope else ""


def parse_proto_text(
    text: str, *, name: str, known_types: Mapping[str, str]
) -> descriptor_pb2.FileDescriptorProto:
    parser = _Parser(text)
    try:
        file = parser.parse()
    except IndexError:
        raise ValueError("unexpected end of file") from None
    parser.resolve(known_types)
    file.name = name
    if file.syntax == "proto2":
        file.ClearField("syntax")
    return file
