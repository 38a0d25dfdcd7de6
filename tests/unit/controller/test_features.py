"""Finalized features: what a cluster starts with, UpdateFeatures' rules, and both on the wire
(ApiVersions' feature fields, UpdateFeatures in every version)."""

import uuid

import pytest

from moldau.broker.handlers.api_versions import handle_api_versions
from moldau.broker.handlers.update_features import handle_update_features
from moldau.controller import feature_control
from moldau.controller.feature_control import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
    bootstrap_records,
    update_features,
)
from moldau.metadata.delta import MetadataDelta
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import FeatureLevelRecord, RegisterControllerRecord
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from tests.unit.controller.test_admin_handlers import Cluster

E = ErrorCode


def image_with(**levels):
    delta = MetadataDelta(MetadataImage.empty("c"))
    for name, level in levels.items():
        delta.replay(FeatureLevelRecord(name=name.replace("_", "."), feature_level=level))
    return delta.apply()


def test_a_new_cluster_finalizes_what_moldau_supports_and_an_old_one_keeps_its_levels():
    levels = {r.name: r.feature_level for r in bootstrap_records(MetadataImage.empty("c"))}
    assert levels == {
        "metadata.version": 25,
        "transaction.version": 2,
        "group.version": 1,
        "share.version": 1,
    }
    assert bootstrap_records(image_with(metadata_version=25)) == []


OLD_CLUSTER = image_with(metadata_version=25)  # formatted before the other features existed


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (FeatureUpdate(feature="transaction.version", max_version_level=3), "only supports"),
        (FeatureUpdate(feature="kraft.version", max_version_level=1), "has not registered"),
        (FeatureUpdate(feature="kraft.version", max_version_level=2), "only supports"),
        (FeatureUpdate(feature="metadata.version", max_version_level=26), "only supports"),
        (FeatureUpdate(feature="share.version", max_version_level=2), "only supports versions 0-1"),
        (
            FeatureUpdate(feature="eligible.leader.replicas.version", max_version_level=1),
            "only supports versions 0-0",
        ),
        (FeatureUpdate(feature="streams.version", max_version_level=1), "does not support this"),
        (FeatureUpdate(feature="group.version", max_version_level=-1), "cannot be less than 0"),
        (
            FeatureUpdate(feature="group.version", max_version_level=1, upgrade_type=9),
            "does not support the given upgrade type",
        ),
        (
            FeatureUpdate(feature="group.version", max_version_level=1, upgrade_type=2),
            "Can't downgrade to a newer version.",
        ),
    ],
)
def test_levels_this_software_does_not_have_are_refused(update, message):
    records, result = update_features(OLD_CLUSTER, [update], voter_ids=(1,))
    assert records == []
    assert result.error_code == E.invalid_update_version
    assert result.error_message.startswith(
        f"Invalid update version {update.max_version_level} for feature {update.feature}. "
    )
    assert message in result.error_message


def test_downgrades_are_refused_whatever_the_upgrade_type():
    current = image_with(metadata_version=25, group_version=1)
    _, plain = update_features(
        current, [FeatureUpdate(feature="group.version", max_version_level=0)]
    )
    assert plain.error_code == E.invalid_update_version
    assert "without setting the upgrade type to either safe or unsafe downgrade" in (
        plain.error_message
    )
    for upgrade_type in (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        _, result = update_features(
            current,
            [
                FeatureUpdate(
                    feature="group.version", max_version_level=0, upgrade_type=upgrade_type
                )
            ],
        )
        assert result.error_code == E.invalid_update_version
        assert "Moldau does not support downgrading" in result.error_message


def test_updates_are_all_or_nothing_and_validate_only_writes_nothing():
    upgrade = FeatureUpdate(feature="group.version", max_version_level=1)
    records, result = update_features(OLD_CLUSTER, [upgrade])
    assert result.error_code == E.none
    assert records == [FeatureLevelRecord(name="group.version", feature_level=1)]
    records, result = update_features(
        OLD_CLUSTER, [upgrade, FeatureUpdate(feature="group.version", max_version_level=1)]
    )
    assert records == [] and result.error_code == E.invalid_request
    records, result = update_features(
        OLD_CLUSTER, [upgrade, FeatureUpdate(feature="transaction.version", max_version_level=3)]
    )
    assert records == [] and result.error_code == E.invalid_update_version
    records, result = update_features(OLD_CLUSTER, [upgrade], validate_only=True)
    assert records == [] and result.error_code == E.none
    # The level it has already: nothing to write, and no error.
    assert update_features(
        OLD_CLUSTER, [FeatureUpdate(feature="metadata.version", max_version_level=25)]
    ) == (
        [],
        feature_control.FeatureUpdateResult(),
    )


def with_controllers(image, ranges):
    """`image` with controllers registered supporting kraft.version in `ranges` (id -> range)."""
    delta = MetadataDelta(image)
    for controller_id, (low, high) in ranges.items():
        delta.replay(
            RegisterControllerRecord(
                controller_id=controller_id,
                incarnation_id=uuid.UUID(int=controller_id),
                endpoints=(),
                features=(("kraft.version", low, high),),
            )
        )
    return delta.apply()


KRAFT_UPGRADE = FeatureUpdate(feature="kraft.version", max_version_level=1)


def test_a_kraft_version_upgrade_needs_every_voter_registered_supporting_it():
    voters = (1, 2, 3)
    partly = with_controllers(OLD_CLUSTER, {1: (0, 1), 2: (0, 1)})
    _, result = update_features(partly, [KRAFT_UPGRADE], voter_ids=voters)
    assert result.error_code == E.invalid_update_version
    assert "controller 3 has not registered, and may not support this feature" in (
        result.error_message
    )
    old_software = with_controllers(partly, {3: (0, 0)})
    _, result = update_features(old_software, [KRAFT_UPGRADE], voter_ids=voters)
    assert result.error_code == E.invalid_update_version
    assert "Controller 3 only supports versions 0-0" in result.error_message
    everyone = with_controllers(partly, {3: (0, 1)})
    # kraft.version is the quorum's: no metadata record, whatever the other updates write.
    group = FeatureUpdate(feature="group.version", max_version_level=1)
    records, result = update_features(everyone, [KRAFT_UPGRADE, group], voter_ids=voters)
    assert result.error_code == E.none
    assert records == [FeatureLevelRecord(name="group.version", feature_level=1)]


@pytest.mark.parametrize("upgrade_type", [UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE])
def test_a_kraft_version_downgrade_is_refused(upgrade_type):
    downgrade = FeatureUpdate(
        feature="kraft.version", max_version_level=0, upgrade_type=upgrade_type
    )
    _, result = update_features(OLD_CLUSTER, [downgrade], kraft_version=1)
    assert result.error_code == E.invalid_update_version
    expected = (
        "without setting the upgrade type"
        if upgrade_type == UPGRADE
        else "Can't downgrade the version of this feature."
    )
    assert expected in result.error_message
    # The level the quorum has: nothing to do.
    same = FeatureUpdate(feature="kraft.version", max_version_level=1)
    assert update_features(OLD_CLUSTER, [same], kraft_version=1) == (
        [],
        feature_control.FeatureUpdateResult(),
    )


@pytest.fixture
def old_cluster(tmp_path, monkeypatch):
    """A controller whose cluster finalized only metadata.version when it was formatted."""
    monkeypatch.setattr(feature_control, "BOOTSTRAP_LEVELS", {"metadata.version": 25})
    cluster = Cluster(tmp_path)
    monkeypatch.undo()
    yield cluster
    cluster.close()


def api_versions(cluster, version):
    body = {"client_software_name": "t", "client_software_version": "1"}
    return cluster.call(handle_api_versions, ApiKey.API_VERSIONS, version, body)


def test_api_versions_carries_supported_and_finalized_features(old_cluster):
    v4 = api_versions(old_cluster, 4)
    assert {f.name: (f.min_version, f.max_version) for f in v4.supported_features} == {
        "metadata.version": (25, 25),
        "kraft.version": (0, 1),
        "transaction.version": (0, 2),
        "group.version": (0, 1),
        # Kafka 4.1 lists it too; Moldau does not have the behaviour, so only level 0
        "eligible.leader.replicas.version": (0, 0),
        "share.version": (0, 1),
    }
    assert [(f.name, f.min_version_level, f.max_version_level) for f in v4.finalized_features] == [
        ("metadata.version", 25, 25)
    ]
    assert v4.finalized_features_epoch == old_cluster.controller.image.offset >= 0
    # Before v4, features whose minimum is 0 are left out of the supported ones.
    v3 = api_versions(old_cluster, 3)
    assert [f.name for f in v3.supported_features] == ["metadata.version"]
    assert api_versions(old_cluster, 2).error_code == E.none


@pytest.mark.parametrize("version", range(3))
def test_update_features_in_every_version(old_cluster, version):
    def update(feature, level, *, downgrade=False, validate_only=False):
        entry = {"feature": feature, "max_version_level": level}
        if version == 0:
            entry["allow_downgrade"] = downgrade
        else:
            entry["upgrade_type"] = 2 if downgrade else 1
        body = {"timeout": 60000, "feature_updates": [entry], "validate_only": validate_only}
        return old_cluster.call(handle_update_features, ApiKey.UPDATE_FEATURES, version, body)

    refused = update("group.version", 2)
    assert refused.error_code == E.invalid_update_version
    assert "only supports versions 0-1" in refused.error_message
    if version < 2:
        [result] = refused.results
        assert (result.feature, result.error_code) == ("group.version", E.invalid_update_version)
    if version >= 1:
        assert update("group.version", 1, validate_only=True).error_code == E.none
        assert "group.version" not in old_cluster.controller.image.features
    epoch_before = api_versions(old_cluster, 4).finalized_features_epoch
    done = update("group.version", 1)
    assert done.error_code == E.none and done.error_message is None
    if version < 2:
        assert [(r.feature, r.error_code) for r in done.results] == [("group.version", E.none)]
    assert old_cluster.controller.image.features["group.version"] == 1
    after = api_versions(old_cluster, 4)
    assert ("group.version", 1) in [(f.name, f.max_version_level) for f in after.finalized_features]
    assert after.finalized_features_epoch > epoch_before
    assert update("group.version", 0, downgrade=True).error_code == E.invalid_update_version


def test_a_cluster_formatted_before_share_groups_turns_them_on_with_share_version_1():
    upgrade = FeatureUpdate(feature="share.version", max_version_level=1)
    records, result = update_features(OLD_CLUSTER, [upgrade], voter_ids=(1,))
    assert result.error_code == E.none
    assert records == [FeatureLevelRecord(name="share.version", feature_level=1)]
