"""The CI subset of the fuzzing campaign (`scripts/fuzz.sh` runs the long one; FUZZING.md).

Each atheris target runs a fixed number of inputs from a fixed seed over the committed seeds, so
a run is repeatable; every input a fuzzer once broke the code with is replayed from
`regressions/`; and the network fuzzer sends a few thousand frames to a real server process.
About 70 s on a loaded 2-core machine, and 15 s more for the quorum fuzzer's cluster.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz import fuzz_frames, fuzz_records
from tests.fuzz.network import ServerProcess, Settings, fuzz, replay

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
REGRESSIONS = HERE / "regressions"
ROOT = HERE.parent.parent

# Inputs per target (every committed seed runs first): each costs 5-15 s here.
RUNS = {"frames": 20_000, "records": 60_000, "handlers": 3_000, "sasl": 20_000}
SEEDS = {"frames": "requests", "records": "records", "handlers": "handlers", "sasl": "sasl"}


@pytest.mark.parametrize("target", sorted(RUNS))
def test_atheris_target_finds_nothing_in_a_fixed_run(target: str, tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "tests.fuzz.run", target,
        f"-runs={RUNS[target]}", "-seed=1", "-rss_limit_mb=1536", "-timeout=30",
        f"-artifact_prefix={tmp_path}/", str(tmp_path), str(CORPUS / SEEDS[target]),
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )
    output = result.stderr + result.stdout
    assert result.returncode == 0, f"{target} fuzzing failed:\n{output[-6000:]}"
    # (libFuzzer may count one run more than asked, when a run was under way as it stopped)
    done = re.search(r"Done (\d+) runs", output)
    assert done is not None and int(done.group(1)) >= RUNS[target], output[-2000:]


@pytest.mark.parametrize(
    "path", sorted((REGRESSIONS / "frames").iterdir()), ids=lambda path: path.name
)
def test_frames_that_once_broke_decoding_are_refused_cleanly(path: Path) -> None:
    fuzz_frames.test_one_input(path.read_bytes())


@pytest.mark.parametrize(
    "path", sorted((REGRESSIONS / "records").iterdir()), ids=lambda path: path.name
)
def test_batches_that_once_broke_the_validator_are_refused_cleanly(path: Path) -> None:
    fuzz_records.test_one_input(path.read_bytes())


def test_requests_that_once_broke_a_handler_are_answered_cleanly() -> None:
    from tests.fuzz import fuzz_handlers

    frames = [path.read_bytes() for path in sorted((REGRESSIONS / "handlers").iterdir())]
    fuzz_handlers.replay(frames)


def test_requests_that_once_took_a_server_down_leave_it_serving(tmp_path: Path) -> None:
    failure = replay(REGRESSIONS / "network", Settings(artifacts=tmp_path))
    assert failure is None, failure


def test_network_fuzzing_leaves_the_server_alive_bounded_and_serving(tmp_path: Path) -> None:
    settings = Settings(frames=15_000, seed=1, connections=32, artifacts=tmp_path / "artifacts")
    server = ServerProcess(tmp_path)
    try:
        figures = fuzz(
            server.host,
            server.port,
            server.pid,
            settings,
            output=server.output,
            output_text=lambda: "".join(server.output.tail),
        )
    finally:
        code = server.stop()
    assert figures.failure is None, figures.failure
    assert code == 0, "".join(server.output.tail)
    assert figures.frames == settings.frames
    assert figures.crashes == figures.hangs == figures.tracebacks == 0
    assert figures.peak_rss_mb < settings.rss_limit_mb


def test_a_client_cannot_produce_to_an_internal_topic() -> None:
    """Found by fuzzing: a Produce to __consumer_offsets was appended, and the coordinator
    failed on it at its next load. Kafka answers INVALID_TOPIC_EXCEPTION, and so does Moldau."""
    from moldau.protocol.records import NewRecord, build_batch
    from tests.fuzz.fuzz_handlers import FuzzNode

    node = FuzzNode()
    try:
        batch = build_batch([NewRecord(key=b"\x00", value=b"garbage")])
        for topic in ("__consumer_offsets", "__transaction_state"):
            response = node.request(0, 9, {
                "acks": -1, "timeout": 10_000,
                "topic_data": [{"name": topic,
                                "partition_data": [{"index": 0, "records": batch}]}],
            })  # fmt: skip
            [answer] = response.responses[0].partition_responses
            assert answer.error_code == 17, (topic, answer)  # INVALID_TOPIC_EXCEPTION
        node.check_logs(b"")
    finally:
        node.close()


def test_quorum_fuzzing_leaves_a_leader_that_commits(tmp_path: Path) -> None:
    """Hostile schema-valid Raft RPCs to the controller listeners of three combined nodes
    (`quorum.py`): every one answered, no node down or logging an error, and a CreateTopics
    committed every 500 messages and at the end."""
    from tests.fuzz.quorum import run

    figures = run(
        messages=2_000,
        seed=1,
        check_every=500,
        base=tmp_path / "cluster",
        artifacts=tmp_path / "artifacts",
    )
    assert figures.failure is None, figures.failure
    assert figures.messages == 2_000 and figures.commits >= 5
    for refusal in ("inconsistent_cluster_id", "invalid_request", "fenced_leader_epoch"):
        assert figures.answers[refusal] > 0, figures.answers
