"""Options for keys and values in the schema registry's wire format (`key.format`,
`value.format`, `schema.registry.url`, ...), parsed for the source and the sink.

Names follow what Confluent's clients and Flink's Kafka connector call them: `schema.registry.url`
(comma-separated), `schema.registry.basic.auth.user.info`, `<column>.format`, `<column>.subject`
(TopicNameStrategy, `<topic>-<column>`, by default), `<column>.schema.version`, and Spark's
`mode` (FAILFAST or PERMISSIVE) for records that cannot be decoded. moldau/spark/README.md lists
them with their meanings.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from moldau.registry.client import RegistryClient

__all__ = [
    "COLUMNS",
    "FramedColumn",
    "RecordFormat",
    "RegistryConnection",
    "RegistryOptions",
    "parse_registry_options",
]

COLUMNS: Final = ("key", "value")
DEFAULT_RECORD_NAME: Final = "topLevelRecord"  # Spark's to_avro and Avro data source call it so
_PREFIX: Final = "schema.registry."
_CONNECTION_OPTIONS: Final = (
    "url",
    "basic.auth.user.info",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
)


class RecordFormat(enum.StrEnum):
    BINARY = "binary"  # the bytes as they are (Spark's Kafka source and sink)
    AVRO = "avro"
    JSON = "json"  # JSON Schema


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryConnection:
    """How to reach the registry; picklable (the TLS context is built where it is used)."""

    url: str
    user_info: str | None = None
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None

    def client(self) -> RegistryClient:
        context = None
        if self.ca_location or self.certificate_location:
            context = ssl.create_default_context(cafile=self.ca_location)
            if self.certificate_location:
                context.load_cert_chain(self.certificate_location, self.key_location)
        return RegistryClient(self.url, user_info=self.user_info, ssl_context=context)


@dataclass(frozen=True, slots=True, kw_only=True)
class FramedColumn:
    """`key` or `value` in the registry's wire format."""

    column: str
    format: RecordFormat
    subject: str
    version: str = "latest"  # the source's reader schema: "latest" or a version number
    record_name: str = DEFAULT_RECORD_NAME  # the sink's Avro record
    record_namespace: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryOptions:
    connection: RegistryConnection
    columns: tuple[FramedColumn, ...]
    permissive: bool = False  # source: undecodable records give null and their bytes


def parse_registry_options(
    options: Mapping[str, str], *, topic: str | None, sink: bool
) -> RegistryOptions | None:
    """The registry options of a lower-cased options map (None: keys and values are bytes).
    `topic`: the one topic read or written, which names subjects by default (None: several,
    a pattern or a topic column)."""
    columns = []
    for name in COLUMNS:
        column = _column(options, name, topic=topic, sink=sink)
        if column is not None:
            columns.append(column)
    mode = options.get("mode", "FAILFAST").strip().upper()
    if sink and "mode" in options:
        raise ValueError(
            "option 'mode' applies to reading (the sink fails on what it cannot encode)"
        )
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise ValueError(f"option 'mode' must be FAILFAST or PERMISSIVE, got {options['mode']!r}")
    url = options.get(_PREFIX + "url", "").strip()
    if not columns:
        given = [k for k in options if k.startswith(_PREFIX)] + (
            ["mode"] if "mode" in options else []
        )
        if given:
            raise ValueError(
                f"option '{given[0]}' needs 'key.format' or 'value.format' set to avro or json"
            )
        return None
    if not url:
        raise ValueError(
            f"option '{columns[0].column}.format' needs 'schema.registry.url' (the registry's "
            "http[s]://HOST:PORT, comma-separated for several)"
        )
    user_info = options.get(_PREFIX + "basic.auth.user.info")
    if user_info is not None and ":" not in user_info:
        raise ValueError("option 'schema.registry.basic.auth.user.info' is USER:PASSWORD")
    unknown = [
        k
        for k in options
        if k.startswith(_PREFIX) and k.removeprefix(_PREFIX) not in _CONNECTION_OPTIONS
    ]
    if unknown:
        raise ValueError(
            f"option '{unknown[0]}' is not known; the registry options are "
            + ", ".join(_PREFIX + name for name in _CONNECTION_OPTIONS)
        )
    connection = RegistryConnection(
        url=url,
        user_info=user_info,
        ca_location=options.get(_PREFIX + "ssl.ca.location"),
        certificate_location=options.get(_PREFIX + "ssl.certificate.location"),
        key_location=options.get(_PREFIX + "ssl.key.location"),
    )
    connection.client()  # (ValueError: not an http[s]://HOST:PORT address; OSError: files)
    return RegistryOptions(
        connection=connection, columns=tuple(columns), permissive=mode == "PERMISSIVE"
    )


def _column(
    options: Mapping[str, str], name: str, *, topic: str | None, sink: bool
) -> FramedColumn | None:
    text = options.get(f"{name}.format", RecordFormat.BINARY.value).strip().lower()
    try:
        record_format = RecordFormat(text)
    except ValueError:
        raise ValueError(
            f"option '{name}.format' must be binary, avro or json (JSON Schema), got {text!r}"
        ) from None
    own = [
        f"{name}.{suffix}"
        for suffix in ("subject", "schema.version", "recordname", "recordnamespace")
        if f"{name}.{suffix}" in options
    ]
    if record_format is RecordFormat.BINARY:
        if own:
            raise ValueError(f"option '{own[0]}' needs '{name}.format' set to avro or json")
        return None
    if sink and record_format is not RecordFormat.AVRO:
        raise ValueError(f"option '{name}.format': the sink encodes avro only (or binary)")
    for option, allowed in (
        (f"{name}.schema.version", not sink),
        (f"{name}.recordname", sink),
        (f"{name}.recordnamespace", sink),
    ):
        if option in options and not allowed:
            raise ValueError(
                f"option '{option}' applies to {'reading' if sink else 'writing'} only"
            )
    subject = options.get(f"{name}.subject", "").strip()
    if not subject:
        if topic is None:
            raise ValueError(
                f"option '{name}.subject' is required unless one topic is named (the default, "
                f"Confluent's TopicNameStrategy, is '<topic>-{name}')"
            )
        subject = f"{topic}-{name}"
    version = options.get(f"{name}.schema.version", "latest").strip().lower()
    if version != "latest" and not (version.isdigit() and int(version) > 0):
        raise ValueError(
            f"option '{name}.schema.version' must be latest or a version number, got {version!r}"
        )
    return FramedColumn(
        column=name,
        format=record_format,
        subject=subject,
        version=version,
        record_name=options.get(f"{name}.recordname", DEFAULT_RECORD_NAME),
        record_namespace=options.get(f"{name}.recordnamespace", ""),
    )
