"""Which seeds a randomised simulation test runs, and how a failing one is reported.

- `MOLDAU_SIM_SEED=123`: run only seed 123 (replay a failure);
- `MOLDAU_SIM_SEEDS=100000`: run that many seeds per test (a long campaign by hand);
- `MOLDAU_SIM_FIRST_SEED=5000`: start counting there (explore seeds CI never ran).

A failure names its seed, the command that replays it and the last events of the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from tests.simulation.cluster import SimulatedCluster


def seeds(default_count: int) -> Iterator[int]:
    single = os.environ.get("MOLDAU_SIM_SEED")
    if single:
        yield int(single)
        return
    count = int(os.environ.get("MOLDAU_SIM_SEEDS", default_count))
    first = int(os.environ.get("MOLDAU_SIM_FIRST_SEED", 0))
    yield from range(first, first + count)


def run_seeds(test_name: str, default_count: int, run: Callable[[int], object]) -> list[object]:
    """Run `run(seed)` for every seed; on the first failure, fail with a replay command."""
    results = []
    for seed in seeds(default_count):
        clusters: list[SimulatedCluster] = []
        SimulatedCluster.created = clusters
        try:
            results.append(run(seed))
        except Exception as error:
            trace = clusters[-1].format_trace() if clusters else ""
            raise AssertionError(
                f"seed {seed} failed: {type(error).__name__}: {error}\n"
                f"replay: MOLDAU_SIM_SEED={seed} pytest tests/simulation -k {test_name}\n"
                f"last events:\n{trace}"
            ) from error
        finally:
            SimulatedCluster.created = None
    return results
