"""Every command's `--help` shows its help text as written: bracketed examples such as
`'SCRAM-SHA-512=[password=...]'` are text, not rich markup tags to be dropped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from moldau.cli.main import readable_help, register_commands


def _built() -> Any:
    """The whole command tree as `moldau` builds it (typer's own click classes since 0.22)."""
    command: Any = typer.main.get_command(register_commands())
    readable_help(command)
    return command


def _paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _paths(sub, (*path, name))


def _source_texts(command: Any) -> list[str]:
    """The help texts of a command and its parameters as the source writes them."""
    callback = command.callback
    texts = [(callback.__doc__ or "") if callback is not None else ""]
    texts += [parameter.help or "" for parameter in command.params if hasattr(parameter, "help")]
    return [text.replace("\\[", "[") for text in texts if text]


def _collapsed(text: str) -> str:
    """Rendered help without its box drawing and line breaks, one space between words."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


ROOT = _built()


@pytest.mark.parametrize("path", list(_paths(ROOT)), ids=lambda path: " ".join(path) or "moldau")
def test_help_shows_every_bracketed_example_whole(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    command = ROOT
    for name in path:
        command = command.commands[name]
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as exited:
        ROOT.main([*path, "--help"], prog_name="moldau")
    output = capsys.readouterr().out
    assert exited.value.code == 0, output
    shown = _collapsed(output)
    examples = [
        " ".join(found.split())
        for text in _source_texts(command)
        for found in re.findall(r"\S*\[[^\]]*\]\S*", text)
    ]
    missing = [example for example in examples if example not in shown]
    assert not missing, f"moldau {' '.join(path)} --help lost {missing}:\n{output}"


def test_the_scram_examples_are_among_those_checked() -> None:
    storage_format = ROOT.commands["storage"].commands["format"]
    assert any(
        "SCRAM-SHA-512=[name=alice,password=alice-secret]" in text
        for text in _source_texts(storage_format)
    )
