"""The `moldau` command as a person meets it: `--version`, help with readable placeholders, and a
server that leaves nothing in the working directory but its data."""

from __future__ import annotations

import re

import pytest

from .test_cli_support import moldau

pytestmark = pytest.mark.timeout(120)


def test_version_option_prints_the_version_as_the_version_command_does() -> None:
    printed = moldau("--version", bootstrap=None).text
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*\n|unknown\n", printed)
    assert moldau("version", bootstrap=None).text == printed


@pytest.mark.parametrize(
    "command",
    [("consume",), ("produce",), ("topic", "create"), ("group", "reset-offsets"),
     ("cluster", "reassign", "execute"), ("perf", "produce"), ("server",)],
)  # fmt: skip
def test_help_shows_placeholders_not_python_types(command: tuple[str, ...]) -> None:
    shown = moldau(*command, "--help", bootstrap=None).text
    assert not re.search(r"<(str|int|bool|float|list\[\w+\]|Path|path|file)>", shown), shown
    assert "python -m" not in shown


def test_help_names_what_a_value_is() -> None:
    consume = moldau("consume", "--help", bootstrap=None).text
    assert re.search(r"--count\s+-n,-c\s+COUNT\s", consume)
    assert re.search(r"-X\s+KEY=VALUE\s", consume)
    assert re.search(r"--bootstrap-server\s+-b\s+HOST:PORT\s", consume)
    assert re.search(r"--exit\s+-e\s+Exit once", consume)  # a flag takes no value
    assert "Usage: moldau consume [OPTIONS] {TOPIC}..." in consume


def test_server_leaves_nothing_in_the_working_directory_but_its_data(start_server, tmp_path):  # type: ignore[no-untyped-def]
    working_dir = tmp_path / "cwd"
    working_dir.mkdir()
    server = start_server(working_dir=working_dir)
    moldau("topic", "create", "left-behind", bootstrap=server.bootstrap_servers)
    moldau("topic", "list", bootstrap=server.bootstrap_servers)
    assert sorted(p.name for p in working_dir.iterdir()) == []
