"""The web console in headless Chromium (Debian's, driven by Playwright) against a real Moldau
node: a topic created, a message produced and browsed through the pages, and a group's lag
watched falling to zero, without a reload, while a confluent-kafka consumer drains it; then its
offsets reset through the page. Each page is saved as a screenshot (tests/artifacts/console/).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import MoldauServer
from .console import (
    CHROMIUM_ARGUMENTS,
    ConsoleProcess,
    chromium_path,
    running_console,
    screenshot,
    wait_until,
)
from .support import unique_topic

pytestmark = pytest.mark.timeout(120)

RECORDS = 300
_REFUSED_ANSWER = "Failed to load resource: the server responded with a status of 4"


@pytest.fixture(scope="module")
def console(server: MoldauServer) -> Iterator[ConsoleProcess]:
    with running_console(server.bootstrap_servers) as process:
        yield process


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGUMENTS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A page that fails the test on a script error or a Content-Security-Policy violation
    (an answer of status 4xx that a test asks for is no problem)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error" and not message.text.startswith(_REFUSED_ANSWER):
            problems.append(message.text)

    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", on_console)
    yield page
    context.close()
    assert problems == []


def test_overview_shows_the_broker_controller_and_quorum(
    page: Any, console: ConsoleProcess
) -> None:
    page.goto(console.url)
    assert page.locator("#controller").inner_text() == "1"
    assert page.locator("#brokers tbody tr").count() == 1
    assert "Leader" in page.locator("#quorum").inner_text()
    screenshot(page, "overview")


def test_a_topic_is_created_a_message_produced_and_browsed(
    page: Any, console: ConsoleProcess
) -> None:
    topic = unique_topic("console")
    page.goto(console.url + "topics")
    form = page.locator("#create-topic")
    form.locator("input[name=topic]").fill(topic)
    form.locator("input[name=partitions]").fill("3")
    form.locator("textarea[name=configs]").fill("retention.ms=3600000")
    form.locator("button").click()
    page.wait_for_url(f"**/topics/{topic}?notice=created")
    assert page.locator("#topic-name").inner_text() == topic
    assert page.locator("#partitions tbody tr").count() == 3
    retention = page.locator("#configs tr[data-config='retention.ms']")
    assert "3600000" in retention.inner_text()
    screenshot(page, "topic")

    produce = page.locator("#produce")
    produce.locator("input[name=partition]").fill("1")
    produce.locator("input[name=key]").fill("order-1")
    produce.locator("textarea[name=value]").fill('{"id": 1, "item": "book"}')
    produce.locator("textarea[name=headers]").fill("source=console")
    produce.locator("button").click()
    page.wait_for_url("**/messages?partition=1&from=offset&offset=0&notice=produced")
    row = page.locator("#messages tbody tr[data-offset='0']")
    assert row.locator("pre[data-format=json]").inner_text() == (
        '{\n  "id": 1,\n  "item": "book"\n}'
    )
    assert "order-1" in row.inner_text() and "source" in row.inner_text()
    screenshot(page, "messages")

    # the same record as hex, found by time, through the browse form
    browse = page.locator("#browse")
    browse.locator("select[name=from]").select_option("timestamp")
    browse.locator("input[name=timestamp]").fill("2000-01-01T00:00:00Z")
    browse.locator("select[name=format]").select_option("hex")
    browse.locator("button").click()
    page.wait_for_url("**format=hex**")
    value = page.locator("#messages tbody tr[data-offset='0'] pre[data-format=hex]").nth(1)
    assert value.inner_text().startswith("7b22 6964")  # '{"id'

    # a bad value is refused in the page
    page.goto(console.url + "topics")
    page.locator("#create-topic input[name=topic]").fill(topic)
    page.locator("#create-topic input[name=partitions]").fill("0")
    page.locator("#create-topic button").click()
    assert "partitions must be between 1 and 10000" in page.locator(".problem").inner_text()


def _create_and_fill(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(RECORDS):
        producer.produce(topic, json.dumps({"n": index}).encode(), partition=index % 2)
    assert producer.flush(30) == 0


def _commit_start(bootstrap: str, topic: str, group: str) -> None:
    """The group starts at offset 0 of both partitions, without a member."""
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committer.commit(
        offsets=[TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)], asynchronous=False
    )
    committer.close()


def _drain(bootstrap: str, topic: str, group: str, done: threading.Event) -> None:
    """Read everything in steps of 30 records, committing after each with a pause, so the
    lag falls in steps the page can show; leave the group once all is committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    try:
        read = 0
        deadline = time.monotonic() + 60
        while read < RECORDS and time.monotonic() < deadline:
            messages = consumer.consume(num_messages=30, timeout=1.0)
            if messages:
                read += len(messages)
                consumer.commit(asynchronous=False)
                time.sleep(0.4)
    finally:
        consumer.close()
        done.set()


def test_a_groups_lag_falls_to_zero_while_a_consumer_drains_it(
    page: Any, console: ConsoleProcess, server: MoldauServer
) -> None:
    bootstrap = server.bootstrap_servers
    topic, group = unique_topic("console-lag"), f"console-group-{uuid.uuid4().hex[:8]}"
    _create_and_fill(bootstrap, topic)
    _commit_start(bootstrap, topic, group)

    page.goto(f"{console.url}groups/{group}")
    total = page.locator("#total-lag")
    assert total.inner_text() == str(RECORDS)
    page.evaluate("window.loadedOnce = true")  # gone if the page reloads
    done = threading.Event()
    drainer = threading.Thread(target=_drain, args=(bootstrap, topic, group, done))
    drainer.start()
    seen = [RECORDS]
    try:

        def lag_reached_zero() -> bool:
            value = int(total.inner_text())
            if value != seen[-1]:
                seen.append(value)
            return value == 0

        wait_until(lag_reached_zero, "the group's lag to reach 0", timeout_s=60)
    finally:
        drainer.join(60)
    assert done.is_set()
    assert seen[0] == RECORDS and seen[-1] == 0
    assert len(seen) >= 3, f"the lag went {seen}: no step between {RECORDS} and 0 was shown"
    assert seen == sorted(seen, reverse=True)
    assert page.evaluate("window.loadedOnce") is True
    samples = int(page.locator("#lag-chart").get_attribute("data-samples"))
    assert samples >= 3
    assert page.locator("#lag-chart canvas").count() == 1
    lags = page.locator("#lag td.lag").all_inner_texts()
    assert lags == ["0", "0"]
    screenshot(page, "group")

    # the consumer has left: its offsets go back to the start through the reset form
    wait_until(
        lambda: page.locator("#group-state").inner_text() == "Empty", "the group to be empty"
    )
    reset = page.locator("#reset-offsets")
    reset.locator("input[name=topic]").fill(topic)
    reset.locator("select[name=from]").select_option("earliest")
    reset.locator("button").click()
    page.wait_for_url("**?notice=reset")
    assert page.locator("#total-lag").inner_text() == str(RECORDS)


def test_the_group_list_links_to_each_group(
    page: Any, console: ConsoleProcess, server: MoldauServer
) -> None:
    topic, group = unique_topic("console-list"), f"console-listed-{uuid.uuid4().hex[:8]}"
    _create_and_fill(server.bootstrap_servers, topic)
    _commit_start(server.bootstrap_servers, topic, group)
    page.goto(console.url + "groups")
    row = page.locator(f"#groups tbody tr[data-group='{group}']")
    wait_until(lambda: row.count() == 1, "the group in the list")  # (a live refresh finds it)
    screenshot(page, "groups")
    row.locator("a").click()
    page.wait_for_url(f"**/groups/{group}")
    assert page.locator("#total-lag").inner_text() == str(RECORDS)
    page.goto(console.url + "topics")
    screenshot(page, "topics")
