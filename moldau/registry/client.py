"""Confluent's Schema Registry REST API from the client's side: what `moldau schema` and the
CLI's serializers use. Answers come back as the model's objects; a registry's refusal is the
`RegistryError` it answered (status, error code, message); a registry that cannot be reached is
`RegistryUnreachable`. `url` may list several registries (comma-separated, as Confluent's
clients take them): each is tried in turn until one answers.

Schemas fetched by id never change, so they are kept, parsed, for the client's lifetime.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

import h11

from moldau.registry.errors import RegistryError
from moldau.registry.http_client import http_request, split_url
from moldau.registry.model import SchemaReference, SchemaType, StoredSchema, SubjectVersion
from moldau.registry.schema_types import parse
from moldau.registry.schemas import ParsedSchema

__all__ = ["RegistryClient", "RegistryUnreachable"]

DEFAULT_TIMEOUT_S = 30.0


class RegistryUnreachable(Exception):
    """No registry of the list answered."""


class RegistryClient:
    def __init__(
        self,
        url: str,
        *,
        user_info: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        """`user_info`: `USER:PASSWORD` for HTTP basic authentication (Confluent's
        `basic.auth.user.info`). `ssl_context`: for https URLs (default: the system's
        authorities)."""
        self.urls = [item.strip() for item in url.split(",") if item.strip()]
        if not self.urls:
            raise ValueError("no schema registry URL given")
        for item in self.urls:
            split_url(item)  # (ValueError: not an http[s]://HOST:PORT address)
        self.headers: list[tuple[str, str]] = []
        if user_info is not None:
            token = base64.b64encode(user_info.encode()).decode("ascii")
            self.headers.append(("Authorization", f"Basic {token}"))
        self.ssl_context = ssl_context
        self.timeout = timeout
        self._schemas: dict[int, StoredSchema] = {}
        self._parsed: dict[int, ParsedSchema] = {}

    async def request(
        self,
        method: str,
        path: str,
        document: Any = None,
        **query: Any,
    ) -> Any:
        """The JSON answer to `method path?query` (RegistryError: the registry refused); a
        query flag that is False or None is left out."""
        arguments = {
            name: "true" if value is True else value
            for name, value in query.items()
            if value is not False and value is not None
        }
        target = path + (f"?{urlencode(arguments)}" if arguments else "")
        body = b"" if document is None else json.dumps(document).encode()
        failures = []
        for url in self.urls:
            try:
                answer = await http_request(
                    url,
                    method=method,
                    target=target,
                    body=body,
                    headers=self.headers,
                    ssl_context=self.ssl_context,
                    timeout=self.timeout,
                )
            except (OSError, TimeoutError, h11.ProtocolError) as error:
                failures.append(f"{url}: {_reason(error)}")
                continue
            try:
                content = json.loads(answer.body) if answer.body.strip() else None
            except ValueError:
                content = answer.body.decode("utf-8", "replace")
            if answer.status >= 400:
                if isinstance(content, dict) and "error_code" in content:
                    code, message = int(content["error_code"]), str(content.get("message", ""))
                else:
                    code, message = answer.status, f"HTTP {answer.status}: {content}"
                raise RegistryError(answer.status, code, message)
            return content
        raise RegistryUnreachable("; ".join(failures))

    # --- schemas ---------------------------------------------------------------------------

    async def register(
        self,
        subject: str,
        text: str,
        *,
        schema_type: SchemaType = SchemaType.AVRO,
        references: Sequence[SchemaReference] = (),
        normalize: bool = False,
    ) -> int:
        """The id of the schema, registered under `subject` unless it already is."""
        answer = await self.request(
            "POST",
            f"/subjects/{_segment(subject)}/versions",
            _schema_body(text, schema_type, references),
            normalize=normalize,
        )
        return int(answer["id"])

    async def lookup(
        self,
        subject: str,
        text: str,
        *,
        schema_type: SchemaType = SchemaType.AVRO,
        references: Sequence[SchemaReference] = (),
    ) -> SubjectVersion:
        """The version of `subject` holding this schema (40403: none does)."""
        answer = await self.request(
            "POST", f"/subjects/{_segment(subject)}", _schema_body(text, schema_type, references)
        )
        return _subject_version(answer)

    async def schema(self, schema_id: int) -> StoredSchema:
        known = self._schemas.get(schema_id)
        if known is None:
            answer = await self.request("GET", f"/schemas/ids/{schema_id}")
            known = _stored(schema_id, answer)
            self._schemas[schema_id] = known
        return known

    async def version(
        self, subject: str, version: int | str = "latest", *, deleted: bool = False
    ) -> SubjectVersion:
        answer = await self.request(
            "GET", f"/subjects/{_segment(subject)}/versions/{version}", deleted=deleted
        )
        return _subject_version(answer)

    async def subjects(self, *, prefix: str = "", deleted: bool = False) -> list[str]:
        answer = await self.request(
            "GET", "/subjects", subjectPrefix=prefix or None, deleted=deleted
        )
        return [str(name) for name in answer]

    async def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        answer = await self.request(
            "GET", f"/subjects/{_segment(subject)}/versions", deleted=deleted
        )
        return [int(number) for number in answer]

    async def check(
        self,
        subject: str,
        text: str,
        *,
        schema_type: SchemaType = SchemaType.AVRO,
        references: Sequence[SchemaReference] = (),
        version: int | str | None = "latest",
    ) -> tuple[bool, list[str]]:
        """Whether the schema may follow `version` of `subject` (None: every version, as the
        subject's level asks) under its compatibility level, and why not."""
        path = f"/compatibility/subjects/{_segment(subject)}/versions"
        if version is not None:
            path += f"/{version}"
        answer = await self.request(
            "POST", path, _schema_body(text, schema_type, references), verbose=True
        )
        return bool(answer["is_compatible"]), [str(m) for m in answer.get("messages") or []]

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        answer = await self.request("DELETE", f"/subjects/{_segment(subject)}", permanent=permanent)
        return [int(number) for number in answer]

    async def delete_version(
        self, subject: str, version: int | str, *, permanent: bool = False
    ) -> int:
        answer = await self.request(
            "DELETE", f"/subjects/{_segment(subject)}/versions/{version}", permanent=permanent
        )
        return int(answer)

    # --- compatibility levels --------------------------------------------------------------

    async def compatibility(self, subject: str | None = None) -> str:
        """The level of `subject` (the global one when None), falling back on the global."""
        if subject is None:
            answer = await self.request("GET", "/config")
        else:
            answer = await self.request("GET", f"/config/{_segment(subject)}", defaultToGlobal=True)
        return str(answer["compatibilityLevel"])

    async def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_segment(subject)}"
        answer = await self.request("PUT", path, {"compatibility": level.upper()})
        return str(answer["compatibility"])

    async def delete_compatibility(self, subject: str) -> str:
        answer = await self.request("DELETE", f"/config/{_segment(subject)}")
        return str(answer["compatibilityLevel"])

    # --- parsed schemas --------------------------------------------------------------------

    async def parsed(self, schema: StoredSchema) -> ParsedSchema:
        """`schema` parsed, its references fetched from the registry (RegistryError 42201 when
        it is not a valid schema of its type)."""
        known = self._parsed.get(schema.schema_id) if schema.schema_id else None
        if known is not None:
            return known
        fetched: dict[tuple[str, int], StoredSchema] = {}
        pending = list(schema.references)
        while pending:
            reference = pending.pop()
            key = (reference.subject, reference.version)
            if key in fetched:
                continue
            found = (await self.version(reference.subject, reference.version)).schema
            fetched[key] = found
            pending.extend(found.references)
        parsed = parse(
            schema.schema_type,
            schema.text,
            schema.references,
            lambda r: fetched[(r.subject, r.version)],
        )
        if schema.schema_id:
            self._parsed[schema.schema_id] = parsed
        return parsed


def _segment(name: str) -> str:
    return quote(name, safe="")


def _reason(error: BaseException) -> str:
    if isinstance(error, TimeoutError):
        return "no answer in time"
    if isinstance(error, ssl.SSLError):
        return f"TLS: {error.reason or error}"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def _schema_body(
    text: str, schema_type: SchemaType, references: Sequence[SchemaReference]
) -> dict[str, Any]:
    return StoredSchema(
        schema_id=0, schema_type=schema_type, text=text, references=tuple(references)
    ).to_json()


def _stored(schema_id: int, answer: dict[str, Any]) -> StoredSchema:
    return StoredSchema(
        schema_id=schema_id,
        schema_type=SchemaType(answer.get("schemaType") or "AVRO"),
        text=str(answer["schema"]),
        references=tuple(
            SchemaReference(name=r["name"], subject=r["subject"], version=int(r["version"]))
            for r in answer.get("references") or ()
        ),
    )


def _subject_version(answer: dict[str, Any]) -> SubjectVersion:
    return SubjectVersion(
        subject=str(answer["subject"]),
        version=int(answer["version"]),
        schema=_stored(int(answer["id"]), answer),
    )
