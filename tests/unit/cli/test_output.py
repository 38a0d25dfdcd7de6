"""Output helpers: the YAML emitter, Kafka-style columns, the perf summary line, error lines."""

from __future__ import annotations

from moldau.cli.common import ExitCode, explain, plain_table, to_yaml
from moldau.cli.perf import summarize
from moldau.client.errors import ErrorCode, KafkaException


def test_yaml_of_nested_data() -> None:
    data = {
        "name": "t",
        "partitions": [{"partition": 0, "isr": [1, 2]}, {"partition": 1, "isr": []}],
        "empty": {},
        "flag": True,
        "none": None,
        "tricky": "a: b",
        "number_like": "123",
    }
    assert to_yaml(data) == (
        "name: t\n"
        "partitions:\n"
        "  - partition: 0\n"
        "    isr:\n"
        "      - 1\n"
        "      - 2\n"
        "  - partition: 1\n"
        "    isr: []\n"
        "empty: {}\n"
        "flag: true\n"
        "none: null\n"
        'tricky: "a: b"\n'
        'number_like: "123"\n'
    )


def test_plain_table_pads_columns_and_shows_missing_as_dash() -> None:
    assert plain_table(["GROUP", "LAG"], [("g", 5), ("group-2", None)]) == (
        "GROUP   LAG\ng       5\ngroup-2 -"
    )


def test_perf_summary_line_is_kafkas() -> None:
    summary = summarize(
        [float(ms) for ms in range(1, 1001)], bytes_sent=1000 * 1024 * 1024 // 1000, elapsed_s=2.0
    )
    assert summary.line() == (
        "1000 records sent, 500.0 records/sec (0.50 MB/sec), 500.50 ms avg latency, "
        "1000.00 ms max latency, 501 ms 50th, 951 ms 95th, 991 ms 99th, 1000 ms 99.9th."
    )


def test_unreachable_broker_gets_its_own_exit_code_and_a_hint() -> None:
    message, code = explain(KafkaException(ErrorCode.network_exception, "no broker reachable"))
    assert code is ExitCode.UNREACHABLE
    assert "-b HOST:PORT" in message


def test_kafka_errors_name_the_code_and_hint_the_fix() -> None:
    message, code = explain(KafkaException(ErrorCode.unknown_topic_or_partition, "topic 'x'"))
    assert code is ExitCode.KAFKA_ERROR
    assert message.startswith("topic 'x' does not exist")
    assert "moldau topic list" in message


def test_a_failed_login_is_not_called_unreachable() -> None:
    failed = KafkaException(
        ErrorCode.sasl_authentication_failed, "127.0.0.1:9093: Invalid username or password"
    )
    message, code = explain(failed)
    assert code is ExitCode.NOT_AUTHENTICATED
    assert message == (
        "authentication failed: 127.0.0.1:9093: Invalid username or password "
        "(SASL_AUTHENTICATION_FAILED); check -X sasl.username, -X sasl.password and "
        "-X sasl.mechanism"
    )
    assert "running" not in message


def test_a_missing_permission_has_its_own_exit_code() -> None:
    refused = KafkaException(ErrorCode.topic_authorization_failed, "topic 'x'")
    assert explain(refused) == (
        "topic 'x' (TOPIC_AUTHORIZATION_FAILED); the principal lacks permission on the topic",
        ExitCode.NOT_AUTHORIZED,
    )


def test_a_controller_listener_given_as_a_broker_is_a_usage_error() -> None:
    wrong = KafkaException(
        ErrorCode.mismatched_endpoint_type,
        "127.0.0.1:9093 is a controller listener, which serves the metadata quorum, not "
        "clients; the brokers listen on 127.0.0.1:9092",
    )
    message, code = explain(wrong)
    assert code is ExitCode.USAGE
    assert message.endswith(
        "the brokers listen on 127.0.0.1:9092 (MISMATCHED_ENDPOINT_TYPE); give a broker "
        "listener with -b HOST:PORT (controller listeners are for --bootstrap-controller)"
    )


def test_a_command_may_replace_a_hint() -> None:
    invalid = KafkaException(ErrorCode.invalid_config, "topic 'bad': Invalid value abc")
    message, _ = explain(invalid, {ErrorCode.invalid_config: "the topic was not created"})
    assert message == "topic 'bad': Invalid value abc (INVALID_CONFIG); the topic was not created"
