"""Delegation tokens (KIP-48): the broker's tokens and their lifecycle (``manager``), and Kafka's rules of
who may create, renew, expire and describe them (``access``). The four APIs are ``broker.apis.delegation_tokens``;
authentication with a token is SCRAM's (``broker.security.authenticator``)."""
from .manager import DelegationTokens, TokenInformation

__all__ = ["DelegationTokens", "TokenInformation"]
