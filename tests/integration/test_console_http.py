"""The web console over HTTP against a secured node (SASL PLAIN, Kafka's StandardAuthorizer; the
server of test_acls.py): the console logs in with a --command-config properties file, shows
what the user's ACLs allow, and says in the page, as an authorization error, what they refuse.
Plus what the cluster refuses (a topic that exists) and a bad login, shown in the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation

from .console import ConsoleHttp, ConsoleProcess, running_console
from .test_acls import (  # the module-scoped server and its fixtures
    USERS,
    allow,
    bootstrap,  # noqa: F401
    create_topics,
    grant,
    name,
    produce,
    server,  # noqa: F401
)
from .test_sasl_listeners import PLAIN_MODULE

pytestmark = pytest.mark.timeout(120)


def command_config(directory: Path, user: str, password: str) -> Path:
    """The Java client's SASL settings, as Kafka's tools read them."""
    path = directory / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_MODULE} required username="{user}" password="{password}";\n'
    )
    return path


@pytest.fixture(scope="module")
def alice(
    bootstrap: str,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ConsoleProcess]:
    settings = command_config(tmp_path_factory.mktemp("alice"), "alice", USERS["alice"])
    with running_console(bootstrap, ["--command-config", str(settings)]) as console:
        yield console


def test_the_console_shows_only_what_the_acls_let_it_describe(
    alice: ConsoleProcess,
    bootstrap: str,  # noqa: F811
) -> None:
    mine, hidden = name("alice-topic"), name("hidden-topic")
    create_topics(bootstrap, mine, hidden)
    grant(bootstrap, allow("User:alice", mine, AclOperation.DESCRIBE))
    http = ConsoleHttp(alice.url)
    topics = http.get("/topics")
    assert topics.status == 200
    assert f'data-topic="{mine}"' in topics.text
    assert hidden not in topics.text
    refused = http.get(f"/topics/{hidden}")
    assert refused.status == 403
    assert "Not authorized" in refused.text and "TOPIC_AUTHORIZATION_FAILED" in refused.text


def test_an_acl_refusal_of_a_change_is_said_in_the_page(
    alice: ConsoleProcess,
    bootstrap: str,  # noqa: F811
) -> None:
    http = ConsoleHttp(alice.url)
    created = http.post("/topics", {"topic": name("not-allowed"), "partitions": "1"})
    assert created.status == 403
    assert 'data-kind="not-authorized"' in created.text
    assert "TOPIC_AUTHORIZATION_FAILED" in created.text

    readable = name("describe-only")
    create_topics(bootstrap, readable)
    assert produce(bootstrap, "admin", readable, 1) == [None]
    grant(bootstrap, allow("User:alice", readable, AclOperation.DESCRIBE))
    produced = http.post(f"/topics/{readable}/messages", {"value": "v"})
    assert produced.status == 403 and "TOPIC_AUTHORIZATION_FAILED" in produced.text
    browsed = http.get(f"/topics/{readable}/messages")
    assert browsed.status == 403 and "Not authorized" in browsed.text


def test_what_the_cluster_refuses_is_shown_with_the_form_kept(
    bootstrap: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    admin_settings = command_config(tmp_path, "admin", USERS["admin"])
    with running_console(bootstrap, ["--command-config", str(admin_settings)]) as console:
        http = ConsoleHttp(console.url)
        topic = name("taken")
        assert http.post("/topics", {"topic": topic, "partitions": "2"}).status == 303
        again = http.post("/topics", {"topic": topic, "partitions": "2"})
        assert again.status == 409
        assert "TOPIC_ALREADY_EXISTS" in again.text and f'value="{topic}"' in again.text
        too_many = http.post("/topics", {"topic": name("rf"), "replication_factor": "3"})
        assert too_many.status == 400 and "INVALID_REPLICATION_FACTOR" in too_many.text
        assert http.get("/topics/no-such-topic").status == 404


def test_a_refused_login_is_said_in_the_page(
    bootstrap: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    wrong = command_config(tmp_path, "alice", "not-her-password")
    with running_console(bootstrap, ["--command-config", str(wrong)]) as console:
        assert "warning: authentication failed" in console.output()
        page = ConsoleHttp(console.url).get("/")
        assert page.status == 503
        assert "Authentication failed" in page.text and "SASL_AUTHENTICATION_FAILED" in page.text
