"""What a configuration key is: Kafka's name, type, default and valid range (Kafka's ConfigDef.ConfigKey).

A key Moldau does not act on carries `not_applicable`, the reason it has no effect here; such a
key is read-only in DescribeConfigs and its description starts with `NOT_APPLICABLE_PREFIX`.
A broker key with `described_unset` False is in a broker's DescribeConfigs only when it is set
(in the node's properties or dynamically), as Kafka lists a key its KafkaConfig does not define.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

NOT_APPLICABLE_PREFIX = "No effect in Moldau: "


class ConfigType(Enum):
    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    SHORT = "short"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"
    PASSWORD = "password"
    CLASS = "class"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any
    doc: str = ""
    read_only: bool = False
    sensitive: bool = False
    valid_values: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    also_valid: tuple[int, ...] = ()  # numbers valid outside [minimum, maximum] (a -1 default)
    range_reason: str | None = None  # why Moldau's range is narrower than Kafka's, if it is
    not_applicable: str | None = None  # why the key has no effect in Moldau
    described_unset: bool = True  # a broker's DescribeConfigs lists it when it is not set

    @property
    def applies(self) -> bool:
        """Moldau acts on the key (False: it is known only because Kafka has it)."""
        return self.not_applicable is None


def config_key(
    name: str,
    type_: ConfigType,
    default: Any,
    doc: str = "",
    *,
    read_only: bool = False,
    sensitive: bool = False,
    valid_values: tuple[str, ...] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    also_valid: tuple[int, ...] = (),
    range_reason: str | None = None,
    not_applicable: str | None = None,
    described_unset: bool = True,
) -> ConfigKey:
    """A key; one `not_applicable` is read-only and documented by its reason."""
    if not_applicable is not None:
        doc = NOT_APPLICABLE_PREFIX + not_applicable
        read_only = True
    return ConfigKey(
        name=name,
        type=type_,
        default=default,
        doc=doc,
        read_only=read_only,
        sensitive=sensitive or type_ is ConfigType.PASSWORD,
        valid_values=valid_values,
        minimum=minimum,
        maximum=maximum,
        also_valid=also_valid,
        range_reason=range_reason,
        not_applicable=not_applicable,
        described_unset=described_unset,
    )
