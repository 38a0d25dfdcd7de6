"""The `moldau` command as a person meets it: `--version`, help with readable placeholders, a
server that leaves nothing in the working directory but its data, and one verbatim error line for
each common mistake."""

from __future__ import annotations

import http.server
import re
import threading

import pytest

from .support import unique_topic
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


# --- common mistakes: one line, verbatim -----------------------------------------------------


def _error(*arguments: str, bootstrap: str | None, expect: int, stdin: bytes = b"") -> str:
    result = moldau(*arguments, bootstrap=bootstrap, expect=expect, stdin=stdin)
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_config_mistakes_name_the_setting_and_the_command_that_lists_them(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    assert _error("config", "set", "log.retentoin.ms=5", bootstrap=b, expect=1) == (
        "error: broker '1': unknown broker config 'log.retentoin.ms' (INVALID_CONFIG); did you "
        "mean 'log.retention.ms'? `moldau config describe` lists the broker configs\n"
    )
    assert _error("config", "set", "log.retention.ms=abc", bootstrap=b, expect=1) == (
        "error: broker '1': Invalid value abc for configuration log.retention.ms: Not a number "
        "of type LONG (INVALID_CONFIG); `moldau config describe` lists the broker configs\n"
    )
    assert _error("config", "set", "log.retention.ms", bootstrap=b, expect=2) == (
        "error: broker config 'log.retention.ms' is not key=value (example: moldau config set "
        "log.retention.ms=60000)\n"
    )
    # The topic refused does not exist: no hint to describe it.
    assert _error("topic", "create", "typo", "-c", "retentoin.ms=5", bootstrap=b, expect=1) == (
        "error: topic 'typo': unknown topic config 'retentoin.ms' (INVALID_CONFIG); did you mean "
        "'retention.ms'? the topic was not created\n"
    )
    assert _error("topic", "create", "bad", "-c", "retention.ms=abc", bootstrap=b, expect=1) == (
        "error: topic 'bad': Invalid value abc for configuration retention.ms: Not a number of "
        "type LONG (INVALID_CONFIG); the topic was not created\n"
    )
    topic = unique_topic("configured")
    moldau("topic", "create", topic, bootstrap=b)
    assert _error(
        "topic", "alter-config", topic, "-c", "retention.ms=abc", bootstrap=b, expect=1
    ) == (
        f"error: topic '{topic}': Invalid value abc for configuration retention.ms: Not a number "
        f"of type LONG (INVALID_CONFIG); `moldau topic describe {topic}` lists a topic's configs\n"
    )
    assert _error("consume", "t", "-X", "fetch.wait.max.mss=5", bootstrap=b, expect=2) == (
        "error: unknown client setting 'fetch.wait.max.mss' (did you mean 'fetch.wait.max.ms'?)\n"
    )
    assert _error("consume", "t", "-X", "linger.ms", bootstrap=b, expect=2) == (
        "error: setting 'linger.ms' is not key=value (example: -X linger.ms=50)\n"
    )


def test_topic_and_record_mistakes(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("mistakes")
    moldau("topic", "create", topic, bootstrap=b)
    assert _error("topic", "create", topic, bootstrap=b, expect=1) == (
        f"error: topic '{topic}' already exists (TOPIC_ALREADY_EXISTS); see it with "
        f"`moldau topic describe {topic}`\n"
    )
    assert _error("topic", "describe", "no-such-topic", bootstrap=b, expect=1) == (
        "error: topic 'no-such-topic' does not exist (UNKNOWN_TOPIC_OR_PARTITION); list topics "
        "with `moldau topic list`\n"
    )
    assert _error("produce", topic, "-H", "source", bootstrap=b, expect=2) == (
        "error: header 'source' is not key=value (example: -H source=web)\n"
    )
    too_large = _error("produce", topic, bootstrap=b, expect=1, stdin=b"x" * 1_500_000)
    assert too_large.endswith(
        "(MESSAGE_TOO_LARGE); raise the topic's max.message.bytes (`moldau topic alter-config "
        "NAME -c max.message.bytes=BYTES`) or the broker's message.max.bytes (`moldau config set "
        "message.max.bytes=BYTES`)\n"
    )
    assert _error("consume", topic, "-o", "start", bootstrap=b, expect=2) == (
        "error: offset 'start' is not one of beginning, end, stored, N, -N or @TIMESTAMP\n"
    )
    assert _error("topic", "create", "zero", "-p", "0", bootstrap=b, expect=2) == (
        "error: -p 0: a topic needs at least one partition (-1 takes the broker's num.partitions)\n"
    )
    assert _error("topic", "create", "zero", "-r", "0", bootstrap=b, expect=2) == (
        "error: -r 0: a topic needs at least one replica (-1 takes the broker's "
        "default.replication.factor)\n"
    )


def test_counts_in_lines_take_the_right_number(server) -> None:  # type: ignore[no-untyped-def]
    b = server.bootstrap_servers
    topic = unique_topic("counted")
    moldau("topic", "create", topic, bootstrap=b)
    one = moldau("produce", topic, "--format", "text", bootstrap=b, stdin=b"only\n")
    assert one.stderr == f"Produced 1 record to {topic}.\n"
    two = moldau("produce", topic, "--format", "text", bootstrap=b, stdin=b"a\nb\n")
    assert two.stderr == f"Produced 2 records to {topic}.\n"


def test_an_address_that_answers_http_is_named_as_such() -> None:
    web = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=web.serve_forever, daemon=True)
    thread.start()
    try:
        address = f"127.0.0.1:{web.server_address[1]}"
        assert _error("topic", "list", bootstrap=address, expect=3) == (
            f"error: {address} answers HTTP, not the Kafka protocol; give the address of a "
            "plaintext Kafka listener with -b HOST:PORT\n"
        )
    finally:
        web.shutdown()
        thread.join(10)
        web.server_close()
