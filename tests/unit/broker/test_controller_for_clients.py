"""The controller a broker names in Metadata and DescribeCluster is always one of the live
brokers the same answer lists: itself while its image lists it live, else the live broker of
lowest id, else none (-1). librdkafka's admin client waits for a named controller that the
list lacks until its next metadata refresh."""

from __future__ import annotations

import pytest

from moldau.broker.client_view import controller_for_clients


@pytest.mark.parametrize(
    ("node_id", "live", "named"),
    [
        (2, [1, 2, 3], 2),  # itself, live
        (2, [3, 1], 1),  # fenced in its own image: the live broker of lowest id
        (2, [], -1),  # no live broker known
    ],
)
def test_the_named_controller_is_a_listed_live_broker(
    node_id: int, live: list[int], named: int
) -> None:
    assert controller_for_clients(node_id, live) == named
