"""SCRAM users for the admin client: DescribeUserScramCredentials and AlterUserScramCredentials. As Kafka's
admin clients do, the salted password is computed here (PBKDF2 with a random salt), so the password
itself never travels."""
from __future__ import annotations

import enum
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from kafkawire.messages import (
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkawire.sasl.scram import MECHANISMS

from .errors import error_for, outcome_of

__all__ = ["ScramMechanism", "ScramCredentialInfo", "UserScramCredentialsDescription",
           "UserScramCredentialUpsertion", "UserScramCredentialDeletion", "describe_user_scram_credentials_request",
           "read_describe_user_scram_credentials", "alter_user_scram_credentials_request",
           "read_alter_user_scram_credentials"]

_SALT_BYTES = 32


class ScramMechanism(enum.IntEnum):
    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialsDescription:
    user: str
    scram_credential_infos: tuple[ScramCredentialInfo, ...]


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s credential for a mechanism; ``salt`` None picks a random one."""

    user: str
    scram_credential_info: ScramCredentialInfo
    password: bytes
    salt: bytes | None = None


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: ScramMechanism


def describe_user_scram_credentials_request(users: Sequence[str] | None) -> DescribeUserScramCredentialsRequest:
    names = None if users is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users]
    return DescribeUserScramCredentialsRequest(users=names)


def read_describe_user_scram_credentials(response: DescribeUserScramCredentialsResponse) -> dict[str, object] | object:
    """user -> UserScramCredentialsDescription or its error (RESOURCE_NOT_FOUND: no credential), or the
    whole request's error."""
    if response.error_code:
        return error_for(response.error_code, response.error_message, "DescribeUserScramCredentials")
    found: dict[str, object] = {}
    for result in response.results:
        if result.error_code:
            found[result.user] = error_for(result.error_code, result.error_message, f"user {result.user!r}")
            continue
        found[result.user] = UserScramCredentialsDescription(result.user, tuple(
            ScramCredentialInfo(ScramMechanism(i.mechanism) if i.mechanism in (1, 2) else ScramMechanism.UNKNOWN,
                                i.iterations) for i in result.credential_infos))
    return found


def alter_user_scram_credentials_request(alterations: Sequence[UserScramCredentialUpsertion
                                                                | UserScramCredentialDeletion]
                                         ) -> AlterUserScramCredentialsRequest:
    wire = AlterUserScramCredentialsRequest
    deletions, upsertions = [], []
    for change in alterations:
        if isinstance(change, UserScramCredentialDeletion):
            deletions.append(wire.ScramCredentialDeletion(name=change.user, mechanism=int(change.mechanism)))
            continue
        info = change.scram_credential_info
        mechanism = ScramMechanism(info.mechanism)
        if mechanism == ScramMechanism.UNKNOWN:
            raise ValueError(f"user {change.user!r}: pick SCRAM_SHA_256 or SCRAM_SHA_512")
        salt = change.salt if change.salt is not None else secrets.token_bytes(_SALT_BYTES)
        password = change.password.decode() if isinstance(change.password, bytes) else str(change.password)
        salted = MECHANISMS[mechanism.mechanism_name].salted_password(password, salt, info.iterations)
        upsertions.append(wire.ScramCredentialUpsertion(name=change.user, mechanism=int(mechanism),
                                                        iterations=info.iterations, salt=salt, salted_password=salted))
    return wire(deletions=deletions, upsertions=upsertions)


def read_alter_user_scram_credentials(response: AlterUserScramCredentialsResponse) -> dict[str, object]:
    return {r.user: outcome_of(r.error_code, r.error_message, f"user {r.user!r}") for r in response.results}


