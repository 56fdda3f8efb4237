"""Delegation tokens for the admin client (KIP-48, KIP-373): CreateDelegationToken, RenewDelegationToken,
ExpireDelegationToken and DescribeDelegationToken, under Java's Admin names (``createDelegationToken``...).
Principals are written as Kafka writes them, ``User:alice``. A token's ``hmac`` is its password: a client
authenticates with SCRAM, user = ``token_id``, password = ``hmac_base64``, with ``tokenauth="true"`` in
its ScramLoginModule JAAS options."""
from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from kafkawire.messages import (
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest, RenewDelegationTokenResponse,
)

from .errors import outcome_of

__all__ = ["DelegationToken", "create_delegation_token_request", "read_create_delegation_token",
           "renew_delegation_token_request", "expire_delegation_token_request", "read_expiry_timestamp",
           "describe_delegation_token_request", "read_describe_delegation_token"]


@dataclass(frozen=True)
class DelegationToken:
    """Java's ``DelegationToken``: its ``TokenInformation`` and HMAC; timestamps in ms since the epoch."""

    token_id: str
    owner: str
    token_requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    expiry_timestamp: int
    max_timestamp: int
    hmac: bytes

    @property
    def hmac_base64(self) -> str:
        """The SCRAM password of the token."""
        return base64.b64encode(self.hmac).decode()


def _principal(text: str) -> tuple[str, str]:
    kind, colon, name = text.partition(":")
    if not colon or not kind or not name:
        raise ValueError(f"{text!r} is not a principal such as User:alice")
    return kind, name


def create_delegation_token_request(renewers: Sequence[str], owner: str | None,
                                    max_lifetime_ms: int) -> CreateDelegationTokenRequest:
    """``owner`` None: the token is the caller's own."""
    Renewer = CreateDelegationTokenRequest.CreatableRenewers
    owner_type, owner_name = _principal(owner) if owner is not None else (None, None)
    return CreateDelegationTokenRequest(
        owner_principal_type=owner_type, owner_principal_name=owner_name, max_lifetime_ms=max_lifetime_ms,
        renewers=[Renewer(principal_type=kind, principal_name=name) for kind, name in map(_principal, renewers)])


def read_create_delegation_token(response: CreateDelegationTokenResponse,
                                 renewers: Sequence[str]) -> DelegationToken | object:
    error = outcome_of(response.error_code, None, "CreateDelegationToken")
    if error is not None:
        return error
    return DelegationToken(
        response.token_id, f"{response.principal_type}:{response.principal_name}",
        f"{response.token_requester_principal_type}:{response.token_requester_principal_name}", tuple(renewers),
        response.issue_timestamp_ms, response.expiry_timestamp_ms, response.max_timestamp_ms, bytes(response.hmac))


def renew_delegation_token_request(hmac: bytes, renew_time_period_ms: int) -> RenewDelegationTokenRequest:
    return RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=renew_time_period_ms)


def expire_delegation_token_request(hmac: bytes, expiry_time_period_ms: int) -> ExpireDelegationTokenRequest:
    return ExpireDelegationTokenRequest(hmac=hmac, expiry_time_period_ms=expiry_time_period_ms)


def read_expiry_timestamp(response: RenewDelegationTokenResponse | ExpireDelegationTokenResponse,
                          what: str) -> int | object:
    """The token's new expiry timestamp, or the error."""
    error = outcome_of(response.error_code, None, what)
    return error if error is not None else response.expiry_timestamp_ms


def describe_delegation_token_request(owners: Sequence[str] | None) -> DescribeDelegationTokenRequest:
    Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    return DescribeDelegationTokenRequest(owners=None if owners is None else [
        Owner(principal_type=kind, principal_name=name) for kind, name in map(_principal, owners)])


def read_describe_delegation_token(response: DescribeDelegationTokenResponse) -> list[DelegationToken] | object:
    error = outcome_of(response.error_code, None, "DescribeDelegationToken")
    if error is not None:
        return error
    return [DelegationToken(t.token_id, f"{t.principal_type}:{t.principal_name}",
                            f"{t.token_requester_principal_type}:{t.token_requester_principal_name}",
                            tuple(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
                            t.issue_timestamp, t.expiry_timestamp, t.max_timestamp, bytes(t.hmac))
            for t in response.tokens]
