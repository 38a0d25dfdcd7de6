"""Confluent's Schema Registry REST API as a Starlette (ASGI) application. Routes are thin:
they read the path, query and body, check the user's permission (`security.py` lists what each
route needs), and call the service (reads from the in-memory state, commands through the
writer). Every failure is a Confluent error body `{"error_code": ..., "message": ...}` with its
HTTP status.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from moldau.registry.errors import RegistryError
from moldau.registry.model import SchemaReference, SchemaType, SubjectVersion
from moldau.registry.operations import Change, Operations, SchemaRequest
from moldau.registry.security import Access, Authority
from moldau.registry.state import RegistryState, parse_version


class RegistryBackend(Protocol):
    """What the routes need of the service behind them (`service.RegistryService`)."""

    @property
    def state(self) -> RegistryState: ...

    @property
    def operations(self) -> Operations: ...

    @property
    def authority(self) -> Authority | None: ...

    async def until_ready(self) -> None: ...

    async def write(
        self, request: Request, body: bytes, command: Callable[[Operations], Change]
    ) -> Response: ...

    def allowed(self, request: Request, access: Access, subject: str | None) -> bool: ...

    def require(self, request: Request, access: Access, subject: str | None) -> None: ...

    def log_unexpected(self, request: Request, error: Exception) -> None: ...


__all__ = ["CONTENT_TYPE", "MAX_BODY_BYTES", "build_app"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 16 * 1024 * 1024  # a request body larger than this is refused (413)
_TRUE = ("true", "1", "yes")


def respond(body: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status_code=status,
        media_type=CONTENT_TYPE,
    )


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() in _TRUE


async def read_body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise RegistryError.too_large(MAX_BODY_BYTES)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise RegistryError.too_large(MAX_BODY_BYTES)
        chunks.append(chunk)
    return b"".join(chunks)


def json_body(raw: bytes) -> dict[str, Any]:
    try:
        document = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise RegistryError.bad_request(f"Malformed JSON body: {error}") from None
    if not isinstance(document, dict):
        raise RegistryError.unprocessable("The request body must be a JSON object")
    return document


def schema_request(document: dict[str, Any], request: Request) -> SchemaRequest:
    text = document.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise RegistryError.invalid_schema("Empty schema")
    type_name = document.get("schemaType") or "AVRO"
    try:
        schema_type = SchemaType(str(type_name).upper())
    except ValueError:
        raise RegistryError.invalid_schema(f"unknown schema type {type_name!r}") from None
    references = []
    raw_references = document.get("references") or []
    if not isinstance(raw_references, list):
        raise RegistryError.invalid_schema("references must be a list")
    for item in raw_references:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("subject"), str)
            and isinstance(item.get("version"), int)
        ):
            raise RegistryError.invalid_schema(
                "each reference needs a name, a subject and a version number"
            )
        version = item["version"]
        if version == -1:  # the latest version, pinned now
            raise RegistryError.invalid_schema("a reference must name a version number")
        references.append(
            SchemaReference(name=item["name"], subject=item["subject"], version=version)
        )
    schema_id, version = document.get("id"), document.get("version")
    for name, value in (("id", schema_id), ("version", version)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise RegistryError.unprocessable(f"{name} must be a positive number")
    return SchemaRequest(
        schema_type=schema_type,
        text=text,
        references=tuple(references),
        normalize=_flag(request, "normalize"),
        schema_id=schema_id,
        version=version,
    )


def _schema_id(request: Request) -> int:
    text = request.path_params["schema_id"]
    try:
        return int(text)
    except ValueError:
        raise RegistryError.schema_not_found(f"Schema {text} not found") from None


def raw_schema(text: str, schema_type: SchemaType) -> Response:
    """GET .../schema: an Avro or JSON schema as the JSON document it is, Protobuf as text."""
    if schema_type is SchemaType.PROTOBUF:
        return Response(text, media_type="text/plain")
    return Response(text, media_type=CONTENT_TYPE)


def build_app(service: RegistryBackend) -> Starlette:
    state = service.state

    async def reading(request: Request | None = None, subject: str | None = None) -> Operations:
        """Once `_schemas` is read; with a subject, once the user may read it."""
        if request is not None and subject is not None:
            service.require(request, Access.READ, subject)
        await service.until_ready()
        return service.operations

    def readable_schema(request: Request, schema_id: int) -> None:
        """40301 unless some subject with a version of the schema is readable (40403 first
        when there is no such schema)."""
        state.schema(schema_id)
        if service.authority is None:
            return
        uses = state.uses_of(schema_id, deleted=True)
        if not any(service.allowed(request, Access.READ, use.subject) for use in uses):
            service.require(request, Access.READ, uses[0].subject if uses else None)

    def readable(request: Request, uses: list[SubjectVersion]) -> list[SubjectVersion]:
        return [use for use in uses if service.allowed(request, Access.READ, use.subject)]

    def write(
        build: Callable[[Request, dict[str, Any]], Callable[[Operations], Change]],
        *,
        with_body: bool = True,
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            subject = request.path_params.get("subject")
            access = Access.WRITE if subject is not None else Access.ADMIN
            service.require(request, access, subject)
            raw = await read_body(request) if with_body else b""
            command = build(request, json_body(raw) if with_body else {})
            return await service.write(request, raw, command)

        return endpoint

    # --- schemas ---------------------------------------------------------------------------

    async def root(request: Request) -> Response:
        return respond({})

    async def schema_types(request: Request) -> Response:
        return respond(["JSON", "PROTOBUF", "AVRO"])

    async def schema_by_id(request: Request) -> Response:
        operations = await reading()
        readable_schema(request, _schema_id(request))
        schema = state.schema(_schema_id(request))
        body = schema.to_json()
        if (
            request.query_params.get("format") == "serialized"
            and schema.schema_type is SchemaType.PROTOBUF
        ):
            body["schema"] = operations.parsed(schema).serialized()  # type: ignore[attr-defined]
        return respond(body)

    async def schema_text_by_id(request: Request) -> Response:
        await reading()
        readable_schema(request, _schema_id(request))
        schema = state.schema(_schema_id(request))
        return raw_schema(schema.text, schema.schema_type)

    async def subjects_of_id(request: Request) -> Response:
        await reading()
        schema_id = _schema_id(request)
        readable_schema(request, schema_id)
        uses = readable(request, state.uses_of(schema_id, deleted=_flag(request, "deleted")))
        return respond(sorted({entry.subject for entry in uses}))

    async def versions_of_id(request: Request) -> Response:
        await reading()
        schema_id = _schema_id(request)
        readable_schema(request, schema_id)
        uses = readable(request, state.uses_of(schema_id, deleted=_flag(request, "deleted")))
        return respond([{"subject": e.subject, "version": e.version} for e in uses])

    # --- subjects --------------------------------------------------------------------------

    async def subjects(request: Request) -> Response:
        await reading()
        prefix = request.query_params.get("subjectPrefix", "")
        names = state.subject_names(deleted=_flag(request, "deleted"))
        return respond(
            [
                name
                for name in names
                if name.startswith(prefix) and service.allowed(request, Access.READ, name)
            ]
        )

    async def versions(request: Request) -> Response:
        subject = request.path_params["subject"]
        await reading(request, subject)
        entries = state.versions(subject, deleted=_flag(request, "deleted"))
        return respond([entry.version for entry in entries])

    def _entry(request: Request) -> Any:
        subject = request.path_params["subject"]
        version = parse_version(request.path_params["version"])
        return state.version(subject, version, deleted=_flag(request, "deleted"))

    async def version(request: Request) -> Response:
        await reading(request, request.path_params["subject"])
        return respond(_entry(request).to_json())

    async def version_schema(request: Request) -> Response:
        await reading(request, request.path_params["subject"])
        entry = _entry(request)
        return raw_schema(entry.schema.text, entry.schema.schema_type)

    async def referenced_by(request: Request) -> Response:
        await reading(request, request.path_params["subject"])
        entry = _entry(request)
        return respond(state.referenced_by(entry.subject, entry.version))

    async def lookup(request: Request) -> Response:
        subject = request.path_params["subject"]
        operations = await reading(request, subject)
        document = json_body(await read_body(request))
        found = operations.lookup(
            subject, schema_request(document, request), deleted=_flag(request, "deleted")
        )
        return respond(found)

    def register(request: Request, document: dict[str, Any]) -> Callable[[Operations], Change]:
        subject = request.path_params["subject"]
        parsed = schema_request(document, request)
        return lambda operations: operations.register(subject, parsed)

    def delete_version(request: Request, _: dict[str, Any]) -> Callable[[Operations], Change]:
        subject = request.path_params["subject"]
        number = parse_version(request.path_params["version"])
        permanent = _flag(request, "permanent")
        return lambda operations: operations.delete_version(subject, number, permanent=permanent)

    def delete_subject(request: Request, _: dict[str, Any]) -> Callable[[Operations], Change]:
        subject = request.path_params["subject"]
        permanent = _flag(request, "permanent")
        return lambda operations: operations.delete_subject(subject, permanent=permanent)

    # --- compatibility ---------------------------------------------------------------------

    async def check(request: Request) -> Response:
        subject = request.path_params["subject"]
        operations = await reading(request, subject)
        document = json_body(await read_body(request))
        every = "version" not in request.path_params
        number = None if every else parse_version(request.path_params["version"])
        answer = operations.check(
            subject,
            number,
            schema_request(document, request),
            every_version=every,
            verbose=_flag(request, "verbose"),
        )
        return respond(answer)

    # --- config and mode -------------------------------------------------------------------

    async def subject_setting(request: Request, table: dict[str | None, Any]) -> str | None:
        """The subject of a /config or /mode path (None: the global one), once it is known to
        have a setting of its own or `defaultToGlobal` lets it fall back on the global one."""
        subject = request.path_params.get("subject")
        await reading(request, subject)
        if subject is None or subject in table or _flag(request, "defaultToGlobal"):
            return subject
        if table is state.configs:
            raise RegistryError.subject_config_not_found(subject)
        raise RegistryError.subject_mode_not_found(subject)

    async def get_config(request: Request) -> Response:
        subject = await subject_setting(request, state.configs)
        return respond({"compatibilityLevel": state.compatibility(subject).value})

    def set_config(request: Request, document: dict[str, Any]) -> Callable[[Operations], Change]:
        subject = request.path_params.get("subject")
        level = document.get("compatibility", document.get("compatibilityLevel"))
        return lambda operations: operations.set_compatibility(subject, level)

    def delete_config(request: Request, _: dict[str, Any]) -> Callable[[Operations], Change]:
        subject = request.path_params.get("subject")
        return lambda operations: operations.delete_compatibility(subject)

    async def get_mode(request: Request) -> Response:
        subject = await subject_setting(request, state.modes)
        return respond({"mode": state.mode(subject).value})

    def set_mode(request: Request, document: dict[str, Any]) -> Callable[[Operations], Change]:
        subject = request.path_params.get("subject")
        force = _flag(request, "force")
        return lambda operations: operations.set_mode(subject, document.get("mode"), force=force)

    def delete_mode(request: Request, _: dict[str, Any]) -> Callable[[Operations], Change]:
        subject = request.path_params["subject"]
        return lambda operations: operations.delete_mode(subject)

    # --- errors ----------------------------------------------------------------------------

    async def registry_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, RegistryError)
        return respond(error.body(), error.http_status)

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return respond(
            {
                "error_code": error.status_code,
                "message": f"HTTP {error.status_code} {error.detail}",
            },
            error.status_code,
        )

    async def unexpected_error(request: Request, error: Exception) -> Response:
        service.log_unexpected(request, error)
        return respond({"error_code": 50001, "message": f"Internal error: {error}"}, 500)

    subject_path = "/subjects/{subject}"
    version_path = subject_path + "/versions/{version}"
    routes = [
        Route("/", root),
        Route("/schemas/types", schema_types),
        Route("/schemas/ids/{schema_id}", schema_by_id),
        Route("/schemas/ids/{schema_id}/schema", schema_text_by_id),
        Route("/schemas/ids/{schema_id}/subjects", subjects_of_id),
        Route("/schemas/ids/{schema_id}/versions", versions_of_id),
        Route("/subjects", subjects),
        Route(subject_path, lookup, methods=["POST"]),
        Route(subject_path, write(delete_subject, with_body=False), methods=["DELETE"]),
        Route(subject_path + "/versions", versions, methods=["GET"]),
        Route(subject_path + "/versions", write(register), methods=["POST"]),
        Route(version_path, version, methods=["GET"]),
        Route(version_path, write(delete_version, with_body=False), methods=["DELETE"]),
        Route(version_path + "/schema", version_schema),
        Route(version_path + "/referencedby", referenced_by),
        Route("/compatibility" + subject_path + "/versions", check, methods=["POST"]),
        Route("/compatibility" + version_path, check, methods=["POST"]),
        Route("/config", get_config, methods=["GET"]),
        Route("/config", write(set_config), methods=["PUT"]),
        Route("/config", write(delete_config, with_body=False), methods=["DELETE"]),
        Route("/config/{subject}", get_config, methods=["GET"]),
        Route("/config/{subject}", write(set_config), methods=["PUT"]),
        Route("/config/{subject}", write(delete_config, with_body=False), methods=["DELETE"]),
        Route("/mode", get_mode, methods=["GET"]),
        Route("/mode", write(set_mode), methods=["PUT"]),
        Route("/mode/{subject}", get_mode, methods=["GET"]),
        Route("/mode/{subject}", write(set_mode), methods=["PUT"]),
        Route("/mode/{subject}", write(delete_mode, with_body=False), methods=["DELETE"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={
            RegistryError: registry_error,
            HTTPException: http_error,
            Exception: unexpected_error,
        },
    )
