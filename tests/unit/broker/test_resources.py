"""Start-time checks of what a node may take: descriptors for segment files, and room for the
internal topics under the partition caps; each misfit is one line saying what to change."""

from __future__ import annotations

import resource

import pytest

from moldau.broker.resources import (
    MIN_OPEN_SEGMENT_FILES,
    RESERVED_DESCRIPTORS,
    check_partition_limits,
    open_segment_files,
    raise_open_files_limit,
)
from moldau.config.values import BrokerConfig


def test_segment_files_take_half_of_the_descriptor_limit_by_default() -> None:
    assert (
        open_segment_files(BrokerConfig(), 20_000, 20_000) == (20_000 - RESERVED_DESCRIPTORS) // 2
    )
    assert open_segment_files(BrokerConfig({"log.open.files.max": "300"}), 1024, 4096) == 300


@pytest.mark.parametrize(
    ("configured", "soft", "message"),
    [
        ("-1", 100, "RLIMIT_NOFILE is 100 (hard limit 100): a node needs at least 288"),
        (
            "5",
            20_000,
            f"log.open.files.max=5: use -1 (half of RLIMIT_NOFILE) or at least {MIN_OPEN_SEGMENT_FILES}",
        ),
        ("1000", 1024, "log.open.files.max=1000 does not fit: RLIMIT_NOFILE is 1024"),
    ],
)
def test_descriptors_that_cannot_fit_are_one_clear_line(
    configured: str, soft: int, message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        open_segment_files(BrokerConfig({"log.open.files.max": configured}), soft, soft)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_the_internal_topics_must_fit_under_the_partition_caps() -> None:
    check_partition_limits(BrokerConfig({"max.broker.partitions": "100"}))
    with pytest.raises(ValueError) as refused:
        check_partition_limits(BrokerConfig({"max.broker.partitions": "99"}))
    assert str(refused.value) == (
        "max.broker.partitions=99 leaves no room for the internal topics "
        "(offsets.topic.num.partitions + transaction.state.log.num.partitions = 100); "
        "raise it to at least 100"
    )


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one() -> None:
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, before[1]))
        soft, hard = raise_open_files_limit()
        assert (soft, hard) == resource.getrlimit(resource.RLIMIT_NOFILE)
        assert soft == hard == before[1] or hard == resource.RLIM_INFINITY
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, before)
