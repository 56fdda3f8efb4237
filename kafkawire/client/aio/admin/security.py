"""The admin client's ACL, SCRAM and client quota calls (a part of AsyncAdminClient, ``aio.admin``), sent to any broker,
built and read by ``core.admin.acls``, ``core.admin.scram`` and ``core.admin.client_quotas``."""
from __future__ import annotations

from collections.abc import Sequence

from ...core.admin import acls, client_quotas
from ...core.admin import scram
from ...core.admin.acls import AclBinding, AclBindingFilter
from ...core.admin.client_quotas import ClientQuotaAlteration, ClientQuotaEntity, ClientQuotaFilter
from ...core.admin.scram import UserScramCredentialDeletion, UserScramCredentialUpsertion
from .calls import AdminPart, raise_or, unique

__all__ = ["SecurityAdmin"]


class SecurityAdmin(AdminPart):
    """create_acls, describe_acls, delete_acls, describe_user_scram_credentials,
    alter_user_scram_credentials, describe_client_quotas and alter_client_quotas (the broker needs an authorizer for ACLs: SECURITY_DISABLED otherwise)."""

    async def create_acls(self, bindings: Sequence[AclBinding], *, request_timeout: float | None = None
                          ) -> dict[AclBinding, object]:
        """``{binding: None or exception}``."""
        async def attempt(pending: list[AclBinding]) -> dict[AclBinding, object]:
            response = await self._calls.send_any(acls.create_acls_request(pending))
            return acls.read_create_acls(response, pending)
        return await self._router.run(unique(bindings, "ACL binding"), attempt, self._calls.timeout_ms(request_timeout),
                                      "create_acls")

    async def describe_acls(self, acl_binding_filter: AclBindingFilter, *, request_timeout: float | None = None
                            ) -> list[AclBinding]:
        """The ACLs the filter matches."""
        async def attempt() -> object:
            return acls.read_describe_acls(await self._calls.send_any(acls.describe_acls_request(acl_binding_filter)))
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout), "describe_acls"))

    async def delete_acls(self, filters: Sequence[AclBindingFilter], *, request_timeout: float | None = None
                          ) -> dict[AclBindingFilter, object]:
        """``{filter: list of the AclBindings it deleted, or exception}``."""
        async def attempt(pending: list[AclBindingFilter]) -> dict[AclBindingFilter, object]:
            response = await self._calls.send_any(acls.delete_acls_request(pending))
            return acls.read_delete_acls(response, pending)
        return await self._router.run(unique(filters, "ACL binding filter"), attempt,
                                      self._calls.timeout_ms(request_timeout), "delete_acls")

    async def describe_user_scram_credentials(self, users: Sequence[str] | None = None, *,
                                              request_timeout: float | None = None) -> dict[str, object]:
        """``{user: UserScramCredentialsDescription or exception}`` for ``users`` (RESOURCE_NOT_FOUND for
        one without credentials), or for every user with credentials when ``users`` is None."""
        names = None if users is None else unique(users, "user")

        async def attempt() -> object:
            request = scram.describe_user_scram_credentials_request(names)
            return scram.read_describe_user_scram_credentials(
                await self._calls.send_any(request))
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                                   "describe_user_scram_credentials"))

    async def alter_user_scram_credentials(self, alterations: Sequence[UserScramCredentialUpsertion
                                                                       | UserScramCredentialDeletion], *,
                                           request_timeout: float | None = None) -> dict[str, object]:
        """Add, replace or delete users' SCRAM credentials: ``{user: None or exception}``."""
        by_user: dict[str, list] = {}
        for change in alterations:
            by_user.setdefault(change.user, []).append(change)
        scram.alter_user_scram_credentials_request(list(alterations))  # refuses bad input before sending

        async def attempt(pending: list[str]) -> dict[str, object]:
            request = scram.alter_user_scram_credentials_request([c for u in pending for c in by_user[u]])
            response = await self._calls.send_any(request)
            return scram.read_alter_user_scram_credentials(response)
        return await self._router.run(list(by_user), attempt, self._calls.timeout_ms(request_timeout),
                                      "alter_user_scram_credentials")

    async def describe_client_quotas(self, quota_filter: ClientQuotaFilter, *, request_timeout: float | None = None
                                     ) -> dict[ClientQuotaEntity, dict[str, float]]:
        """``{entity: {quota key: value}}`` for the entities the filter matches."""
        async def attempt() -> object:
            request = client_quotas.describe_client_quotas_request(quota_filter)
            return client_quotas.read_describe_client_quotas(await self._calls.send_any(request))
        return raise_or(await self._router.run_one(attempt, self._calls.timeout_ms(request_timeout),
                                                   "describe_client_quotas"))

    async def alter_client_quotas(self, alterations: Sequence[ClientQuotaAlteration], *, validate_only: bool = False,
                                  request_timeout: float | None = None) -> dict[ClientQuotaEntity, object]:
        """Set or remove (value None) quotas: ``{entity: None or exception}``."""
        by_entity = {a.entity: a for a in alterations}
        unique([a.entity for a in alterations], "client quota entity")

        async def attempt(pending: list[ClientQuotaEntity]) -> dict[ClientQuotaEntity, object]:
            request = client_quotas.alter_client_quotas_request([by_entity[e] for e in pending], validate_only)
            return client_quotas.read_alter_client_quotas(await self._calls.send_any(request))
        return await self._router.run(list(by_entity), attempt, self._calls.timeout_ms(request_timeout),
                                      "alter_client_quotas")
