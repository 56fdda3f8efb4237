"""AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554): SCRAM credentials managed as
``kafka-configs --entity-type users`` manages them, checked as Kafka's ``ScramControlManager`` checks
them (CLUSTER ALTER / DESCRIBE; a known mechanism, 4096-16384 iterations, a user named once per
request), kept in the broker's credential store."""
from __future__ import annotations

from collections import Counter

from ... import messages as m
from ...error_codes import ErrorCode
from ...sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS
from ...acl_types import AclOperation as Operation, ResourceType
from ..security.scram_store import MECHANISM_BY_TYPE
from .state import BrokerState, RequestContext

__all__ = ["ScramCredentialApis"]


class ScramCredentialApis:
    def __init__(self, state: BrokerState):
        self.state = state
        self.store = state.scram

    async def describe_user_scram_credentials(self, request: m.DescribeUserScramCredentialsRequest, version: int,
                                              context: RequestContext) -> m.DescribeUserScramCredentialsResponse:
        if not self.state.allowed(context, Operation.DESCRIBE, ResourceType.CLUSTER, "kafka-cluster"):
            return m.DescribeUserScramCredentialsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                          results=[])
        Result = m.DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
        Info = m.DescribeUserScramCredentialsResponse.CredentialInfo
        if request.users is None or not request.users:  # every user with credentials
            names = sorted(self.store.credentials)
            counts: Counter = Counter()
        else:
            names = [user.name for user in request.users]
            counts = Counter(names)
        results = []
        for name in dict.fromkeys(names):
            if counts[name] > 1:
                results.append(Result(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                      error_message=f"Cannot describe SCRAM credentials for the same user twice "
                                                    f"in a single request: {name}", credential_infos=[]))
                continue
            found = self.store.credentials.get(name)
            if not found:
                results.append(Result(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                      error_message=f"Attempt to describe a user credential that does not exist: "
                                                    f"{name}", credential_infos=[]))
                continue
            results.append(Result(user=name, error_code=0, credential_infos=[
                Info(mechanism=c.mechanism.kafka_type, iterations=c.iterations)
                for c in sorted(found.values(), key=lambda c: c.mechanism.kafka_type)]))
        return m.DescribeUserScramCredentialsResponse(error_code=0, results=results)

    async def alter_user_scram_credentials(self, request: m.AlterUserScramCredentialsRequest, version: int,
                                           context: RequestContext) -> m.AlterUserScramCredentialsResponse:
        Result = m.AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
        users = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
        if not self.state.allowed(context, Operation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
            return m.AlterUserScramCredentialsResponse(results=[
                Result(user=name, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for name in dict.fromkeys(users)])
        errors: dict[str, tuple[int, str]] = {}
        pairs = Counter((d.name, d.mechanism) for d in request.deletions) + \
            Counter((u.name, u.mechanism) for u in request.upsertions)
        for (name, _), count in pairs.items():
            if count > 1:
                errors.setdefault(name, (ErrorCode.DUPLICATE_RESOURCE,
                                         "A user credential cannot be altered twice in the same request"))
        named = [(d.name, d.mechanism) for d in request.deletions] + [(u.name, u.mechanism) for u in request.upsertions]
        for name, mechanism_type in named:
            if not name:
                errors.setdefault(name, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"))
            elif mechanism_type not in MECHANISM_BY_TYPE:
                errors.setdefault(name, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"))
        for upsertion in request.upsertions:
            if not MIN_ITERATIONS <= upsertion.iterations <= MAX_ITERATIONS:
                errors.setdefault(upsertion.name, (
                    ErrorCode.UNACCEPTABLE_CREDENTIAL,
                    f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"))
        for deletion in request.deletions:
            deleted = MECHANISM_BY_TYPE.get(deletion.mechanism)
            if deletion.name not in errors and deleted is not None and \
                    deleted.name not in self.store.credentials.get(deletion.name, {}):
                errors[deletion.name] = (ErrorCode.RESOURCE_NOT_FOUND,
                                         "Attempt to delete a user credential that does not exist")
        for deletion in request.deletions:
            if deletion.name not in errors:
                self.store.remove(deletion.name, MECHANISM_BY_TYPE[deletion.mechanism])
        for upsertion in request.upsertions:
            if upsertion.name not in errors:
                mechanism = MECHANISM_BY_TYPE[upsertion.mechanism]
                self.store.put(upsertion.name, mechanism.credential_from_salted(
                    bytes(upsertion.salted_password), bytes(upsertion.salt), upsertion.iterations))
        self.store.save()
        return m.AlterUserScramCredentialsResponse(results=[
            Result(user=name, error_code=errors.get(name, (0, None))[0], error_message=errors.get(name, (0, None))[1])
            for name in dict.fromkeys(users)])
