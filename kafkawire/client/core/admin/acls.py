"""ACLs for the admin client: AclBinding (a resource pattern and an access rule), AclBindingFilter (the
same with ANY and None as wildcards), and CreateAcls, DescribeAcls and DeleteAcls. The enums are
``kafkawire.acl_types`` (Kafka's wire values), shared with the broker."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkawire.messages import (
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
)

from ....acl_types import AclOperation, AclPermissionType, ResourcePatternType, ResourceType
from .errors import error_for, outcome_of

__all__ = ["ResourceType", "ResourcePatternType", "AclOperation", "AclPermissionType", "AclBinding",
           "AclBindingFilter", "create_acls_request", "read_create_acls", "describe_acls_request",
           "read_describe_acls", "delete_acls_request", "read_delete_acls"]


@dataclass(frozen=True)
class AclBinding:
    """An ACL: principal (``User:alice``) may (ALLOW) or may not (DENY) do ``operation`` from ``host``
    (``*``: any) on the resources ``restype``/``name``/``resource_pattern_type`` name."""

    restype: ResourceType
    name: str
    resource_pattern_type: ResourcePatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        for attribute, cls in (("restype", ResourceType), ("resource_pattern_type", ResourcePatternType),
                               ("operation", AclOperation), ("permission_type", AclPermissionType)):
            object.__setattr__(self, attribute, cls.of(getattr(self, attribute)))


@dataclass(frozen=True)
class AclBindingFilter(AclBinding):
    """ACLs to describe or delete: ANY for enums, None for names, principal or host matches every one."""

    name: str | None  # type: ignore[assignment]
    principal: str | None  # type: ignore[assignment]
    host: str | None  # type: ignore[assignment]


def create_acls_request(acls: Sequence[AclBinding]) -> CreateAclsRequest:
    return CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=int(a.restype), resource_name=a.name, resource_pattern_type=int(a.resource_pattern_type),
        principal=a.principal, host=a.host, operation=int(a.operation), permission_type=int(a.permission_type))
        for a in acls])


def read_create_acls(response: CreateAclsResponse, acls: Sequence[AclBinding]) -> dict[AclBinding, object]:
    """Results come back in request order."""
    return {acl: outcome_of(result.error_code, result.error_message, acl)
            for acl, result in zip(acls, response.results)}


def describe_acls_request(f: AclBindingFilter) -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=int(f.restype), resource_name_filter=f.name,
                               pattern_type_filter=int(f.resource_pattern_type), principal_filter=f.principal,
                               host_filter=f.host, operation=int(f.operation), permission_type=int(f.permission_type))


def read_describe_acls(response: DescribeAclsResponse) -> object:
    """The ACLs the filter matched, or the error."""
    if response.error_code:
        return error_for(response.error_code, response.error_message, "DescribeAcls")
    return [AclBinding(ResourceType.of(r.resource_type), r.resource_name, ResourcePatternType.of(r.pattern_type),
                       a.principal, a.host, AclOperation.of(a.operation), AclPermissionType.of(a.permission_type))
            for r in response.resources for a in r.acls]


def delete_acls_request(filters: Sequence[AclBindingFilter]) -> DeleteAclsRequest:
    return DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=int(f.restype), resource_name_filter=f.name,
        pattern_type_filter=int(f.resource_pattern_type), principal_filter=f.principal, host_filter=f.host,
        operation=int(f.operation), permission_type=int(f.permission_type)) for f in filters])


def read_delete_acls(response: DeleteAclsResponse, filters: Sequence[AclBindingFilter]
                     ) -> dict[AclBindingFilter, object]:
    """filter -> the ACLs it deleted, or its error. Results come back in request order."""
    found: dict[AclBindingFilter, object] = {}
    for f, result in zip(filters, response.filter_results):
        failure = outcome_of(result.error_code, result.error_message, f)
        found[f] = failure if failure is not None else [
            AclBinding(ResourceType.of(m.resource_type), m.resource_name, ResourcePatternType.of(m.pattern_type),
                       m.principal, m.host, AclOperation.of(m.operation), AclPermissionType.of(m.permission_type))
            for m in result.matching_acls if not m.error_code]
    return found
