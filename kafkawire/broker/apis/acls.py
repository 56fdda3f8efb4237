"""CreateAcls, DescribeAcls and DeleteAcls over the broker's authorizer (``security.acls``): CLUSTER
ALTER to change ACLs, CLUSTER DESCRIBE to list them, SECURITY_DISABLED without an authorizer, as Kafka
answers."""
from __future__ import annotations

from ... import messages as m
from ...error_codes import ErrorCode
from ..security.acls import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from .state import BrokerState, RequestContext

__all__ = ["AclApis"]

# Kafka's own wording differs between DescribeAcls and the two calls that change ACLs
_NO_AUTHORIZER_DESCRIBE = "No Authorizer is configured on the broker"
_NO_AUTHORIZER_ALTER = "No Authorizer is configured."


def _enum(kind, value: int, unknown):
    try:
        return kind(value)
    except ValueError:
        return unknown


class AclApis:
    def __init__(self, state: BrokerState):
        self.state = state

    def _refusal(self, context: RequestContext, operation: Operation) -> tuple[int, str | None]:
        authorizer = self.state.authorizer
        if authorizer is None:
            return ErrorCode.SECURITY_DISABLED, (_NO_AUTHORIZER_DESCRIBE if operation is Operation.DESCRIBE
                                                 else _NO_AUTHORIZER_ALTER)
        if not self.state.allowed(context, operation, ResourceType.CLUSTER, "kafka-cluster"):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return ErrorCode.NONE, None

    async def create_acls(self, request: m.CreateAclsRequest, version: int,
                          context: RequestContext) -> m.CreateAclsResponse:
        code, message = self._refusal(context, Operation.ALTER)
        if code:
            return m.CreateAclsResponse(results=[m.CreateAclsResponse.AclCreationResult(
                error_code=code, error_message=message) for _ in request.creations])
        bindings = [AclBinding(_enum(ResourceType, c.resource_type, ResourceType.UNKNOWN), c.resource_name,
                               _enum(PatternType, c.resource_pattern_type, PatternType.UNKNOWN), c.principal, c.host,
                               _enum(Operation, c.operation, Operation.UNKNOWN),
                               _enum(Permission, c.permission_type, Permission.UNKNOWN))
                    for c in request.creations]
        authorizer = self.state.authorizer
        assert authorizer is not None  # _refusal answers SECURITY_DISABLED without one
        problems = authorizer.create(bindings)
        return m.CreateAclsResponse(results=[m.CreateAclsResponse.AclCreationResult(
            error_code=ErrorCode.INVALID_REQUEST if problem else 0, error_message=problem) for problem in problems])

    async def describe_acls(self, request: m.DescribeAclsRequest, version: int,
                            context: RequestContext) -> m.DescribeAclsResponse:
        code, message = self._refusal(context, Operation.DESCRIBE)
        if code:
            return m.DescribeAclsResponse(error_code=code, error_message=message, resources=[])
        authorizer = self.state.authorizer
        assert authorizer is not None  # _refusal answers SECURITY_DISABLED without one
        found = authorizer.describe(_filter(request))
        resources: dict[tuple, list] = {}
        for acl in found:
            resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                m.DescribeAclsResponse.AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                                                      permission_type=acl.permission))
        return m.DescribeAclsResponse(error_code=0, resources=[
            m.DescribeAclsResponse.DescribeAclsResource(resource_type=kind, resource_name=name, pattern_type=pattern,
                                                        acls=acls)
            for (kind, name, pattern), acls in resources.items()])

    async def delete_acls(self, request: m.DeleteAclsRequest, version: int,
                          context: RequestContext) -> m.DeleteAclsResponse:
        code, message = self._refusal(context, Operation.ALTER)
        Result = m.DeleteAclsResponse.DeleteAclsFilterResult
        if code:
            return m.DeleteAclsResponse(filter_results=[Result(error_code=code, error_message=message,
                                                               matching_acls=[]) for _ in request.filters])
        authorizer = self.state.authorizer
        assert authorizer is not None  # _refusal answers SECURITY_DISABLED without one
        removed = authorizer.delete([_filter(f) for f in request.filters])
        return m.DeleteAclsResponse(filter_results=[Result(error_code=0, matching_acls=[
            m.DeleteAclsResponse.DeleteAclsMatchingAcl(
                error_code=0, resource_type=acl.resource_type, resource_name=acl.resource_name,
                pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host, operation=acl.operation,
                permission_type=acl.permission) for acl in acls]) for acls in removed])


def _filter(request: m.DescribeAclsRequest | m.DeleteAclsRequest.DeleteAclsFilter) -> AclFilter:
    """Kafka's AclBindingFilter from a DescribeAcls request or a DeleteAcls filter."""
    return AclFilter(_enum(ResourceType, request.resource_type_filter, ResourceType.UNKNOWN),
                     request.resource_name_filter,
                     _enum(PatternType, request.pattern_type_filter, PatternType.UNKNOWN),
                     request.principal_filter, request.host_filter,
                     _enum(Operation, request.operation, Operation.UNKNOWN),
                     _enum(Permission, request.permission_type, Permission.UNKNOWN))
