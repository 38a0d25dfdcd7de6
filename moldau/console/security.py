"""What keeps other web pages from using the console through the user's browser.

- **Host check** (`allowed_hosts`): a request must name the console's own host (127.0.0.1,
  localhost or the listen address), so a DNS-rebinding page cannot read it under its own name.
- **Cross-site writes**: every state-changing request is a POST that must come from the
  console's own pages: its `Origin` (or, without one, `Sec-Fetch-Site`) must be the console's
  own, and its form must carry the console's CSRF token (`CsrfToken`, one per process, compared in
  constant time). A page of another site can neither read the token nor forge the origin.
- **Headers** (`SecurityHeaders`): a Content-Security-Policy allowing only the console's own
  scripts and styles (no inline script, no `eval`), no framing, no sniffing, no referrer leaks.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable, Mapping
from typing import Final

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CsrfToken", "SecurityHeaders", "allowed_hosts", "cross_site_problem"]

CSRF_FIELD: Final = "csrf_token"
_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
_LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "::1", "[::1]")
_WILDCARDS: Final = ("0.0.0.0", "::", "")


class CsrfToken:
    """The token every form of this console process carries."""

    def __init__(self, value: str | None = None) -> None:
        self.value = value or secrets.token_urlsafe(32)

    def matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.value.encode())


def allowed_hosts(listen_host: str) -> list[str]:
    """The Host header values the console answers: its loopback names and the listen address;
    any host when it listens on every interface (the user chose to expose it)."""
    if listen_host in _WILDCARDS:
        return ["*"]
    return list(dict.fromkeys([*_LOOPBACK_NAMES, listen_host]))


def cross_site_problem(headers: Mapping[str, str], own_origins: Iterable[str]) -> str | None:
    """Why a state-changing request does not come from the console's own pages (None: it
    does). `own_origins`: `http://host:port` as the browser names the console."""
    origin = headers.get("origin")
    if origin is not None:
        if origin not in own_origins:
            return f"a request from {origin} may not change anything here"
        return None
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"a {site} request may not change anything here"
    return None


class SecurityHeaders:
    """Adds the console's security headers to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
