"""ACLs in the metadata, as Kafka's AclControlManager (KIP-801).

`create_acls` validates each binding as Kafka does (INVALID_REQUEST with its message) and
returns an AccessControlEntryRecord, under a new id, for each one not already stored; creating
an ACL that exists succeeds and writes nothing. `delete_acls` answers each filter with the ACLs
it matches and returns one RemoveAccessControlEntryRecord per ACL matched by any filter.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from moldau.metadata.acls import AclBinding, AclFilter, InvalidAcl, new_acl_id, validate_binding
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord, RemoveAccessControlEntryRecord, acl_record
from moldau.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class AclResult:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AclDeletionResult:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    matching: list[AclBinding] = field(default_factory=list)


def create_acls(
    image: MetadataImage, bindings: Sequence[AclBinding]
) -> tuple[list[MetadataRecord], list[AclResult]]:
    existing = set(image.acls.values())
    records: list[MetadataRecord] = []
    results: list[AclResult] = []
    for binding in bindings:
        try:
            validate_binding(binding)
        except InvalidAcl as error:
            results.append(
                AclResult(error_code=ErrorCode.invalid_request, error_message=str(error))
            )
            continue
        if binding not in existing:
            existing.add(binding)
            records.append(acl_record(new_acl_id(), binding))
        results.append(AclResult())
    return records, results


def delete_acls(
    image: MetadataImage, filters: Sequence[AclFilter]
) -> tuple[list[MetadataRecord], list[AclDeletionResult]]:
    removed: set[uuid.UUID] = set()
    records: list[MetadataRecord] = []
    results: list[AclDeletionResult] = []
    for acl_filter in filters:
        invalid = acl_filter.is_invalid()
        if invalid is not None:
            results.append(
                AclDeletionResult(error_code=ErrorCode.invalid_request, error_message=invalid)
            )
            continue
        matching = []
        for acl_id, binding in sorted(image.acls.items()):
            if acl_filter.matches(binding):
                matching.append(binding)
                if acl_id not in removed:
                    removed.add(acl_id)
                    records.append(RemoveAccessControlEntryRecord(id=acl_id))
        results.append(AclDeletionResult(matching=matching))
    return records, results


def describe_acls(image: MetadataImage, acl_filter: AclFilter) -> list[AclBinding]:
    return [binding for _, binding in sorted(image.acls.items()) if acl_filter.matches(binding)]
