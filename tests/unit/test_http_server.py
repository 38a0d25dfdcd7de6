"""`moldau.http_server`: the `http[s]://HOST:PORT[,...]` settings of a node's HTTP listeners."""

from __future__ import annotations

import pytest

from moldau.http_server import HttpListener, parse_listeners


def test_listeners_parse_with_their_scheme_host_and_port() -> None:
    assert parse_listeners("http://127.0.0.1:9644, https://[::1]:0/") == [
        HttpListener("127.0.0.1", 9644, "http"),
        HttpListener("::1", 0, "https"),
    ]


def test_a_listener_without_host_listens_on_every_address() -> None:
    [listener] = parse_listeners("HTTP://:9644")
    assert (listener.host, listener.scheme, listener.url) == (
        "0.0.0.0",
        "http",
        "http://0.0.0.0:9644",
    )


def test_an_empty_value_names_no_listener() -> None:
    assert parse_listeners("") == []
    assert parse_listeners(" , ") == []


def test_an_ipv6_listener_url_brackets_its_host() -> None:
    assert HttpListener("::1", 80).url == "http://[::1]:80"
    assert HttpListener("::1", 80, "https").is_tls


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("127.0.0.1:9644", "is not an http://HOST:PORT"),
        ("ftp://127.0.0.1:21", "is not an http://HOST:PORT"),
        ("http://127.0.0.1", "has no valid port"),
        ("http://127.0.0.1:65536", "has no valid port"),
        ("http://127.0.0.1:-1", "has no valid port"),
    ],
)
def test_a_malformed_listener_is_refused_saying_what_is_wrong(value: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_listeners(value)
