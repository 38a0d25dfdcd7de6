"""The principal of a TLS client: its certificate's distinguished name, mapped by
`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper and DefaultKafkaPrincipalBuilder).

Rules, tried in order, the first whose pattern matches the whole name wins:

    RULE:pattern/replacement/      the name, with `pattern` replaced ($1, ${name} refer to groups)
    RULE:pattern/replacement/L     ... then lower-cased (U: upper-cased)
    DEFAULT                        the name as it is

separated by commas; `\\/` writes a slash inside a pattern or replacement. A name no rule matches
fails the connection (as Kafka's does). The name is written as Java's `X500Principal.getName()`
writes it (RFC 2253: most specific first, `CN=client,OU=test,O=Moldau`). A client that sent no
certificate is `User:ANONYMOUS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"
USER = "User:"


class PrincipalMappingError(ValueError):
    """The rules do not parse, or no rule applies to a name."""


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result = self.pattern.sub(lambda match: _expand(match, self.replacement), name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _until_slash(text: str, start: int) -> tuple[str, int]:
    """The text from `start` to the next slash not escaped by a backslash, and the index after
    that slash."""
    index = start
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            index += 2
            continue
        if char == "/":
            return text[start:index], index + 1
        index += 1
    raise PrincipalMappingError(f"unterminated rule at {text[start - 5 :]!r}")


def parse_rules(text: str) -> tuple[MappingRule, ...]:
    rules: list[MappingRule] = []
    index = 0
    text = text.strip()
    while index < len(text):
        if text[index] in " \t\n,":
            index += 1
            continue
        if text.startswith("DEFAULT", index):
            rules.append(MappingRule(None))
            index += len("DEFAULT")
        elif text.startswith("RULE:", index):
            pattern, index = _until_slash(text, index + len("RULE:"))
            replacement, index = _until_slash(text, index)
            case = ""
            if index < len(text) and text[index] in "LU":
                case, index = text[index], index + 1
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as error:
                raise PrincipalMappingError(f"invalid pattern {pattern!r}: {error}") from None
            rules.append(MappingRule(compiled, replacement, case))
        else:
            raise PrincipalMappingError(
                f"invalid rule at {text[index:]!r}: rules are RULE:pattern/replacement/[LU] "
                "or DEFAULT, separated by commas"
            )
        while index < len(text) and text[index] in " \t\n":
            index += 1
        if index < len(text) and text[index] != ",":
            raise PrincipalMappingError(f"invalid rule at {text[index:]!r}: expected a comma")
    if not rules:
        raise PrincipalMappingError("no rules (use DEFAULT for the whole name)")
    return tuple(rules)


def _expand(match: re.Match[str], replacement: str) -> str:
    """Java's replacement syntax: $n and ${name} are groups, a backslash quotes the next char."""
    out: list[str] = []
    index = 0
    while index < len(replacement):
        char = replacement[index]
        if char == "\\" and index + 1 < len(replacement):
            out.append(replacement[index + 1])
            index += 2
        elif char == "$" and replacement.startswith("{", index + 1):
            end = replacement.index("}", index)
            out.append(match.group(replacement[index + 2 : end]) or "")
            index = end + 1
        elif char == "$" and index + 1 < len(replacement) and replacement[index + 1].isdigit():
            end = index + 1
            while end < len(replacement) and replacement[end].isdigit():
                end += 1
            out.append(match.group(int(replacement[index + 1 : end])) or "")
            index = end
        else:
            out.append(char)
            index += 1
    return "".join(out)


def map_name(rules: tuple[MappingRule, ...], name: str) -> str:
    for rule in rules:
        result = rule.apply(name)
        if result is not None:
            return result
    raise PrincipalMappingError(f"no ssl.principal.mapping.rules rule applies to {name!r}")


def distinguished_name(certificate_der: bytes) -> str:
    """The subject of a certificate in RFC 2253 form (as Java's X500Principal.getName())."""
    from cryptography import x509

    return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()


def principal_builder(rules_text: str) -> Callable[[bytes | None], str]:
    """`ssl.principal.mapping.rules` -> a function from a client certificate (DER, or None) to
    its principal; PrincipalMappingError if the rules do not parse."""
    rules = parse_rules(rules_text)

    def principal_of(certificate_der: bytes | None) -> str:
        if certificate_der is None:
            return ANONYMOUS
        return USER + map_name(rules, distinguished_name(certificate_der))

    return principal_of
