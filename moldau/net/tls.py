"""The server side of one TLS connection over memory buffers (sans I/O), as `ssl.SSLObject`
wrapped in two `MemoryBIO`s.

`KafkaConnection` owns one `TlsSession` per connection on an SSL listener: bytes read from the
socket go to `receive()`, which drives the handshake and returns the plaintext they complete;
what the session has to send (handshake messages, alerts, encrypted answers) is taken with
`outgoing()`. Doing this in the connection rather than with `loop.start_tls` keeps one transport
(its flow control and buffer sizes), and lets the connection log each failed handshake in one
line and time out a stalled one (asyncio drops both silently).

    handshaking --receive() completes it--> established --peer's close_notify--> closed
         \\--receive() raises TlsFailed (bad certificate, not TLS, ...): close the connection
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass

READ_CHUNK = 256 * 1024  # at most one TLS record (16 KiB) comes back per read anyway
_NOT_TLS_REASONS = ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_LAYER")


class TlsFailed(Exception):
    """The peer did not complete a valid TLS exchange; the message says why, in one line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsServer:
    """What an SSL listener needs: its context, and how a client certificate (DER, or None
    when the client sent none) becomes the connection's principal (`moldau.net.principal`)."""

    context: ssl.SSLContext
    principal_of: Callable[[bytes | None], str]


def describe(error: ssl.SSLError) -> str:
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {error.verify_message}"
    reason = error.reason or str(error)
    text = reason.lower().replace("_", " ")
    if any(marker in reason for marker in _NOT_TLS_REASONS):
        return f"{text} (the client does not speak TLS: a plaintext client?)"
    return text


class TlsSession:
    __slots__ = ("_incoming", "_object", "_outgoing", "closed", "established")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._object = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.established = False
        self.closed = False  # the peer said close_notify

    def receive(self, data: bytes) -> bytes:
        """Bytes from the peer in; the plaintext they complete out (b"" while handshaking)."""
        self._incoming.write(data)
        tls = self._object
        if not self.established:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            except ssl.SSLError as error:
                raise TlsFailed(describe(error)) from None
            self.established = True
        chunks = []
        while True:
            try:
                chunk = tls.read(READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.closed = True
                break
            except ssl.SSLError as error:
                raise TlsFailed(describe(error)) from None
            if not chunk:  # (Python answers close_notify with b"" rather than raising)
                self.closed = True
                break
            chunks.append(chunk)
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def send(self, data: bytes) -> bytes:
        """Plaintext in; the records to write out."""
        view = memoryview(data)
        while view:
            written = self._object.write(view)
            view = view[written:]
        return self._outgoing.read()

    def outgoing(self) -> bytes:
        """What the session has to send now (handshake messages, alerts, session tickets)."""
        return self._outgoing.read()

    def close(self) -> bytes:
        """Our close_notify, to write before closing the socket (b"" if none can be sent)."""
        if self.established:
            try:
                self._object.unwrap()
            except ssl.SSLError:
                pass
        return self._outgoing.read()

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER) once established, None if it sent none."""
        return self._object.getpeercert(binary_form=True) if self.established else None

    @property
    def version(self) -> str | None:
        return self._object.version()
