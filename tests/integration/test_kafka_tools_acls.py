"""Apache Kafka 4.1's kafka-acls against the server of test_acls.py (Kafka's StandardAuthorizer;
admin a super user, alice not), over SASL PLAIN with the tools' --command-config: ACLs added,
listed and removed as the tool prints them and as another client then finds them; and what
Kafka's tools print when alice is refused (kafka-topics --delete and --alter, kafka-configs),
in Kafka's words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from .kafka_jvm import KafkaJvm, ToolShell
from .test_acls import (  # the module-scoped server and its fixtures
    USERS,
    admin_client,
    allow,
    bootstrap,  # noqa: F401
    create_topics,
    name,
    server,  # noqa: F401
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def shell(kafka_jvm: KafkaJvm) -> Iterator[ToolShell]:
    with kafka_jvm.shell() as tool_shell:
        yield tool_shell


@pytest.fixture(scope="module")
def command_configs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each user's Java client settings, the tools' --command-config."""
    directory = tmp_path_factory.mktemp("tool-users")
    files = {}
    for user, password in USERS.items():
        files[user] = directory / f"{user}.properties"
        files[user].write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password}";\n'
        )
    return files


def run_as(
    shell: ToolShell, address: str, configs: dict[str, Path], user: str, *command: str
) -> tuple[int, str, str]:
    tool, *arguments = command
    completed = shell.tool(
        tool,
        "--bootstrap-server",
        address,
        "--command-config",
        str(configs[user]),
        *arguments,
        check=False,
    )
    return completed.returncode, completed.stdout, completed.stderr


def test_kafka_acls_adds_lists_and_removes_acls(
    shell: ToolShell,
    bootstrap: str,  # noqa: F811
    command_configs: dict[str, Path],
) -> None:
    prefix, topic = name("tool-acl"), name("tool-acl-produced")

    def admin(*command: str) -> str:
        code, stdout, stderr = run_as(shell, bootstrap, command_configs, "admin", *command)
        assert code == 0, f"stdout:\n{stdout}\nstderr:\n{stderr}"
        return stdout

    read = ("--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe")
    added = admin(
        "kafka-acls", "--add", *read, "--topic", prefix, "--resource-pattern-type", "prefixed"
    )
    assert added.splitlines()[0] == (
        f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={prefix}, "
        "patternType=PREFIXED)`: "
    )
    admin("kafka-acls", "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)

    listed = admin("kafka-acls", "--list", "--principal", "User:alice")
    for resource, operations in (
        (f"name={prefix}, patternType=PREFIXED", {"READ", "DESCRIBE"}),
        (f"name={topic}, patternType=LITERAL", {"WRITE", "CREATE", "DESCRIBE"}),
    ):
        section = listed.split(f"`ResourcePattern(resourceType=TOPIC, {resource})`:")[1]
        section = section.split("\n\n")[0]
        assert {
            line.split("operation=")[1].split(",")[0] for line in section.strip().splitlines()
        } == operations, listed
    acl_admin = admin_client(bootstrap)
    found = acl_admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,
            ResourcePatternType.ANY,
            "User:alice",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    )
    assert {(b.name, b.operation.name) for b in found.result(10)} == {
        (prefix, "READ"),
        (prefix, "DESCRIBE"),
        (topic, "WRITE"),
        (topic, "CREATE"),
        (topic, "DESCRIBE"),
    }

    admin(
        "kafka-acls",
        "--remove",
        "--force",
        *read,
        "--topic",
        prefix,
        "--resource-pattern-type",
        "prefixed",
    )
    assert prefix not in admin("kafka-acls", "--list", "--principal", "User:alice")
    code, stdout, _stderr = run_as(
        shell, bootstrap, command_configs, "alice", "kafka-acls", "--list"
    )
    assert code == 1
    assert stdout.startswith(
        "Error while executing ACL command: org.apache.kafka.common.errors."
        "ClusterAuthorizationException: User:alice is not authorized to DESCRIBE the cluster\n"
    ), stdout


def test_refusals_read_as_kafkas_in_its_tools(
    shell: ToolShell,
    bootstrap: str,  # noqa: F811
    command_configs: dict[str, Path],
) -> None:
    """alice may see the topic (DESCRIBE) but neither delete, grow nor describe its configs."""
    topic = name("tool-refused")
    create_topics(bootstrap, topic)
    admin = admin_client(bootstrap)
    [granted] = admin.create_acls([allow("User:alice", topic, AclOperation.DESCRIBE)]).values()
    granted.result(10)
    as_alice = ("kafka-topics", "--topic", topic)
    code, stdout, _ = run_as(shell, bootstrap, command_configs, "alice", *as_alice, "--delete")
    assert (code, stdout) == (
        1,
        "Error while executing topic command : Topic authorization failed.\n",
    )
    code, stdout, _ = run_as(
        shell, bootstrap, command_configs, "alice", *as_alice, "--alter", "--partitions", "2"
    )
    assert (code, stdout) == (
        1,
        "Error while executing topic command : Topic authorization failed.\n",
    )
    code, _, stderr = run_as(
        shell,
        bootstrap,
        command_configs,
        "alice",
        "kafka-configs",
        "--describe",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
    )
    assert code == 1
    assert "TopicAuthorizationException: Topic authorization failed." in stderr, stderr
    assert topic in admin.list_topics(timeout=10).topics  # (still there)
