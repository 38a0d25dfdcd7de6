"""ssl.principal.mapping.rules: Kafka's rule syntax and default, over real certificates."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from moldau.net.principal import (
    ANONYMOUS,
    PrincipalMappingError,
    distinguished_name,
    map_name,
    parse_rules,
    principal_builder,
)
from tests.certificates import CLIENT_PRINCIPAL, make_certificates

DN = "CN=kafka1,OU=ServiceUsers,O=Acme,C=US"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("DEFAULT", DN),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "kafka1"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$3/L", "kafka1@acme"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$3/U", "KAFKA1@ACME"),
        ("RULE:^CN=(?P<user>[^,]*),.*$/${user}/", "kafka1"),
        ("RULE:^CN=nobody,.*$/x/, RULE:^CN=(.*?),.*$/$1/", "kafka1"),  # the first match wins
        ("RULE:^CN=nobody.*$/x/,DEFAULT", DN),
        (r"RULE:^CN=(.*?),OU=(.*?),.*$/$2\/$1/", "ServiceUsers/kafka1"),  # an escaped slash
        (r"RULE:^CN=(.*?),.*$/\$$1/", "$kafka1"),  # a quoted dollar
    ],
)
def test_rules_map_a_name_as_kafka_does(rules: str, expected: str) -> None:
    assert map_name(parse_rules(rules), DN) == expected


def test_a_name_no_rule_applies_to_is_refused() -> None:
    with pytest.raises(
        PrincipalMappingError, match=r"no ssl\.principal\.mapping\.rules rule applies"
    ):
        map_name(parse_rules("RULE:^CN=other,.*$/x/"), DN)


@pytest.mark.parametrize("rules", ["", "RULE:abc", "SOMETHING", "RULE:(/x/", "DEFAULT DEFAULT"])
def test_rules_that_do_not_parse_are_refused(rules: str) -> None:
    with pytest.raises(PrincipalMappingError):
        parse_rules(rules)


def test_the_default_principal_is_the_whole_name_most_specific_first(tmp_path: Path) -> None:
    certificates = make_certificates(tmp_path)
    first = certificates.text("client.crt").split("-----END CERTIFICATE-----")[0]
    der = ssl.PEM_cert_to_DER_cert(first + "-----END CERTIFICATE-----\n")
    assert distinguished_name(der) == "CN=client,OU=test,O=Moldau"
    assert principal_builder("DEFAULT")(der) == CLIENT_PRINCIPAL
    assert principal_builder("RULE:^CN=(.*?),.*$/$1/")(der) == "User:client"
    assert principal_builder("DEFAULT")(None) == ANONYMOUS
