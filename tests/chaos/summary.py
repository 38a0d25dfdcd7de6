"""The campaign's table for RELIABILITY.md, from the runs.jsonl that tests/chaos/test_chaos.py
writes (one JSON line per run).

    python -m tests.chaos.summary chaos-artifacts/campaign-*/runs.jsonl
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

COLUMNS = (
    "scenario",
    "runs",
    "invalid runs",
    "faults",
    "acknowledged",
    "lost",
    "duplicated",
    "other anomalies",
    "txn committed / aborted",
    "unavailable s p50 / max",
)


def table(runs: list[dict[str, Any]]) -> str:
    by_scenario: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_scenario[run["scenario"]].append(run)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for scenario, group in by_scenario.items():
        unavailable = [s for run in group for s in run["unavailable_s"]]
        other: dict[str, int] = defaultdict(int)
        for run in group:
            for kind, count in run["anomalies"].items():
                if kind not in ("lost", "duplicated"):
                    other[kind] += count
        # acks=1 scenarios tolerate loss: report what was lost all the same
        lost = sum(run["lost"] + run.get("tolerated", {}).get("lost", 0) for run in group)
        duplicated = sum(
            run["duplicated"] + run.get("tolerated", {}).get("duplicated", 0) for run in group
        )
        cells = [
            scenario,
            str(len(group)),
            str(sum(1 for run in group if not run["valid"])),
            str(sum(run["faults"] for run in group)),
            f"{sum(run['acknowledged'] for run in group):,}",
            str(lost),
            str(duplicated),
            ", ".join(f"{k} {v}" for k, v in sorted(other.items())) or "0",
            f"{sum(r['transactions_committed'] for r in group):,} / "
            f"{sum(r['transactions_aborted'] for r in group):,}",
            f"{statistics.median(unavailable):.1f} / {max(unavailable):.1f}"
            if unavailable
            else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(paths: list[str]) -> None:
    runs = [
        json.loads(line)
        for path in paths
        for line in Path(path).read_text().splitlines()
        if line.strip()
    ]
    print(table(runs))
    problems = [(r["scenario"], r["seed"], p) for r in runs for p in r["problems"]]
    for scenario, seed, problem in problems:
        print(f"\n- {scenario} seed {seed}: {problem}")


if __name__ == "__main__":
    main(sys.argv[1:])
