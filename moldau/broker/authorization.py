"""The node's authorizer over the ACLs of the metadata image.

`NodeAuthorization.of(config, acls)` is None when no authorizer is configured
(`moldau.config.authorization`): every request is then allowed, and the ACL APIs answer
SECURITY_DISABLED as Kafka's do. Otherwise `current()` is an `Authorizer`
(`moldau.metadata.acls`) for the image's ACLs, rebuilt only when they change. Handlers ask
through `RequestContext.authorized` and friends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from moldau.config.authorization import AuthorizerSettings
from moldau.config.values import BrokerConfig
from moldau.metadata.acls import AclBinding, Authorizer


class NodeAuthorization:
    def __init__(
        self, settings: AuthorizerSettings, acls: Callable[[], Mapping[Any, AclBinding]]
    ) -> None:
        self.settings = settings
        self._acls = acls
        self._source: Mapping[Any, AclBinding] | None = None
        self._authorizer = self._build(())

    @classmethod
    def of(
        cls, config: BrokerConfig, acls: Callable[[], Mapping[Any, AclBinding]]
    ) -> NodeAuthorization | None:
        settings = AuthorizerSettings.of(config)
        return cls(settings, acls) if settings is not None else None

    def current(self) -> Authorizer:
        """The authorizer for the ACLs as they stand."""
        acls = self._acls()
        if acls is not self._source:
            self._authorizer = self._build(acls.values())
            self._source = acls
        return self._authorizer

    def _build(self, acls: Any) -> Authorizer:
        return Authorizer(
            acls,
            super_users=self.settings.super_users,
            allow_if_no_acl=self.settings.allow_if_no_acl,
        )
