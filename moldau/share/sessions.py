"""Share sessions (KIP-932; Kafka's ShareSessionCache): which partitions a share group member
fetches from this broker, and the epoch its next request must carry.

A ShareFetch with epoch 0 opens a session (replacing the member's previous one) with the
partitions it names; the next request must carry epoch 1, then 2, and so on (after 2^31-1 comes
1), each adding partitions and forgetting others: SHARE_SESSION_NOT_FOUND without a session,
INVALID_SHARE_SESSION_EPOCH with another epoch. Epoch -1 closes the session. ShareAcknowledge
moves the epoch as ShareFetch does, but cannot open a session (epoch 0 is
INVALID_SHARE_SESSION_EPOCH). At most `group.share.max.share.sessions` sessions are kept: a new
one beyond is refused with SHARE_SESSION_LIMIT_REACHED. A session belongs to the connection
that opened it: when that connection closes, the session goes (Kafka 4.1 does the same), and the
member's acquired records with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

PartitionId = tuple[uuid.UUID, int]
"""(topic id, partition index): ShareFetch names partitions by topic id."""


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    connection: object  # the connection that opened it
    epoch: int = 1  # the epoch the next request must carry
    partitions: dict[PartitionId, None] = field(default_factory=dict)  # (ordered set)

    def update(self, added: Iterable[PartitionId], forgotten: Iterable[PartitionId]) -> None:
        for partition in added:
            self.partitions.setdefault(partition, None)
        for partition in forgotten:
            self.partitions.pop(partition, None)


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def open(
        self,
        group_id: str,
        member_id: str,
        partitions: Iterable[PartitionId],
        connection: object,
    ) -> ShareSession:
        """A new session (epoch 0), in place of the member's previous one."""
        key = (group_id, member_id)
        self._sessions.pop(key, None)
        if len(self._sessions) >= self.max_sessions:
            raise KafkaError(
                ErrorCode.share_session_limit_reached,
                f"The broker keeps at most {self.max_sessions} share sessions "
                "(group.share.max.share.sessions)",
            )
        session = ShareSession(group_id, member_id, connection)
        session.update(partitions, ())
        self._sessions[key] = session
        return session

    def next(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        *,
        added: Iterable[PartitionId] = (),
        forgotten: Iterable[PartitionId] = (),
    ) -> ShareSession:
        """The member's session after a request of `epoch` (> 0) that adds and forgets
        partitions; its epoch moves on."""
        session = self._current(group_id, member_id, epoch)
        session.update(added, forgotten)
        session.epoch = next_epoch(session.epoch)
        return session

    def acknowledged(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """A ShareAcknowledge of `epoch`: the session moves on (epoch -1: it stays, to be
        closed once the acknowledgements are applied)."""
        if epoch == INITIAL_EPOCH:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch,
                "ShareAcknowledge cannot open a share session (epoch 0)",
            )
        if epoch == FINAL_EPOCH:
            session = self.get(group_id, member_id)
            if session is None:
                raise _not_found(group_id, member_id)
            return session
        session = self._current(group_id, member_id, epoch)
        session.epoch = next_epoch(session.epoch)
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def close_connection(self, connection: object) -> list[ShareSession]:
        """The sessions `connection` opened, removed."""
        closed = [s for s in self._sessions.values() if s.connection is connection]
        for session in closed:
            del self._sessions[(session.group_id, session.member_id)]
        return closed

    def close_group(self, group_id: str) -> None:
        for key in [key for key in self._sessions if key[0] == group_id]:
            del self._sessions[key]

    def _current(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        session = self.get(group_id, member_id)
        if session is None:
            raise _not_found(group_id, member_id)
        if epoch != session.epoch:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch,
                f"The share session of member {member_id} expects epoch {session.epoch}, "
                f"not {epoch}",
            )
        return session


def _not_found(group_id: str, member_id: str) -> KafkaError:
    return KafkaError(
        ErrorCode.share_session_not_found,
        f"No share session for member {member_id} of group {group_id} on this broker",
    )
