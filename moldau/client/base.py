"""What the admin client, producer and consumer share: settings, a `Cluster`, `async with`."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from moldau.client.cluster import Cluster
from moldau.client.config import ClientConfig

__all__ = ["ClientBase"]


class ClientBase:
    """Owns the settings and the cluster connections; `close()` releases them."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None = None) -> None:
        self.config = config if isinstance(config, ClientConfig) else ClientConfig(config)
        self.cluster = Cluster(self.config)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.cluster.close()
