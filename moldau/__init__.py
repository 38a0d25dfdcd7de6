"""Moldau: a Kafka-compatible streaming platform (see docs and the package READMEs).

`moldau.Server` runs an embedded node for tests and notebooks; it is imported on first use so
that `import moldau.client` or `moldau.spark` does not load the broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moldau.server import Server

__all__ = ["Server"]


def __getattr__(name: str) -> Any:
    if name == "Server":
        from moldau.server import Server

        return Server
    raise AttributeError(f"module 'moldau' has no attribute {name!r}")
