"""Kafka's sasl.jaas.config syntax: quoting, escapes, comments, the one module and its ';'."""

from __future__ import annotations

import pytest

from moldau.config.jaas import JaasError, parse_jaas_config


def test_a_plain_login_module_with_users() -> None:
    entry = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret"\n'
        '  user_admin="admin-secret" user_alice="alice;secret";'
    )
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": "admin-secret",
        "user_admin": "admin-secret",
        "user_alice": "alice;secret",
    }


def test_escaped_quotes_and_backslashes_in_values() -> None:
    entry = parse_jaas_config(r'M required password="a\"b\\c" other=word-1.2$x;')
    assert entry.options == {"password": 'a"b\\c', "other": "word-1.2$x"}


def test_comments_and_an_upper_case_flag() -> None:
    entry = parse_jaas_config('/* a */ M REQUIRED // the flag\n user_x="y" /* z */ ;')
    assert entry.flag == "required" and entry.options == {"user_x": "y"}


def test_an_empty_value_in_quotes() -> None:
    assert parse_jaas_config('M optional username="";').options == {"username": ""}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("M required", "';'"),
        ('M required username="admin"', "';'"),
        ("M mandatory;", "Invalid control flag"),
        ('M required username="admin;', "no closing quote"),
        ("M required username=;", "Value not specified for key 'username'"),
        ("M required username;", "'=' after username"),
        ("M required; N required;", "more than one login module"),
        ("M required /* open", "unterminated"),
    ],
)
def test_malformed_values_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(JaasError, match=message):
        parse_jaas_config(text)
