"""Confluent's Schema Registry errors: an HTTP status, a five-digit `error_code`, a message.

The codes are the ones Confluent's registry answers and its clients read (`SchemaRegistryError`
of confluent-kafka carries `error_code`); the JSON body is `{"error_code": ..., "message": ...}`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RegistryError"]


class RegistryError(Exception):
    """An answer the registry gives instead of a result."""

    def __init__(self, http_status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}

    # --- 401, 403 --------------------------------------------------------------------------

    @classmethod
    def forbidden(cls, user: str, operation: str, subject: str | None) -> RegistryError:
        resource = f"Subject: {subject}" if subject is not None else "the global config and mode"
        return cls(403, 40301, f"User {user} is denied operation {operation} on {resource}")

    # --- 404 -------------------------------------------------------------------------------

    @classmethod
    def subject_not_found(cls, subject: str) -> RegistryError:
        return cls(404, 40401, f"Subject '{subject}' not found.")

    @classmethod
    def version_not_found(cls, subject: str, version: object) -> RegistryError:
        return cls(404, 40402, f"Version {version} not found for subject '{subject}'.")

    @classmethod
    def schema_not_found(cls, detail: str = "Schema not found") -> RegistryError:
        return cls(404, 40403, detail)

    @classmethod
    def subject_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(
            404,
            40404,
            f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently",
        )

    @classmethod
    def subject_not_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(
            404,
            40405,
            f"Subject '{subject}' was not deleted first before being permanently deleted",
        )

    @classmethod
    def version_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(
            404,
            40406,
            f"Subject '{subject}' Version {version} was soft deleted. "
            "Set permanent=true to delete permanently",
        )

    @classmethod
    def version_not_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(
            404,
            40407,
            f"Subject '{subject}' Version {version} was not deleted first before being "
            "permanently deleted",
        )

    @classmethod
    def subject_config_not_found(cls, subject: str) -> RegistryError:
        return cls(
            404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
        )

    @classmethod
    def subject_mode_not_found(cls, subject: str) -> RegistryError:
        return cls(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")

    @classmethod
    def not_found(cls, path: str) -> RegistryError:
        return cls(404, 404, f"HTTP 404 Not Found: no resource at {path}")

    # --- 409, 422 --------------------------------------------------------------------------

    @classmethod
    def incompatible(cls, messages: list[str]) -> RegistryError:
        detail = "; ".join(messages) if messages else "incompatible"
        return cls(
            409,
            409,
            "Schema being registered is incompatible with an earlier schema for subject: " + detail,
        )

    @classmethod
    def invalid_schema(cls, detail: str) -> RegistryError:
        return cls(422, 42201, f"Invalid schema: {detail}")

    @classmethod
    def invalid_version(cls, version: object) -> RegistryError:
        return cls(
            422,
            42202,
            f"The specified version '{version}' is not a valid version id. Allowed values are "
            'between [1, 2^31-1] and the string "latest"',
        )

    @classmethod
    def invalid_compatibility_level(cls, level: object) -> RegistryError:
        return cls(
            422,
            42203,
            f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, "
            "full, backward_transitive, forward_transitive, and full_transitive",
        )

    @classmethod
    def invalid_mode(cls, mode: object) -> RegistryError:
        return cls(
            422,
            42204,
            f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY and IMPORT",
        )

    @classmethod
    def operation_not_permitted(cls, detail: str) -> RegistryError:
        return cls(422, 42205, detail)

    @classmethod
    def reference_exists(cls, detail: str) -> RegistryError:
        return cls(422, 42206, detail)

    @classmethod
    def unprocessable(cls, detail: str) -> RegistryError:
        return cls(422, 422, detail)

    @classmethod
    def bad_request(cls, detail: str) -> RegistryError:
        return cls(400, 400, detail)

    @classmethod
    def too_large(cls, limit: int) -> RegistryError:
        return cls(413, 413, f"Request body larger than {limit} bytes")

    # --- 5xx -------------------------------------------------------------------------------

    @classmethod
    def store_error(cls, detail: str) -> RegistryError:
        return cls(500, 50001, f"Error in the backend data store: {detail}")

    @classmethod
    def timeout(cls, detail: str) -> RegistryError:
        return cls(500, 50002, f"Operation timed out: {detail}")

    @classmethod
    def forwarding_error(cls, detail: str) -> RegistryError:
        return cls(500, 50003, f"Error while forwarding the request to the primary: {detail}")
