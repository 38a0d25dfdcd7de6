"""Kafka's Uuid in text: 22 characters of unpadded base64url (`Uuid.toString`), as meta.properties
holds directory ids and the tools print them; on the wire it is 16 bytes (kio's `uuid.UUID`)."""

from __future__ import annotations

import base64
import uuid


def uuid_from_text(text: str | None) -> uuid.UUID | None:
    """The UUID a Kafka Uuid string names; None (or "") stays None."""
    if not text:
        return None
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def uuid_to_text(value: uuid.UUID | None) -> str | None:
    """The inverse of `uuid_from_text`; the zero UUID (Kafka's "none") is None."""
    if value is None or value.int == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")
