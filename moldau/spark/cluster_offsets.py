"""Driver-side questions to the cluster: which partitions to read and where they start and end.

`OffsetReader` (Spark's `KafkaOffsetReader`) owns one admin client on a private event loop. It
lists the partitions a subscription covers, turns `OffsetSpec`s into absolute offsets with
ListOffsets (earliest, latest at the query's isolation level, by timestamp) and commits offsets
to a consumer group for monitoring. It is never pickled: sources drop it before Spark ships them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from moldau.client import AdminClient, ErrorCode, KafkaException
from moldau.client.sync import EventLoopThread
from moldau.spark.offsets import EARLIEST, LATEST, OffsetSpec, PartitionOffsets
from moldau.spark.options import Subscription
from moldau.types import TopicPartition

__all__ = ["OffsetReader"]

READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1


class OffsetReader:
    """Partition listing and offset lookups for one query; `close()` when done."""

    def __init__(
        self,
        client: Mapping[str, Any],
        subscription: Subscription,
        *,
        read_committed: bool = True,
    ) -> None:
        self.subscription = subscription
        self.isolation_level = READ_COMMITTED if read_committed else READ_UNCOMMITTED
        self._settings = {k: v for k, v in client.items() if k != "isolation.level"}
        self._loop: EventLoopThread | None = None
        self._admin: AdminClient | None = None

    def _run(self, operation: Any) -> Any:
        if self._loop is None:
            self._loop = EventLoopThread("moldau-spark-driver")

            async def build() -> AdminClient:
                return AdminClient(self._settings)

            self._admin = self._loop.run(build())
        assert self._admin is not None
        return self._loop.run(operation(self._admin))

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            if self._admin is not None:
                self._loop.run(self._admin.close())
        finally:
            self._loop.stop()
            self._loop = None
            self._admin = None

    # --- partitions --------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """Existing partitions the subscription covers, in order."""
        topics = self.subscription.fixed_topics

        async def list_partitions(admin: AdminClient) -> list[TopicPartition]:
            metadata = await admin.list_topics(topics)
            found: list[TopicPartition] = []
            for name, info in metadata.topics.items():
                if info.error is not ErrorCode.none or not self.subscription.matches(name):
                    continue
                wanted: Iterable[int] = info.partitions
                if self.subscription.assign is not None:
                    wanted = [p for p in self.subscription.assign[name] if p in info.partitions]
                found.extend(TopicPartition(name, p) for p in wanted)
            return sorted(found)

        return list(self._run(list_partitions))

    # --- offsets -----------------------------------------------------------------------------

    def list_offsets(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """ListOffsets at the query's isolation level: -2 earliest, -1 latest, or a timestamp
        (-1 comes back when no record is that recent)."""
        if not specs:
            return {}

        async def lookup(admin: AdminClient) -> dict[TopicPartition, int]:
            results = await admin.list_offsets(dict(specs), isolation_level=self.isolation_level)
            return {tp: result.offset for tp, result in results.items()}

        return dict(self._run(lookup))

    def earliest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(partitions, EARLIEST))

    def latest(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        return self.list_offsets(dict.fromkeys(partitions, LATEST))

    def resolve(
        self,
        spec: OffsetSpec,
        partitions: Iterable[TopicPartition],
        *,
        when_no_timestamp_match: str = "latest",
    ) -> PartitionOffsets:
        """Absolute offsets for `partitions` from what the user asked for.

        A timestamp later than every record gives -1 from ListOffsets; `when_no_timestamp_match`
        decides: "latest" (the log end) or "error" (Spark's startingOffsetsByTimestampStrategy).
        """
        resolved: PartitionOffsets = {}
        requests: dict[TopicPartition, int] = {}
        for tp in partitions:
            absolute = spec.absolute(tp)
            if absolute is not None:
                resolved[tp] = absolute
            else:
                request = spec.request_for(tp)
                assert request is not None
                requests[tp] = request
        answers = self.list_offsets(requests)
        unmatched = [tp for tp, spec_value in requests.items() if spec_value >= 0]
        unmatched = [tp for tp in unmatched if answers.get(tp, -1) < 0]
        if unmatched and when_no_timestamp_match == "error":
            raise ValueError(
                f"no record at or after the requested timestamp in {', '.join(map(str, unmatched))}"
                " (set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
            )
        if unmatched:
            answers.update(self.latest(unmatched))
        resolved.update(answers)
        return dict(sorted(resolved.items()))

    # --- groups ------------------------------------------------------------------------------

    def commit_to_group(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit `offsets` for a group without members, so Kafka tools show the query's lag."""
        if not offsets:
            return

        async def commit(admin: AdminClient) -> None:
            await admin.alter_consumer_group_offsets(group_id, dict(offsets))

        try:
            self._run(commit)
        except KafkaException as exc:
            raise RuntimeError(f"could not commit offsets to group '{group_id}': {exc}") from exc
