"""`moldau cluster log-dirs describe`'s output: Moldau's data and Kafka's JSON line."""

from __future__ import annotations

import json

import pytest

from moldau.cli.log_dirs import kafka_log_dirs_json, log_dirs_data, parse_topic_list
from moldau.cli.reassignment_plan import PlanError
from moldau.client.errors import ErrorCode, KafkaException
from moldau.client.log_dirs import LogDirDescription
from tests.unit.client.test_log_dirs import DIRS

DESCRIBED = {
    2: DIRS,
    1: {
        "/disk/a": LogDirDescription(
            error=KafkaException(ErrorCode.kafka_storage_error, "/disk/a"),
            replicas={},
            total_bytes=None,
            usable_bytes=None,
        )
    },
}


def test_log_dirs_data_lists_brokers_dirs_and_replicas_sorted() -> None:
    data = log_dirs_data(DESCRIBED, None)
    assert [b["broker"] for b in data] == [1, 2]
    assert data[0]["log_dirs"] == [
        {
            "log_dir": "/disk/a",
            "error": "KAFKA_STORAGE_ERROR",
            "total_bytes": None,
            "usable_bytes": None,
            "replicas": [],
        }
    ]
    assert [d["log_dir"] for d in data[1]["log_dirs"]] == ["/disk/a", "/disk/b"]
    assert data[1]["log_dirs"][1]["replicas"] == [
        {"topic": "t", "partition": 0, "size": 300, "offset_lag": 7, "is_future": True},
        {"topic": "u", "partition": 1, "size": 50, "offset_lag": 0, "is_future": False},
    ]


def test_a_topic_list_keeps_every_dir_but_only_its_replicas() -> None:
    data = log_dirs_data(DESCRIBED, ["u"])
    dirs = data[1]["log_dirs"]
    assert [d["log_dir"] for d in dirs] == ["/disk/a", "/disk/b"]
    assert dirs[0]["replicas"] == []
    assert [(r["topic"], r["partition"]) for r in dirs[1]["replicas"]] == [("u", 1)]


def test_kafkas_json_line() -> None:
    line = kafka_log_dirs_json(log_dirs_data(DESCRIBED, ["t"]))
    assert "\n" not in line and line.startswith('{"brokers":[{"broker":1,')
    assert json.loads(line) == {
        "version": 1,
        "brokers": [
            {
                "broker": 1,
                "logDirs": [
                    {"logDir": "/disk/a", "error": "KAFKA_STORAGE_ERROR", "partitions": []}
                ],
            },
            {
                "broker": 2,
                "logDirs": [
                    {
                        "logDir": "/disk/a",
                        "error": None,
                        "partitions": [
                            {"partition": "t-0", "size": 900, "offsetLag": 0, "isFuture": False}
                        ],
                    },
                    {
                        "logDir": "/disk/b",
                        "error": None,
                        "partitions": [
                            {"partition": "t-0", "size": 300, "offsetLag": 7, "isFuture": True}
                        ],
                    },
                ],
            },
        ],
    }


def test_topic_list() -> None:
    assert parse_topic_list("a, b,a") == ["a", "b"]
    with pytest.raises(PlanError, match="topic names separated by commas"):
        parse_topic_list("a,,b")
