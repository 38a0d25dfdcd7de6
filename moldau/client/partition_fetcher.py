"""`PartitionFetcher`: Fetch one partition from its leader and hand back the raw record bytes.

For bulk readers (the Spark source) that decode record batches themselves rather than take a
`Message` per record from a `Consumer`. The request is the consumer's (`build_fetch_request`, no
fetch session, no group); retriable errors back off, refresh metadata and report nothing, as the
consumer does; an offset out of range is raised, never reset, so the caller decides what data loss
means. With `client.rack` set, the partition is read from the replica its leader names
(KIP-392, `moldau.client.read_replicas`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moldau.client.base import ClientBase
from moldau.client.config import ClientConfig
from moldau.client.errors import ErrorCode, KafkaException, error_code_of
from moldau.client.fetcher import build_fetch_request
from moldau.client.offsets import EARLIEST, LATEST, list_offsets
from moldau.client.read_replicas import ReadReplicas
from moldau.protocol.api_keys import ApiKey
from moldau.types import TopicPartition

__all__ = ["FetchedRecords", "PartitionFetcher"]


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    """One partition of a Fetch response: record bytes as sent, and what decoding them needs."""

    records: bytes
    aborted_transactions: list[tuple[int, int]]  # (producer_id, first_offset)
    high_watermark: int
    last_stable_offset: int


class PartitionFetcher(ClientBase):
    """Fetches `tp` from any offset; use as `async with PartitionFetcher(config, tp) as f:`."""

    def __init__(self, config: Mapping[str, Any] | ClientConfig | None, tp: TopicPartition) -> None:
        super().__init__(config)
        self.tp = tp
        level = self.config.get_str("isolation.level").strip().lower()
        self.read_committed = level == "read_committed"
        self.read_replicas = ReadReplicas(self.config.get_int("metadata.max.age.ms") / 1000)

    async def fetch(self, offset: int, max_wait: float) -> FetchedRecords | None:
        """Records from `offset`, waiting up to `max_wait` seconds for some; None after a
        retriable error. Raises OFFSET_OUT_OF_RANGE and errors retrying cannot cure."""
        wait_ms = max(0, min(self.config.get_int("fetch.wait.max.ms"), int(max_wait * 1000)))
        request = build_fetch_request(
            {self.tp: offset},
            max_wait_ms=wait_ms,
            min_bytes=self.config.get_int("fetch.min.bytes"),
            max_bytes=self.config.get_int("fetch.max.bytes"),
            partition_max_bytes=self.config.get_int("max.partition.fetch.bytes"),
            isolation_level=1 if self.read_committed else 0,
            rack_id=self.config.get_str("client.rack"),
        )
        from_replica = False
        try:
            leader = await self.cluster.leader_id(self.tp.topic, self.tp.partition)
            node = self.read_replicas.node_for(self.tp, leader, self.cluster.metadata.brokers)
            from_replica = node != leader
            connection = await self.cluster.connection(node)
            response = await connection.request(
                ApiKey.FETCH, request, timeout=self.cluster.config.request_timeout + wait_ms / 1000
            )
            return self._partition_of(response, offset, node)
        except KafkaException as exc:
            self.read_replicas.failed([self.tp])
            # (a replica that is behind says OFFSET_OUT_OF_RANGE: only the leader's is data loss)
            behind = from_replica and exc.code is ErrorCode.offset_out_of_range
            if not behind and (exc.code is ErrorCode.offset_out_of_range or not exc.retriable):
                raise
        await asyncio.sleep(min(max_wait, self.config.get_int("retry.backoff.ms") / 1000))
        with contextlib.suppress(KafkaException):
            await self.cluster.refresh_metadata([self.tp.topic])
        return None

    def _partition_of(self, response: Any, offset: int, node: int) -> FetchedRecords:
        top_error = error_code_of(getattr(response, "error_code", 0))
        if top_error is not ErrorCode.none:
            raise KafkaException(top_error, f"Fetch of {self.tp}")
        for topic in response.responses:
            for partition in topic.partitions:
                if int(partition.partition_index) != self.tp.partition:
                    continue
                error = error_code_of(partition.error_code)
                if error is not ErrorCode.none:
                    raise KafkaException(error, f"{self.tp} at offset {offset}")
                self.read_replicas.answered(
                    self.tp, node, int(getattr(partition, "preferred_read_replica", -1))
                )
                high_watermark = int(partition.high_watermark)
                last_stable = int(partition.last_stable_offset)
                return FetchedRecords(
                    records=bytes(partition.records or b""),
                    aborted_transactions=[
                        (int(a.producer_id), int(a.first_offset))
                        for a in (getattr(partition, "aborted_transactions", None) or ())
                    ],
                    high_watermark=high_watermark,
                    last_stable_offset=last_stable if last_stable >= 0 else high_watermark,
                )
        raise KafkaException(ErrorCode.unknown_topic_or_partition, f"no {self.tp} in the response")

    async def watermarks(self) -> tuple[int, int]:
        """(low, high): the log start offset and the high watermark."""
        low = await list_offsets(self.cluster, {self.tp: EARLIEST})
        high = await list_offsets(self.cluster, {self.tp: LATEST})
        return low[self.tp].offset, high[self.tp].offset
