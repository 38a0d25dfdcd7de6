"""kafka-storage's and kafka-configs' SCRAM syntax: MECHANISM=[name=,password=,iterations=,
salt=,saltedpassword=]."""

from __future__ import annotations

import base64

import pytest

from moldau.cli.scram_settings import ScramSettingError, parse_scram_setting
from moldau.protocol.sasl.scram import salted_password


def test_a_password_is_salted_with_the_given_or_a_random_salt() -> None:
    setting = parse_scram_setting("SCRAM-SHA-512=[name=alice,password=alice-secret]")
    assert (setting.mechanism, setting.name, setting.iterations) == ("SCRAM-SHA-512", "alice", 4096)
    assert setting.salted_password == salted_password(
        "SCRAM-SHA-512", b"alice-secret", setting.salt, 4096
    )
    salt = base64.b64encode(b"0123456789").decode()
    fixed = parse_scram_setting(f'scram-sha-256=[iterations=8192,salt="{salt}",password="a,b=c"]')
    assert fixed.name is None and fixed.salt == b"0123456789" and fixed.iterations == 8192
    assert fixed.salted_password == salted_password("SCRAM-SHA-256", b"a,b=c", b"0123456789", 8192)


def test_a_salted_password_is_taken_as_it_is() -> None:
    salt, salted = base64.b64encode(b"s").decode(), base64.b64encode(b"x" * 32).decode()
    setting = parse_scram_setting(
        f'SCRAM-SHA-256=[name=bob,iterations=4096,salt="{salt}",saltedpassword="{salted}"]'
    )
    assert setting.salted_password == b"x" * 32


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SCRAM-MD5=[name=a,password=b]", "expected SCRAM-SHA-256"),
        ("SCRAM-SHA-512=name=a,password=b", "brackets"),
        ("SCRAM-SHA-512=[name=a,pass=b]", "unknown setting"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=100]", "4096 to 16384"),
        ("SCRAM-SHA-512=[name=a,password=b,iterations=many]", "not a number"),
        ("SCRAM-SHA-512=[name=a]", "give password"),
        ('SCRAM-SHA-512=[name=a,password="b]', "not closed"),
        ("SCRAM-SHA-512=[name=a,salt=!!,saltedpassword=AA==]", "not base64"),
        ("SCRAM-SHA-512=[name=a,password=b,saltedpassword=AA==]", "not both"),
    ],
)
def test_malformed_settings_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ScramSettingError, match=message):
        parse_scram_setting(text)
