"""Kafka's windowed rate (`moldau.rate.SampledRate`): windows that start with a record, the
span of at least all but one window, and windows emptied once they are too old; a quota over it
(`RateQuota`): exceeded above its limit, and the delay that brings the rate back to it."""

import pytest

from moldau.rate import UNLIMITED, RateQuota, SampledRate, kafka_round

T = 1_000_000  # any start: windows begin with their first record, not on a grid


def test_a_fresh_rate_spans_all_but_one_window() -> None:
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(9_000, T)
    assert rate.window_ms(T) == 10_000
    assert rate.measure(T) == 900.0


def test_an_empty_rate_is_zero_over_all_but_one_window() -> None:
    rate = SampledRate(samples=3, window_ms=1000)
    assert rate.measure(T) == 0.0
    assert rate.window_ms(T) == 2000


def test_a_partial_last_window_counts_for_what_has_passed_of_it() -> None:
    # Kafka's ClientQuotaManagerTest: 400 a second for 10 s, then 2300 half a second later:
    # 6300 bytes over 10.5 s.
    rate = SampledRate(samples=11, window_ms=1000)
    for second in range(10):
        rate.record(400, T + second * 1000)
    rate.record(2300, T + 10_500)
    assert rate.window_ms(T + 10_500) == 10_500
    assert rate.measure(T + 10_500) == pytest.approx(600.0)


def test_a_window_starts_with_the_record_that_opens_it() -> None:
    rate = SampledRate(samples=2, window_ms=1000)
    rate.record(100, T + 500)
    rate.record(100, T + 1499)  # the same window: it began at T + 500
    rate.record(100, T + 1500)  # the next
    # Both windows are still young: 1 s since the oldest began, all but one window counted.
    assert rate.window_ms(T + 1500) == 1000
    assert rate.measure(T + 1500) == 300.0
    # At T + 2500 the first window (T + 500) is two windows old: emptied, it starts again now.
    assert rate.measure(T + 2500) == 100.0


def test_windows_older_than_all_the_windows_together_are_emptied() -> None:
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(10**9, T)
    assert rate.measure(T + 10_999) > 0
    assert rate.measure(T + 11_000) == 0.0


def test_a_steady_rate_is_measured_over_the_time_since_the_oldest_window() -> None:
    rate = SampledRate(samples=3, window_ms=1000)
    for tick in range(0, 10_000, 100):  # 10 every 100 ms: 100 a second
        rate.record(10, T + tick)
    # The three windows began at T + 7000, 8000 and 9000 and hold 30 records.
    assert rate.window_ms(T + 9_900) == 2900
    assert rate.measure(T + 9_900) == pytest.approx(300 / 2.9)


def test_a_negative_record_takes_back_what_was_recorded() -> None:
    rate = SampledRate(samples=11, window_ms=1000)
    rate.record(5_000, T)
    rate.record(-5_000, T)
    assert rate.measure(T) == 0.0


def test_kafka_rounds_halves_up() -> None:
    assert [kafka_round(x) for x in (0.5, 1.5, 2.5, -0.5, 2.49)] == [1, 2, 3, 0, 2]


def test_a_rate_needs_a_window() -> None:
    with pytest.raises(ValueError):
        SampledRate(samples=0, window_ms=1000)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_quota_rate_spans_at_least_all_but_one_window_then_the_windows_recorded():
    clock = Clock()
    quota = RateQuota(lambda: 1000, now=clock, samples=11, window_s=1.0)
    quota.record(9_000)
    assert quota.rate() == 900.0  # 9000 bytes over the 10 s minimum span
    assert not quota.exceeded()
    quota.record(2_000)
    assert quota.exceeded()
    clock.now += 5.5  # 5 whole windows since the first began: 5 more counted (Kafka's Rate)
    assert quota.rate() == pytest.approx(11_000 / 10.5)
    clock.now += 20  # every window expired
    assert quota.rate() == 0.0 and not quota.exceeded()


def test_a_quota_at_the_default_rate_is_never_exceeded():
    clock = Clock()
    quota = RateQuota(lambda: UNLIMITED, now=clock, samples=11, window_s=1.0)
    quota.record(10**15)
    assert not quota.exceeded()


def test_a_quota_limit_is_read_when_asked():
    clock = Clock()
    limit = [10**9]
    quota = RateQuota(lambda: limit[0], now=clock, samples=2, window_s=1.0)
    quota.record(5_000)
    assert not quota.exceeded()
    limit[0] = 1_000
    assert quota.exceeded()


def test_a_quota_delay_brings_the_rate_back_to_its_limit() -> None:
    clock = Clock()
    quota = RateQuota(lambda: 1000, now=clock, samples=11, window_s=1.0)
    assert quota.delay_s() == 0.0
    quota.record(15_000)  # 1500 B/s over the 10 s span: half as much again as the limit
    assert quota.delay_s() == pytest.approx(5.0)
    clock.now += 10.5  # the window spans 10.5 s: 15000 bytes are 4.5 s worth too many
    assert quota.delay_s() == pytest.approx(4.5)
    clock.now += 4.5  # (the windows have expired)
    assert quota.delay_s() == 0.0
    assert RateQuota(lambda: UNLIMITED, now=clock, samples=2, window_s=1.0).delay_s() == 0.0
