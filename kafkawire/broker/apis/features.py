"""Finalized features (KIP-584): the levels ApiVersions reports and UpdateFeatures changes, with the
checks of Kafka's ``FeatureControlManager``.

kafkawire supports only the levels whose behaviour it has: ``metadata.version`` 4.3-IV0 (Kafka refuses
every downgrade from it, since 4.3-IV0 changed metadata), ``transaction.version`` 0-2 (below 2 the
KIP-890 part 2 versions are not served, applied live), ``group.version`` 1 (KIP-848 consumer groups,
always served) and ``share.version`` 1 (share groups, always served). The levels and the epoch are
kept in ``features.json`` in the data directory once an update lands.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from ... import messages as m
from ...error_codes import ErrorCode
from ..persistence.atomic_file import write_json_atomically
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["FinalizedFeatures", "FeatureApis", "METADATA_VERSION", "SUPPORTED_FEATURES", "report_features"]

log = logging.getLogger(__name__)

METADATA_VERSION = "metadata.version"
_METADATA_VERSION_MINIMUM, _METADATA_VERSION_4_3_IV0 = 7, 30  # IBP_3_3_IV3, IBP_4_3_IV0
# feature -> (oldest, newest) level this node supports
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (_METADATA_VERSION_MINIMUM, _METADATA_VERSION_4_3_IV0),
    "transaction.version": (0, 2),
    "group.version": (1, 1),
    "share.version": (1, 1),
}
# FeatureUpdate.UpgradeType codes
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
_FAILED = "The update failed for all features since the following feature had an error: "


class FinalizedFeatures:
    """The cluster's finalized levels and their epoch, shared by an in-process cluster's nodes;
    ``listeners`` are told of every applied change (a node caps its served versions by them)."""

    def __init__(self, path: Path, transaction_version: int):
        self.path = path
        self.levels: dict[str, int] = {METADATA_VERSION: _METADATA_VERSION_4_3_IV0,
                                       "transaction.version": transaction_version,
                                       "group.version": 1, "share.version": 1}
        self.epoch = 0
        self.listeners: list[Callable[[dict[str, int]], None]] = []
        if path.exists():  # an update landed before a restart: it wins over the configured level
            saved = json.loads(path.read_text())
            self.levels, self.epoch = {name: int(level) for name, level in saved["levels"].items()}, saved["epoch"]

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    def apply(self, updates: dict[str, int]) -> None:
        """Finalizes ``updates`` (a level of 0 removes the feature), persists them and tells the listeners."""
        for name, level in updates.items():
            if level == 0:
                self.levels.pop(name, None)
            else:
                self.levels[name] = level
        self.epoch += 1
        write_json_atomically(self.path, {"epoch": self.epoch, "levels": self.levels})
        for listener in self.listeners:
            listener(self.levels)

    def check(self, name: str, level: int, upgrade_type: int, node_id: int) -> str | None:
        """Why ``name`` cannot go to ``level`` (FeatureControlManager.updateFeature), or None; ``node_id``
        is the controller's, which names itself in the message as Kafka's does."""
        def invalid(reason: str) -> str:
            return f"Invalid update version {level} for feature {name}. {reason}"
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return invalid("The controller does not support the given upgrade type.")
        if level < 0:
            return invalid("A feature version cannot be less than 0.")
        supported = SUPPORTED_FEATURES.get(name)
        if supported is None:
            return invalid(f"Local controller {node_id} does not support this feature.")
        if not supported[0] <= level <= supported[1]:
            return invalid(f"Local controller {node_id} only supports versions {supported[0]}-{supported[1]}")
        current = self.level(name)
        if level < current and upgrade_type == UPGRADE:
            return invalid("Can't downgrade the version of this feature without setting the upgrade type to "
                           "either safe or unsafe downgrade.")
        if level > current and upgrade_type != UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION and level < current:  # 4.3-IV0 changed metadata: no downgrade is lossless
            reason = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type == UNSAFE_DOWNGRADE
                      else "Refusing to perform the requested downgrade because it might delete metadata information.")
            return f"Invalid metadata.version {level}. {reason}"
        return None


class FeatureApis:
    def __init__(self, state: BrokerState, features: FinalizedFeatures):
        self.state = state
        self.features = features

    async def update_features(self, request: m.UpdateFeaturesRequest, version: int,
                              context: RequestContext) -> m.UpdateFeaturesResponse:
        Response = m.UpdateFeaturesResponse
        if not self.state.allowed(context, Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
            return Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message="Cluster authorization failed.", results=[])
        updates: dict[str, tuple[int, int]] = {}  # a repeated feature keeps its last row, as Kafka's map does
        for update in request.feature_updates:
            upgrade_type = ((SAFE_DOWNGRADE if update.allow_downgrade else UPGRADE) if version == 0
                            else update.upgrade_type)
            updates[update.feature] = (update.max_version_level, upgrade_type)
        for name, (level, upgrade_type) in updates.items():
            reason = self.features.check(name, level, upgrade_type, self.state.view.controller_id)
            if reason is not None:  # the whole request fails, nothing is applied
                log.warning("UpdateFeatures refused: %s", reason)
                return Response(error_code=ErrorCode.INVALID_UPDATE_VERSION, error_message=_FAILED + reason,
                                results=[])
        if not request.validate_only and updates:
            self.features.apply({name: level for name, (level, _) in updates.items()})
        results = ([Response.UpdatableFeatureResult(feature=update.feature, error_code=0, error_message="NONE")
                    for update in request.feature_updates] if version <= 1 else [])
        return Response(error_code=0, error_message=None, results=results)


def report_features(response: m.ApiVersionsResponse, features: FinalizedFeatures) -> None:
    """Fills ApiVersions (v3+) with the supported and finalized features and their epoch."""
    response.supported_features = [m.ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low,
                                                                             max_version=high)
                                   for name, (low, high) in SUPPORTED_FEATURES.items()]
    response.finalized_features_epoch = features.epoch
    response.finalized_features = [m.ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level,
                                                                             min_version_level=level)
                                   for name, level in features.levels.items() if level > 0]
