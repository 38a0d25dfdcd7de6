"""The console's routes over HTTP (Starlette's TestClient) against a recording fake backend:
hostile and malformed input is refused before the backend is asked, cross-site writes are
refused, what the cluster says is shown in the page (an ACL refusal as such), and no answer
carries a stack trace."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from starlette.testclient import TestClient

from moldau.client.admin import ConfigEntry, ConfigSource, GroupListing, MemberDescription
from moldau.client.cluster import BrokerInfo
from moldau.client.errors import ErrorCode, KafkaException
from moldau.console.app import MAX_FORM_BYTES, build_app
from moldau.console.lag import LagSample
from moldau.console.model import (
    BrowsedMessage,
    BrowseRequest,
    BrowseResult,
    GroupDetail,
    Overview,
    PartitionLag,
    PartitionRow,
    Produced,
    ProduceRequest,
    ResetRequest,
    TopicDetail,
    TopicRow,
    TopicsView,
)
from moldau.console.rendering import RecordFormat, render_bytes
from moldau.console.security import CsrfToken, allowed_hosts
from moldau.types import TopicPartition

TOKEN = "test-token"
HOST = "127.0.0.1:8080"
ORIGIN = f"http://{HOST}"


class FakeBackend:
    """Answers with fixed data; `calls` lists what was asked; `failure` is raised instead."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.failure: BaseException | None = None
        self.value: bytes = b'{"ok": true}'

    def _called(self, name: str, argument: Any = None) -> None:
        self.calls.append((name, argument))
        if self.failure is not None:
            raise self.failure

    async def overview(self) -> Overview:
        self._called("overview")
        return Overview(
            cluster_id="cluster-1",
            controller_id=1,
            brokers=(BrokerInfo(1, "127.0.0.1", 9092),),
            quorum=None,
            quorum_error="UNSUPPORTED_VERSION",
            topic_count=1,
            partition_count=1,
            under_replicated=0,
            offline=0,
        )

    async def topics(self) -> TopicsView:
        self._called("topics")
        row = TopicRow(
            name="orders",
            partitions=1,
            replication_factor=1,
            internal=False,
            under_replicated=0,
            size_bytes=2048,
        )
        return TopicsView(topics=(row,), sizes_error=None)

    async def topic(self, name: str) -> TopicDetail:
        self._called("topic", name)
        partition = PartitionRow(
            partition=0,
            leader=1,
            leader_epoch=0,
            replicas=(1,),
            isr=(1,),
            offline_replicas=(),
            earliest=0,
            latest=3,
            size_bytes=100,
        )
        config = ConfigEntry(
            "retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False
        )
        return TopicDetail(
            name=name,
            topic_id=None,
            internal=False,
            partitions=(partition,),
            offsets_error=None,
            sizes_error=None,
            configs=(config,),
            configs_error=None,
        )

    async def create_topic(self, **arguments: Any) -> None:
        self._called("create_topic", arguments)

    async def set_topic_config(self, topic: str, name: str, value: str) -> None:
        self._called("set_topic_config", (topic, name, value))

    async def browse(self, request: BrowseRequest) -> BrowseResult:
        self._called("browse", request)
        message = BrowsedMessage(
            partition=request.partition,
            offset=0,
            timestamp_ms=1_700_000_000_000,
            timestamp_type="CreateTime",
            key=render_bytes(b"<b>key</b>", request.format),
            value=render_bytes(self.value, request.format),
            headers=(("h<i>", render_bytes(b"<script>alert(1)</script>")),),
        )
        return BrowseResult(
            request=request,
            partitions=1,
            log_start_offset=0,
            high_watermark=1,
            start_offset=0,
            messages=(message,),
        )

    async def produce(self, request: ProduceRequest) -> Produced:
        self._called("produce", request)
        return Produced(topic=request.topic, partition=0, offset=7)

    async def groups(self) -> list[GroupListing]:
        self._called("groups")
        return [GroupListing("g1", "consumer", "Stable", "classic")]

    async def group(self, group_id: str) -> GroupDetail:
        self._called("group", group_id)
        member = MemberDescription("m-1", "client-1", "/127.0.0.1", None, (TopicPartition("t", 0),))
        return GroupDetail(
            group_id=group_id,
            state="Stable",
            protocol_type="consumer",
            protocol="range",
            coordinator=1,
            members=(member,),
            partitions=(
                PartitionLag(topic="t", partition=0, committed=5, log_end_offset=12, member=member),
            ),
            offsets_error=None,
            history=(LagSample(1.0, 9), LagSample(2.0, 7)),
        )

    async def reset_offsets(self, request: ResetRequest) -> dict[TopicPartition, int]:
        self._called("reset_offsets", request)
        return {TopicPartition(request.topic, 0): 0}


@pytest.fixture(scope="module")
def shared_backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture(autouse=True)
def backend(shared_backend: FakeBackend) -> FakeBackend:
    shared_backend.reset()
    return shared_backend


@pytest.fixture(scope="module")
def client(shared_backend: FakeBackend) -> Iterator[TestClient]:
    app = build_app(shared_backend, csrf=CsrfToken(TOKEN), allowed_hosts=allowed_hosts("127.0.0.1"))
    with TestClient(
        app, base_url=ORIGIN, raise_server_exceptions=False, follow_redirects=False
    ) as test_client:
        yield test_client


def post(client: TestClient, path: str, fields: Mapping[str, str], **headers: str) -> Any:
    return client.post(
        path,
        data={"csrf_token": TOKEN, **fields},
        headers={"origin": ORIGIN, **headers},
    )


def test_pages_render_what_the_backend_answers(client: TestClient) -> None:
    assert "cluster-1" in client.get("/").text
    assert "DescribeQuorum was not answered: UNSUPPORTED_VERSION" in client.get("/").text
    assert "2.0 KiB" in client.get("/topics").text
    topic = client.get("/topics/orders")
    assert topic.status_code == 200 and "retention.ms" in topic.text
    group = client.get("/groups/g1")
    assert 'id="total-lag">7<' in group.text
    assert "data-values='[9, 7]'" in group.text


def test_a_live_refresh_gets_only_the_live_part(client: TestClient) -> None:
    live = client.get("/groups/g1", headers={"hx-request": "true"})
    assert live.text.lstrip().startswith('<section id="live"')
    assert "<html" not in live.text


def test_every_answer_carries_the_security_headers(client: TestClient) -> None:
    for path in ("/", "/static/console.js", "/no-such-page"):
        headers = client.get(path).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "'unsafe-inline'" not in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"


def test_message_contents_are_escaped(client: TestClient, backend: FakeBackend) -> None:
    backend.value = b"<img src=x onerror=alert(1)>"
    page = client.get("/topics/orders/messages").text
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<script>alert(1)" not in page and "h&lt;i&gt;" in page


def test_the_browser_parses_its_query(client: TestClient, backend: FakeBackend) -> None:
    client.get("/topics/orders/messages?partition=2&from=timestamp&timestamp=1000&format=hex")
    [(_, request)] = backend.calls
    assert request.partition == 2
    assert (request.start.kind, request.start.value) == ("timestamp", 1000)
    assert request.format is RecordFormat.hex


@pytest.mark.parametrize(
    "query",
    [
        "partition=-1",
        "partition=abc",
        "from=offset&offset=-5",
        "from=offset",
        "from=timestamp&timestamp=tomorrow",
        "from=somewhere",
        "limit=100000",
        "format=xml",
    ],
)
def test_a_bad_browse_query_is_refused_before_the_cluster_is_asked(
    client: TestClient, backend: FakeBackend, query: str
) -> None:
    answer = client.get(f"/topics/orders/messages?{query}")
    assert answer.status_code == 400
    assert 'data-kind="input"' in answer.text
    assert backend.calls == []


@pytest.mark.parametrize(
    "path",
    ["/topics/has%20space", "/topics/%3Cscript%3E", "/topics/a%00b", "/topics/" + "x" * 300],
)
def test_an_illegal_topic_name_in_the_path_is_refused(
    client: TestClient, backend: FakeBackend, path: str
) -> None:
    answer = client.get(path)
    assert answer.status_code == 400
    assert "<script>" not in answer.text
    assert backend.calls == []


def test_creating_a_topic_sends_the_validated_values(
    client: TestClient, backend: FakeBackend
) -> None:
    answer = post(
        client,
        "/topics",
        {"topic": "new", "partitions": "3", "replication_factor": "", "configs": "retention.ms=5"},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/topics/new?notice=created"
    assert backend.calls == [
        (
            "create_topic",
            {
                "name": "new",
                "partitions": 3,
                "replication_factor": None,
                "configs": {"retention.ms": "5"},
            },
        )
    ]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"topic": "bad name"}, "topic"),
        ({"topic": "ok", "partitions": "0"}, "partitions"),
        ({"topic": "ok", "partitions": "99999999999999999999999"}, "partitions"),
        ({"topic": "ok", "replication_factor": "-1"}, "replication factor"),
        ({"topic": "ok", "configs": "retention.ms=forever"}, "configs"),
        ({"topic": "ok", "configs": "no.such.config=1"}, "configs"),
    ],
)
def test_a_bad_topic_form_is_shown_again_with_the_problem(
    client: TestClient, backend: FakeBackend, fields: dict[str, str], field: str
) -> None:
    answer = post(client, "/topics", fields)
    assert answer.status_code == 400
    assert f"({field})" in answer.text
    assert f'value="{fields["topic"]}"' in answer.text  # what the user typed is kept
    assert [name for name, _ in backend.calls] == ["topics"]  # only to show the page again


def test_producing_redirects_to_the_message(client: TestClient, backend: FakeBackend) -> None:
    answer = post(
        client,
        "/topics/orders/messages",
        {"partition": "", "key": "k", "value": "v", "headers": "a=1"},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == (
        "/topics/orders/messages?partition=0&from=offset&offset=7&notice=produced"
    )
    [(_, request)] = backend.calls
    assert (request.key, request.value, request.headers) == (b"k", b"v", (("a", b"1"),))


def test_resetting_offsets_takes_any_group_id(client: TestClient, backend: FakeBackend) -> None:
    answer = post(
        client, "/groups/odd%2Fgroup%20id", {"topic": "t", "from": "offset", "offset": "3"}
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/groups/odd%2Fgroup%20id?notice=reset"
    [(_, request)] = backend.calls
    assert request.group_id == "odd/group id"
    assert (request.target.kind, request.target.value) == ("offset", 3)


@pytest.mark.parametrize(
    ("headers", "fields", "status", "said"),
    [
        ({"origin": "http://evil.example"}, {}, 403, "from http://evil.example"),
        ({"origin": "null"}, {}, 403, "from null"),
        ({"origin": "", "sec-fetch-site": "cross-site"}, {}, 403, "cross-site request"),
        ({}, {"csrf_token": "guessed"}, 403, "CSRF token"),
        ({}, {"csrf_token": ""}, 403, "CSRF token"),
    ],
)
def test_cross_site_writes_are_refused(
    client: TestClient,
    backend: FakeBackend,
    headers: dict[str, str],
    fields: dict[str, str],
    status: int,
    said: str,
) -> None:
    request_headers = {"origin": ORIGIN, **headers}
    if request_headers["origin"] == "":
        del request_headers["origin"]
    answer = client.post(
        "/topics",
        data={"csrf_token": TOKEN, "topic": "t", **fields},
        headers=request_headers,
    )
    assert answer.status_code == status
    assert said in answer.text
    assert backend.calls == []


def test_a_foreign_host_name_is_refused(client: TestClient, backend: FakeBackend) -> None:
    """A DNS-rebinding page reaches 127.0.0.1 under its own name: it is not answered."""
    answer = client.get("/", headers={"host": "rebind.example:8080"})
    assert answer.status_code == 400
    assert backend.calls == []
    assert client.get("/", headers={"host": "localhost:8080"}).status_code == 200


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"topic=t&csrf_token=" + TOKEN.encode(), "text/plain", 415),
        (b'{"topic": "t"}', "application/json", 415),
        (b"topic=%FF%FE&csrf_token=" + TOKEN.encode(), "application/x-www-form-urlencoded", 400),
        (b"\xff\xfe", "application/x-www-form-urlencoded", 400),
        (b"a=1&" * 100, "application/x-www-form-urlencoded", 400),
        (b"v=" + b"x" * (MAX_FORM_BYTES + 1), "application/x-www-form-urlencoded", 413),
    ],
)
def test_malformed_forms_are_refused(
    client: TestClient, backend: FakeBackend, body: bytes, content_type: str, status: int
) -> None:
    answer = client.post(
        "/topics", content=body, headers={"origin": ORIGIN, "content-type": content_type}
    )
    assert answer.status_code == status
    assert backend.calls == []


def test_an_oversized_value_is_refused_before_producing(
    client: TestClient, backend: FakeBackend
) -> None:
    answer = post(client, "/topics/orders/messages", {"value": "x" * (1024 * 1024 + 1)})
    assert answer.status_code == 400
    assert "at most 1048576 bytes" in answer.text
    assert "produce" not in [name for name, _ in backend.calls]


def test_an_acl_refusal_is_shown_as_such(client: TestClient, backend: FakeBackend) -> None:
    backend.failure = KafkaException(
        ErrorCode.topic_authorization_failed, "topic 'secret': not authorized"
    )
    answer = client.get("/topics/secret")
    assert answer.status_code == 403
    assert "Not authorized" in answer.text
    assert "TOPIC_AUTHORIZATION_FAILED" in answer.text
    assert 'data-kind="not-authorized"' in answer.text


def test_cluster_errors_are_shown_with_a_fitting_status(
    client: TestClient, backend: FakeBackend
) -> None:
    backend.failure = KafkaException(ErrorCode.unknown_topic_or_partition, "topic 'gone'")
    assert client.get("/topics/gone").status_code == 404
    backend.failure = KafkaException(ErrorCode.network_exception, "no broker reachable")
    unreachable = client.get("/")
    assert unreachable.status_code == 503 and "Cluster unreachable" in unreachable.text


def test_a_live_refresh_that_fails_keeps_polling_and_says_why(
    client: TestClient, backend: FakeBackend
) -> None:
    backend.failure = KafkaException(ErrorCode.network_exception, "no broker reachable")
    live = client.get("/groups/g1", headers={"hx-request": "true"})
    assert live.status_code == 200  # htmx swaps only 2xx answers
    assert 'hx-get="/groups/g1"' in live.text and "Cluster unreachable" in live.text


def test_an_unexpected_error_shows_no_stack_trace(client: TestClient, backend: FakeBackend) -> None:
    backend.failure = RuntimeError("secret internals")
    answer = client.get("/")
    assert answer.status_code == 500
    assert "unexpected error" in answer.text
    assert "Traceback" not in answer.text and "secret internals" not in answer.text


def test_unknown_pages_and_methods(client: TestClient) -> None:
    assert client.get("/nowhere").status_code == 404
    assert client.delete("/topics").status_code == 405
    assert client.get("/static/../app.py").status_code == 404
