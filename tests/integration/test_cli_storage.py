"""`moldau storage format | info`: a formatted directory gives the server its cluster id."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient

CLUSTER_ID = "MoldauTestClusterId01A"


def _moldau(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "moldau", *arguments], capture_output=True, text=True, timeout=60
    )


def test_format_then_info_then_serve_with_that_cluster_id(tmp_path: Path, start_server) -> None:
    data = tmp_path / "server-0" / "data"
    formatted = _moldau("storage", "format", "-t", CLUSTER_ID, "--override", f"log.dirs={data}")
    assert formatted.returncode == 0, formatted.stderr
    assert f"cluster.id {CLUSTER_ID}" in formatted.stdout

    again = _moldau("storage", "format", "--override", f"log.dirs={data}")
    assert again.returncode == 1
    assert "already formatted" in again.stderr

    info = _moldau("storage", "info", "--override", f"log.dirs={data}", "--format", "json")
    assert info.returncode == 0, info.stderr
    [row] = json.loads(info.stdout)
    assert (row["formatted"], row["cluster_id"], row["node_id"]) == (True, CLUSTER_ID, 1)

    server = start_server()
    assert server.data_dir == data
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    cluster = admin.describe_cluster().result(timeout=30)
    assert cluster.cluster_id == CLUSTER_ID


def test_info_on_an_unformatted_directory_exits_1(tmp_path: Path) -> None:
    info = _moldau("storage", "info", "--override", f"log.dirs={tmp_path / 'empty'}")
    assert info.returncode == 1
    assert "not formatted" in info.stdout
