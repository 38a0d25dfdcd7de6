"""Who may use the registry: HTTP basic authentication (Confluent's `authentication.method=BASIC`)
and a permission per subject, both decided by an `Authority` the host of the registry gives it
(a node checks the cluster's SASL users and its ACLs: `moldau/broker/schema_registry.py`).

What each request needs (`Access`), the subject's name standing for the resource:

    READ   a subject's versions, schemas, lookups, compatibility checks, its config and mode
    WRITE  registering under a subject, deleting it or a version, setting its config or mode
    ADMIN  setting or deleting the global config or mode
    (any)  /, /schemas/types, the global config and mode; /subjects lists the readable ones,
           a schema by id is readable through any readable subject that has a version of it

Without an `Authority` every request is allowed, as Confluent's registry without
authentication. A request that carries no credentials, or wrong ones, is answered 401 with
`WWW-Authenticate: Basic`; one whose user lacks the permission 403 (40301).
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
from typing import Protocol

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Access", "Authority", "BasicAuthentication", "topic_of_subject", "user_of"]

REALM = "SchemaRegistry"
_USER_KEY = "moldau.registry.user"


class Access(enum.Enum):
    READ = "Read"
    WRITE = "Write"
    ADMIN = "Admin"


class Authority(Protocol):
    def authenticate(self, user: str, password: str) -> bool:
        """Whether `password` is `user`'s."""
        ...

    def allowed(self, user: str, host: str, access: Access, subject: str | None) -> bool:
        """Whether `user`, from `host`, may do `access` to `subject` (None: the global
        config and mode)."""
        ...


def topic_of_subject(subject: str) -> str:
    """The topic whose ACLs stand for `subject`: its name without the `-key` or `-value` of
    Confluent's TopicNameStrategy (other subjects stand for a topic of their own name)."""
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def credentials_of(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic ...` header, or None."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = text.partition(":")
    return (user, password) if colon and user else None


class BasicAuthentication:
    """ASGI middleware: every HTTP request authenticated before it is routed; the user is left
    in the request's scope for `user_of`."""

    def __init__(self, app: ASGIApp, *, authority: Authority) -> None:
        self.app = app
        self.authority = authority

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value.decode("latin-1")
        credentials = credentials_of(header)
        if credentials is None or not self.authority.authenticate(*credentials):
            body = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/vnd.schemaregistry.v1+json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", f'Basic realm="{REALM}"'.encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope.setdefault("state", {})[_USER_KEY] = credentials[0]
        await self.app(scope, receive, send)


def user_of(request: Request) -> str | None:
    """The user `BasicAuthentication` let in (None without authentication)."""
    state = request.scope.get("state") or {}
    user = state.get(_USER_KEY)
    return str(user) if user is not None else None
