"""Kafka's `sasl.jaas.config` values (Java's JAAS syntax, as Kafka's JaasConfig reads them):

    <login module class> <flag> [<key>=<value> ...];

one login module; the flag is required, requisite, sufficient or optional; a value is a word
(letters, digits and `-_.$`) or a double-quoted string in which a backslash takes the next
character as it is (`\\"` is a quote); `//` and `/* */` comments are skipped. For example

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

`parse_jaas_config(text)` returns the module and its options, or raises `JaasError` saying
where the text went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.$")


class JaasError(ValueError):
    """A sasl.jaas.config value that does not parse."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.index = 0

    def _skip(self) -> None:
        text = self.text
        while self.index < len(text):
            if text[self.index].isspace():
                self.index += 1
            elif text.startswith("//", self.index):
                end = text.find("\n", self.index)
                self.index = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.index):
                end = text.find("*/", self.index + 2)
                if end < 0:
                    raise JaasError("an unterminated /* comment")
                self.index = end + 2
            else:
                return

    def peek(self) -> str:
        self._skip()
        return self.text[self.index] if self.index < len(self.text) else ""

    def word(self, what: str) -> str:
        self._skip()
        start = self.index
        while self.index < len(self.text) and self.text[self.index] in _WORD:
            self.index += 1
        if start == self.index:
            found = self.text[start : start + 10] or "the end"
            raise JaasError(f"expected {what} at {found!r}")
        return self.text[start : self.index]

    def value(self, key: str) -> str:
        if self.peek() != '"':
            if self.peek() in ("", ";"):
                raise JaasError(f"Value not specified for key '{key}'")
            return self.word(f"a value for {key}")
        self.index += 1
        out: list[str] = []
        text = self.text
        while self.index < len(text):
            char = text[self.index]
            if char == "\\" and self.index + 1 < len(text):
                out.append(text[self.index + 1])
                self.index += 2
                continue
            if char == '"':
                self.index += 1
                return "".join(out)
            out.append(char)
            self.index += 1
        raise JaasError(f"the value of {key} has no closing quote")

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            found = self.text[self.index : self.index + 10] or "the end"
            raise JaasError(f"expected {what} at {found!r}")
        self.index += 1


def parse_jaas_config(text: str) -> JaasEntry:
    tokens = _Tokens(text)
    if not tokens.peek():
        raise JaasError("the value is empty (it needs a login module, a flag and ';')")
    module = tokens.word("a login module class")
    flag = tokens.word("a flag (required, requisite, sufficient or optional)")
    if flag.lower() not in FLAGS:
        raise JaasError(
            f"Invalid control flag {flag!r} (required, requisite, sufficient, optional)"
        )
    options: dict[str, str] = {}
    while tokens.peek() not in (";", ""):
        key = tokens.word("an option name or ';'")
        tokens.expect("=", f"'=' after {key}")
        options[key] = tokens.value(key)
    tokens.expect(";", "';' at the end of the login module")
    if tokens.peek():
        raise JaasError(
            "the value holds more than one login module (Kafka's sasl.jaas.config takes one)"
        )
    return JaasEntry(module, flag.lower(), options)
