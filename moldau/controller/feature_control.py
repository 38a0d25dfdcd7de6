"""Finalized features (KIP-584, KIP-778), as Kafka's QuorumFeatures and FeatureControlManager.

What this software supports, and what each level means in Kafka 4 (only what Moldau does is
claimed):

| feature | levels | meaning |
| --- | --- | --- |
| `metadata.version` | 25 | Kafka 4.0-IV3, the level Moldau's metadata log is written at; no other |
| `kraft.version` | 0-1 | 0: static voters (`controller.quorum.voters`); 1: dynamic voters (KIP-853), chosen when the controllers are formatted (`--standalone`, `--initial-controllers`) or upgraded to with UpdateFeatures |
| `transaction.version` | 0-2 | 1: flexible `__transaction_state` records; 2: KIP-890 part 2 (clients send no AddPartitionsToTxn or AddOffsetsToTxn: Produce v12 and TxnOffsetCommit v5 add the partition on the broker, and EndTxn v5 bumps the epoch at the end of every transaction) |
| `group.version` | 0-1 | 1: the consumer group protocol (KIP-848, ConsumerGroupHeartbeat) |
| `eligible.leader.replicas.version` | 0 | Kafka's 1 is eligible leader replicas (KIP-966), which Moldau does not keep: listed, as Kafka 4.1 lists it, at 0 only |
| `share.version` | 0-1 | 1: share groups (KIP-932: ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge); their partition state is not durable yet (`moldau.share`) |

A new cluster finalizes the highest of each (`BOOTSTRAP_LEVELS`); a cluster formatted before
finalized only `metadata.version` and can finalize the others with UpdateFeatures. Level 0
means "not finalized": such features are absent from the image and from ApiVersions'
finalized list (as in Kafka). kraft.version is the quorum's, not a metadata record: the Raft
log's KRaftVersionRecord sets it, written at format time or by the upgrade from 0 to 1 that
UpdateFeatures asks of the quorum's leader (KIP-853; `QuorumController.update_features`). Here
it is checked as Kafka's FeatureControlManager does (its level is the quorum's, given as
`kraft_version`): no downgrade, whatever the upgrade type, and an upgrade only when every voter
has registered as a controller supporting the level (KIP-919's ControllerRegistration); the
leader checks the rest (`moldau/raft/reconfiguration.py`).

UpdateFeatures is all or nothing (KIP-1022): `update_features` returns the records of every
update, or none and the first update's error (INVALID_UPDATE_VERSION with Kafka's messages).
Downgrades are refused: Moldau has no behaviour to fall back to at a lower level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import FeatureLevelRecord, MetadataRecord
from moldau.protocol.errors import ErrorCode

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
# Kafka 4.0's metadata.version (4.0-IV3).
METADATA_VERSION_LEVEL = 25
# The first metadata.version with controller registrations (3.7-IV0, KIP-919): below it a
# RegisterControllerRecord may not be written. Moldau finalizes only 25, so this is met in
# every cluster it formats; the check guards an image with no level yet.
CONTROLLER_REGISTRATION_LEVEL = 15

# name -> (min, max) supported level.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION: (METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
    KRAFT_VERSION: (0, 1),
    "transaction.version": (0, 2),
    "group.version": (0, 1),
    "eligible.leader.replicas.version": (0, 0),
    "share.version": (0, 1),
}

# What a brand-new cluster finalizes (kraft.version stays 0: it is not a metadata record).
BOOTSTRAP_LEVELS: Mapping[str, int] = {
    METADATA_VERSION: METADATA_VERSION_LEVEL,
    "transaction.version": 2,
    "group.version": 1,
    "share.version": 1,
}

# UpdateFeatures' upgrade types (FeatureUpdate.UpgradeType).
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: int = UPGRADE


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureUpdateResult:
    """The outcome of a whole UpdateFeatures request."""

    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


def bootstrap_records(image: MetadataImage) -> list[MetadataRecord]:
    """The feature levels a new cluster starts with; none when it has a metadata.version."""
    if METADATA_VERSION in image.features:
        return []
    return [
        FeatureLevelRecord(name=name, feature_level=level)
        for name, level in BOOTSTRAP_LEVELS.items()
    ]


def finalized_levels(image: MetadataImage) -> dict[str, int]:
    """The finalized features (level > 0), as ApiVersions reports them."""
    return {name: level for name, level in sorted(image.features.items()) if level > 0}


def supports_controller_registration(image: MetadataImage) -> bool:
    """The finalized metadata.version allows RegisterControllerRecord (3.7-IV0 or later)."""
    return image.features.get(METADATA_VERSION, 0) >= CONTROLLER_REGISTRATION_LEVEL


def unsupported_levels(
    image: MetadataImage, supported: Mapping[str, tuple[int, int]]
) -> str | None:
    """Why a node supporting `supported` cannot run with the finalized levels, or None: a
    finalized feature whose level is outside the node's range (Kafka's words for brokers). A
    feature the node does not name is taken as supported at level 0 only."""
    for name, level in sorted(finalized_levels(image).items()):
        low, high = supported.get(name, (0, 0))
        if not low <= level <= high:
            return (
                f"Unable to register because the node does not support version {level} of "
                f"{name}. It wants a version between {low} and {high}, inclusive."
            )
    return None


def update_features(
    image: MetadataImage,
    updates: Sequence[FeatureUpdate],
    *,
    validate_only: bool = False,
    kraft_version: int = 0,
    voter_ids: Sequence[int] = (),
) -> tuple[list[MetadataRecord], FeatureUpdateResult]:
    """The records of every update, or none and why not. `kraft_version` is the quorum's
    level and `voter_ids` its voters: a kraft.version update yields no record (the caller asks
    the quorum's leader for it)."""
    records: list[MetadataRecord] = []
    seen: set[str] = set()
    for update in updates:
        if update.feature in seen:
            return [], FeatureUpdateResult(
                error_code=ErrorCode.invalid_request,
                error_message=f"Feature {update.feature} appears more than once in the request.",
            )
        seen.add(update.feature)
        if update.feature == KRAFT_VERSION:
            error = _check_kraft_version(image, update, kraft_version, voter_ids)
        else:
            error = _check(image, update)
        if error is not None:
            return [], FeatureUpdateResult(
                error_code=ErrorCode.invalid_update_version,
                error_message=(
                    f"Invalid update version {update.max_version_level} for feature "
                    f"{update.feature}. {error}"
                ),
            )
        if update.feature != KRAFT_VERSION and update.max_version_level != image.features.get(
            update.feature, 0
        ):
            records.append(
                FeatureLevelRecord(name=update.feature, feature_level=update.max_version_level)
            )
    return ([] if validate_only else records), FeatureUpdateResult()


def _check_kraft_version(
    image: MetadataImage, update: FeatureUpdate, current: int, voter_ids: Sequence[int]
) -> str | None:
    """Why kraft.version cannot go to `update`'s level now, or None (Kafka's
    FeatureControlManager.updateFeature for kraft.version)."""
    error = _check_level(update)
    if error is not None:
        return error
    level = update.max_version_level
    if level < current:
        if update.upgrade_type == UPGRADE:
            return _DOWNGRADE_NEEDS_TYPE
        return "Can't downgrade the version of this feature."
    if level > current:
        if update.upgrade_type != UPGRADE:
            return "Can't downgrade to a newer version."
        for voter_id in voter_ids:
            controller = image.controllers.get(voter_id)
            if controller is None:
                return f"controller {voter_id} has not registered, and may not support this feature"
            low, high = controller.features.get(KRAFT_VERSION, (0, 0))
            if not low <= level <= high:
                return f"Controller {voter_id} only supports versions {low}-{high}."
    return None


_DOWNGRADE_NEEDS_TYPE = (
    "Can't downgrade the version of this feature without setting the upgrade type to either "
    "safe or unsafe downgrade."
)


def _check_level(update: FeatureUpdate) -> str | None:
    """The checks every feature's update passes first: a known upgrade type, a level this
    controller supports."""
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "The controller does not support the given upgrade type."
    level = update.max_version_level
    if level < 0:
        return "A feature version cannot be less than 0."
    supported = SUPPORTED_FEATURES.get(update.feature)
    if supported is None:
        return "The controller does not support this feature."
    low, high = supported
    if not low <= level <= high:
        return f"The controller only supports versions {low}-{high} of this feature."
    return None


def _check(image: MetadataImage, update: FeatureUpdate) -> str | None:
    """Why `update` cannot be made (Kafka's wording where Kafka has a case), or None."""
    error = _check_level(update)
    if error is not None:
        return error
    level = update.max_version_level
    current = image.features.get(update.feature, 0)
    if level < current:
        if update.upgrade_type == UPGRADE:
            return _DOWNGRADE_NEEDS_TYPE
        return "Moldau does not support downgrading this feature."
    if level > current and update.upgrade_type != UPGRADE:
        return "Can't downgrade to a newer version."
    return None
