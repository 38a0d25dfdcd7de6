"""Outbound requests of one node: one in flight per destination, timeouts, retry backoff, and
correlation ids (Kafka's raft RequestManager).

A response is accepted only from the node the request went to and with its correlation id, so
a late answer to a request that timed out, or that an earlier role sent, is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from moldau.raft.messages import RaftRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class OutstandingRequest:
    request: RaftRequest
    deadline: float


class RequestManager:
    def __init__(self, *, request_timeout: float, retry_backoff: float) -> None:
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self._outstanding: dict[int, OutstandingRequest] = {}
        self._backoff_until: dict[int, float] = {}
        self._next_correlation_id = 0

    def next_correlation_id(self) -> int:
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        return self._next_correlation_id

    def is_ready(self, destination_id: int, now: float) -> bool:
        """Nothing in flight to the destination, and no backoff after a failure."""
        return (
            destination_id not in self._outstanding
            and self._backoff_until.get(destination_id, now) <= now
        )

    def has_outstanding(self, destination_id: int) -> bool:
        return destination_id in self._outstanding

    def has_any_outstanding(self) -> bool:
        return bool(self._outstanding)

    def sent(self, destination_id: int, request: RaftRequest, now: float) -> None:
        self._outstanding[destination_id] = OutstandingRequest(
            request=request, deadline=now + self.request_timeout
        )
        self._backoff_until.pop(destination_id, None)

    def take(self, source_id: int, correlation_id: int) -> RaftRequest | None:
        """The request this response answers, now no longer in flight; None if unexpected."""
        outstanding = self._outstanding.get(source_id)
        if outstanding is None or outstanding.request.correlation_id != correlation_id:
            return None
        del self._outstanding[source_id]
        return outstanding.request

    def back_off(self, destination_id: int, now: float) -> None:
        """The last exchange with the destination failed: wait before the next request."""
        self._outstanding.pop(destination_id, None)
        self._backoff_until[destination_id] = now + self.retry_backoff

    def expire(self, now: float) -> None:
        """Requests unanswered for the request timeout count as failed."""
        for destination_id, outstanding in list(self._outstanding.items()):
            if outstanding.deadline <= now:
                self.back_off(destination_id, now)
        for destination_id, until in list(self._backoff_until.items()):
            if until <= now:
                del self._backoff_until[destination_id]

    def reset(self) -> None:
        """Forget every request in flight (a change of role): their answers will be dropped."""
        self._outstanding.clear()
        self._backoff_until.clear()

    def next_deadline(self) -> float | None:
        deadlines = [o.deadline for o in self._outstanding.values()]
        deadlines.extend(self._backoff_until.values())
        return min(deadlines) if deadlines else None
