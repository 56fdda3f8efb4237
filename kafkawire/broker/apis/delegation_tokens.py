"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken (KIP-48,
KIP-373), checked as Kafka's ``KafkaApis`` checks them before its controller's token manager acts:

- none on a PLAINTEXT connection, a TLS one without a client certificate, or one authenticated with a
  token itself (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED);
- without ``delegation.token.secret.key``: DELEGATION_TOKEN_AUTH_DISABLED;
- a token for another owner needs CREATE_TOKENS on that USER (``User:bob``), else
  DELEGATION_TOKEN_AUTHORIZATION_FAILED; renewers must be ``User`` principals (INVALID_PRINCIPAL_TYPE);
- the owner, the requester and the renewers may renew, expire and describe a token; others see it with
  DESCRIBE on its DELEGATION_TOKEN (the token id) or DESCRIBE_TOKENS on its owner's USER.
"""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..delegation_tokens import DelegationTokens, TokenInformation
from ..delegation_tokens.manager import ERROR_TIMESTAMP
from ...acl_types import AclOperation as Operation, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["DelegationTokenApis"]

_USER_TYPE = "User"


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


class DelegationTokenApis:
    def __init__(self, state: BrokerState, tokens: DelegationTokens):
        self.state = state
        self.tokens = tokens

    async def create_delegation_token(self, request: m.CreateDelegationTokenRequest, version: int,
                                      context: RequestContext) -> m.CreateDelegationTokenResponse:
        requester = context.principal
        owner = f"{request.owner_principal_type}:{request.owner_principal_name}" \
            if request.owner_principal_name else requester
        renewers = [f"{r.principal_type}:{r.principal_name}" for r in request.renewers]
        if not context.may_manage_tokens:
            error = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        elif owner != requester and not self.state.allowed(context, Operation.CREATE_TOKENS, ResourceType.USER,
                                                           owner):
            error = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        elif any(r.principal_type != _USER_TYPE for r in request.renewers):
            error = ErrorCode.INVALID_PRINCIPAL_TYPE
        elif not self.tokens.enabled:
            error = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        else:
            token = self.tokens.create(owner, requester, renewers, request.max_lifetime_ms)
            return self._created(token, version)
        owner_type, owner_name = _split(owner)
        requester_type, requester_name = _requester(requester, version)
        return m.CreateDelegationTokenResponse(
            error_code=error, principal_type=owner_type, principal_name=owner_name,
            token_requester_principal_type=requester_type, token_requester_principal_name=requester_name)

    def _created(self, token: TokenInformation, version: int) -> m.CreateDelegationTokenResponse:
        owner_type, owner_name = _split(token.owner)
        requester_type, requester_name = _requester(token.requester, version)
        return m.CreateDelegationTokenResponse(
            error_code=ErrorCode.NONE, principal_type=owner_type, principal_name=owner_name,
            token_requester_principal_type=requester_type, token_requester_principal_name=requester_name,
            issue_timestamp_ms=token.issue_ms, expiry_timestamp_ms=token.expiry_ms, max_timestamp_ms=token.max_ms,
            token_id=token.token_id, hmac=self.tokens.hmac(token.token_id))

    async def renew_delegation_token(self, request: m.RenewDelegationTokenRequest, version: int,
                                     context: RequestContext) -> m.RenewDelegationTokenResponse:
        error, expiry = self._refused(context) or self.tokens.renew(bytes(request.hmac), context.principal,
                                                                    request.renew_period_ms)
        return m.RenewDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry)

    async def expire_delegation_token(self, request: m.ExpireDelegationTokenRequest, version: int,
                                      context: RequestContext) -> m.ExpireDelegationTokenResponse:
        error, expiry = self._refused(context) or self.tokens.expire(bytes(request.hmac), context.principal,
                                                                     request.expiry_time_period_ms)
        return m.ExpireDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry)

    def _refused(self, context: RequestContext) -> tuple[int, int] | None:
        if not context.may_manage_tokens:
            return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP
        if not self.tokens.enabled:
            return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, ERROR_TIMESTAMP
        return None

    async def describe_delegation_token(self, request: m.DescribeDelegationTokenRequest, version: int,
                                        context: RequestContext) -> m.DescribeDelegationTokenResponse:
        refused = self._refused(context)
        if refused is not None:
            return m.DescribeDelegationTokenResponse(error_code=refused[0], tokens=[])
        # null owners: every token the principal may see; an empty list: none
        owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}"
                                                      for o in request.owners]
        return m.DescribeDelegationTokenResponse(error_code=ErrorCode.NONE, tokens=[
            self._described(token, version) for token in self.tokens.tokens()
            if (owners is None or any(token.owner_or_renewer(owner) for owner in owners))
            and self._may_describe(context, token)])

    def _may_describe(self, context: RequestContext, token: TokenInformation) -> bool:
        """Kafka's ``filterToken``: the token's own principals, else DESCRIBE on the token or
        DESCRIBE_TOKENS on its owner."""
        return token.owner_or_renewer(context.principal) \
            or self.state.allowed(context, Operation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id) \
            or self.state.allowed(context, Operation.DESCRIBE_TOKENS, ResourceType.USER, token.owner)

    def _described(self, token: TokenInformation,
                   version: int) -> m.DescribeDelegationTokenResponse.DescribedDelegationToken:
        Described = m.DescribeDelegationTokenResponse.DescribedDelegationToken
        Renewer = m.DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer
        owner_type, owner_name = _split(token.owner)
        requester_type, requester_name = _requester(token.requester, version)
        return Described(principal_type=owner_type, principal_name=owner_name,
                         token_requester_principal_type=requester_type,
                         token_requester_principal_name=requester_name, issue_timestamp=token.issue_ms,
                         expiry_timestamp=token.expiry_ms, max_timestamp=token.max_ms, token_id=token.token_id,
                         hmac=self.tokens.hmac(token.token_id),
                         renewers=[Renewer(principal_type=t, principal_name=n) for t, n in map(_split, token.renewers)])


def _requester(principal: str, version: int) -> tuple[str, str]:
    """The requester's (type, name), which the responses carry from v3 (KIP-373) on."""
    return _split(principal) if version >= 3 else ("", "")
