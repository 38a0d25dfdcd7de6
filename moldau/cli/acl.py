"""`moldau acl add | list | remove`: ACLs, as kafka-acls manages them (`--add`, `--list`,
`--remove`), with its options.

    moldau acl add --allow-principal User:alice --operation Read --topic orders
    moldau acl add --allow-principal User:alice --producer --topic orders [--idempotent]
    moldau acl list [--topic orders] [--principal User:alice] [--resource-pattern-type match]
    moldau acl remove --allow-principal User:alice --operation Read --topic orders

Options are checked before the broker is asked (acl_bindings.py); a misuse is one error line
and exit 2. `remove` does not prompt, and unlike kafka-acls it needs a principal: it never
removes every ACL of a resource at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer

from moldau.cli.acl_bindings import (
    AclOptions,
    AclUsageError,
    bindings_to_add,
    filters_to_list,
    filters_to_remove,
)
from moldau.cli.common import (
    BootstrapOption,
    FormatOption,
    OutputFormat,
    SettingsOption,
    client_config,
    emit,
    fail,
    plain_table,
    run,
)
from moldau.client.acls import AclBinding
from moldau.client.admin import AdminClient

acl_app = typer.Typer(help="Access control lists (kafka-acls).")

Names = list[str] | None
TopicOption = Annotated[
    Names,
    typer.Option(
        "--topic",
        metavar="NAME",
        help="A topic ('*': every topic; a prefix with --resource-pattern-type prefixed).",
    ),
]
GroupOption = Annotated[
    Names, typer.Option("--group", metavar="NAME", help="A consumer group ('*': every group).")
]
ClusterOption = Annotated[bool, typer.Option("--cluster", help="The cluster resource.")]
TransactionalIdOption = Annotated[
    Names,
    typer.Option("--transactional-id", metavar="ID", help="A transactional id ('*': every id)."),
]
PatternTypeOption = Annotated[
    str,
    typer.Option(
        "--resource-pattern-type",
        metavar="TYPE",
        help="literal or prefixed (the name is a prefix); to select ACLs also any (every "
        "pattern type, the name exactly) or match (every ACL that applies to the resource).",
    ),
]
AllowPrincipalOption = Annotated[
    Names,
    typer.Option(
        "--allow-principal", metavar="PRINCIPAL", help="Type:name to allow (User:alice, User:*)."
    ),
]
DenyPrincipalOption = Annotated[
    Names,
    typer.Option("--deny-principal", metavar="PRINCIPAL", help="Type:name to deny (deny wins)."),
]
AllowHostOption = Annotated[
    Names,
    typer.Option("--allow-host", metavar="HOST", help="A host the allowed principals may use."),
]
DenyHostOption = Annotated[
    Names,
    typer.Option("--deny-host", metavar="HOST", help="A host the denied principals may not use."),
]
OperationOption = Annotated[
    Names,
    typer.Option(
        "--operation",
        metavar="OPERATION",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite or All (the default).",
    ),
]
ProducerOption = Annotated[
    bool,
    typer.Option(
        "--producer", help="A producer's ACLs: Write, Describe, Create on --topic; Write, "
        "Describe on --transactional-id.",
    ),
]  # fmt: skip
IdempotentOption = Annotated[
    bool,
    typer.Option("--idempotent", help="With --producer: IdempotentWrite on the cluster too."),
]
ConsumerOption = Annotated[
    bool,
    typer.Option(
        "--consumer", help="A consumer's ACLs: Read, Describe on --topic; Read on --group."
    ),
]


def change_acls(
    ctx: typer.Context,
    topics: TopicOption = None,
    groups: GroupOption = None,
    cluster: ClusterOption = False,
    transactional_ids: TransactionalIdOption = None,
    pattern_type: PatternTypeOption = "literal",
    allow_principals: AllowPrincipalOption = None,
    deny_principals: DenyPrincipalOption = None,
    allow_hosts: AllowHostOption = None,
    deny_hosts: DenyHostOption = None,
    operations: OperationOption = None,
    producer: ProducerOption = False,
    idempotent: IdempotentOption = False,
    consumer: ConsumerOption = False,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """`add` and `remove` (registered under both names below): the same options name the ACLs
    to create or to delete."""
    options = AclOptions(
        topics=topics or (),
        groups=groups or (),
        cluster=cluster,
        transactional_ids=transactional_ids or (),
        pattern_type=pattern_type,
        allow_principals=allow_principals or (),
        deny_principals=deny_principals or (),
        allow_hosts=allow_hosts or (),
        deny_hosts=deny_hosts or (),
        operations=operations or (),
        producer=producer,
        idempotent=idempotent,
        consumer=consumer,
    )
    adding = ctx.command.name == "add"
    try:
        bindings = bindings_to_add(options) if adding else []
        filters = [] if adding else filters_to_remove(options)
    except AclUsageError as error:
        fail(str(error))
    client = client_config(bootstrap, settings)

    async def body() -> None:
        async with AdminClient(client) as admin:
            if adding:
                await admin.create_acls(bindings)
                changed, heading = bindings, "Adding ACLs for resource"
            else:
                deleted = await admin.delete_acls(filters)
                changed = list(dict.fromkeys(b for found in deleted.values() for b in found))
                heading = "Removed ACLs for resource"
        text = _kafka_lines(heading, changed) or "No ACL matched; none removed."
        emit(_data(changed), output, text)

    run(body())


acl_app.command(
    "add",
    help="Add ACLs (kafka-acls --add): each principal, from each host (* unless --allow-host or "
    "--deny-host), for each operation, on each resource. Every option but the flags repeats.",
)(change_acls)
acl_app.command(
    "remove",
    help="Remove the ACLs that the same options would add (kafka-acls --remove --force); "
    "--resource-pattern-type any or match removes them under every pattern that names or "
    "applies to the resource. Prints what was removed.",
)(change_acls)


@acl_app.command("list")
def list_acls(
    topics: TopicOption = None,
    groups: GroupOption = None,
    cluster: ClusterOption = False,
    transactional_ids: TransactionalIdOption = None,
    pattern_type: PatternTypeOption = "literal",
    principals: Annotated[
        Names,
        typer.Option("--principal", metavar="PRINCIPAL", help="Only this principal's ACLs."),
    ] = None,
    bootstrap: BootstrapOption = None,
    settings: SettingsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """List ACLs (kafka-acls --list): every ACL, or those of the resources named."""
    options = AclOptions(
        topics=topics or (),
        groups=groups or (),
        cluster=cluster,
        transactional_ids=transactional_ids or (),
        pattern_type=pattern_type,
    )
    try:
        filters = filters_to_list(options, principals or ())
    except AclUsageError as error:
        fail(str(error))
    client = client_config(bootstrap, settings)

    async def body() -> None:
        found: dict[AclBinding, None] = {}
        async with AdminClient(client) as admin:
            for acl_filter in filters:
                found.update(dict.fromkeys(await admin.describe_acls(acl_filter)))
        bindings = sorted(found, key=_order)
        rows = [tuple(_row(b).values()) for b in bindings]
        emit(_data(bindings), output, plain_table(_HEADERS, rows))

    run(body())


_HEADERS = (
    "RESOURCE-TYPE",
    "RESOURCE-NAME",
    "PATTERN-TYPE",
    "PRINCIPAL",
    "HOST",
    "OPERATION",
    "PERMISSION",
)


def _row(binding: AclBinding) -> dict[str, str]:
    return {
        "resource_type": binding.resource_type.name,
        "resource_name": binding.resource_name,
        "pattern_type": binding.pattern_type.name,
        "principal": binding.principal,
        "host": binding.host,
        "operation": binding.operation.name,
        "permission": binding.permission_type.name,
    }


def _data(bindings: Sequence[AclBinding]) -> list[dict[str, Any]]:
    return [_row(b) for b in bindings]


def _order(binding: AclBinding) -> tuple[Any, ...]:
    return (
        binding.resource_type,
        binding.resource_name,
        binding.pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


def _kafka_lines(heading: str, bindings: Sequence[AclBinding]) -> str:
    """kafka-acls' lines: per resource pattern, "`heading` `ResourcePattern(...)`:" and one
    tab-indented `(principal=..., host=..., operation=..., permissionType=...)` per ACL."""
    by_pattern: dict[tuple[str, str, str], list[str]] = {}
    for b in bindings:
        pattern = (b.resource_type.name, b.resource_name, b.pattern_type.name)
        by_pattern.setdefault(pattern, []).append(
            f"\t(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})"
        )
    return "\n".join(
        f"{heading} `ResourcePattern(resourceType={kind}, name={name}, patternType={pattern})`:\n"
        + "\n".join(entries)
        + "\n"
        for (kind, name, pattern), entries in by_pattern.items()
    )


def register(root: typer.Typer) -> None:
    root.add_typer(acl_app, name="acl")
