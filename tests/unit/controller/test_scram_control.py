"""SCRAM credentials through the controller core: Kafka's validation, the records written, and
what DescribeUserScramCredentials reads back from the image."""

from __future__ import annotations

from moldau.controller.operations import ScramCredentialDeletion, ScramCredentialUpsertion
from moldau.controller.scram_control import (
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode
from moldau.protocol.sasl.scram import ScramClient, ScramCredential, ScramServer, salted_password

SHA256, SHA512 = 1, 2


def upsert(name: str, mechanism: int = SHA512, password: str = "secret", iterations: int = 4096):
    names = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
    salt = b"salt-" + name.encode()
    return ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(
            names.get(mechanism, "SCRAM-SHA-256"), password.encode(), salt, iterations
        ),
    )


def apply(image: MetadataImage, records) -> MetadataImage:
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply()


def test_an_upserted_user_logs_in_with_its_password_and_is_described() -> None:
    image = MetadataImage.empty("c")
    records, results = alter_user_scram_credentials(
        image, [], [upsert("alice"), upsert("bob", SHA256, iterations=8192)]
    )
    assert [r.error_code for r in results] == [ErrorCode.none, ErrorCode.none]
    image = apply(image, records)
    stored = image.scram_credentials[("alice", "SCRAM-SHA-512")]

    def lookup(user: str) -> ScramCredential | None:
        return (
            ScramCredential(
                salt=stored.salt,
                stored_key=stored.stored_key,
                server_key=stored.server_key,
                iterations=stored.iterations,
            )
            if user == "alice"
            else None
        )

    server = ScramServer("SCRAM-SHA-512", lookup)
    client = ScramClient("SCRAM-SHA-512", "alice", "secret")
    client.verify(server.receive(client.final(server.receive(client.first()))))
    assert describe_user_scram_credentials(image, None) == [
        {"user": "alice", "error_code": ErrorCode.none, "error_message": None,
         "credential_infos": [{"mechanism": SHA512, "iterations": 4096}]},
        {"user": "bob", "error_code": ErrorCode.none, "error_message": None,
         "credential_infos": [{"mechanism": SHA256, "iterations": 8192}]},
    ]  # fmt: skip


def test_kafkas_refusals() -> None:
    image = MetadataImage.empty("c")
    records, results = alter_user_scram_credentials(
        image,
        [ScramCredentialDeletion(name="ghost", mechanism=SHA512),
         ScramCredentialDeletion(name="twice", mechanism=SHA512)],
        [upsert("few", iterations=1000), upsert("many", iterations=20000),
         upsert("odd", mechanism=7), upsert(""), upsert("twice")],
    )  # fmt: skip
    assert records == []
    assert {r.user: (r.error_code, r.error_message) for r in results} == {
        "ghost": (ErrorCode.resource_not_found,
                  "Attempt to delete a user credential that does not exist"),
        "few": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "many": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "odd": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty"),
        "twice": (ErrorCode.duplicate_resource,
                  "A user credential cannot be altered twice in the same request"),
    }  # fmt: skip


def test_a_deleted_credential_is_gone_and_described_as_not_found() -> None:
    image = apply(MetadataImage.empty("c"), alter_user_scram_credentials(
        MetadataImage.empty("c"), [], [upsert("alice")])[0])  # fmt: skip
    records, results = alter_user_scram_credentials(
        image, [ScramCredentialDeletion(name="alice", mechanism=SHA512)], []
    )
    assert results[0].error_code == ErrorCode.none
    image = apply(image, records)
    assert image.scram_credentials == {}
    [result] = describe_user_scram_credentials(image, ["alice"])
    assert result["error_code"] == ErrorCode.resource_not_found
    assert describe_user_scram_credentials(image, ["x", "x"])[0]["error_code"] == (
        ErrorCode.duplicate_resource
    )
