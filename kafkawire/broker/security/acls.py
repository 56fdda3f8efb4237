"""ACLs and the authorizer, with the semantics of Kafka's ``StandardAuthorizer``.

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an entry (principal, host,
operation, ALLOW or DENY). Authorizing an action on a resource looks at every ACL whose pattern
matches the resource name (the literal name, the literal wildcard ``*``, any PREFIXED pattern the
name starts with) and whose principal is the caller's or ``User:*`` and whose host is the caller's or
``*``:

- a matching DENY wins (DENY ACLs match their own operation or ALL only);
- else a matching ALLOW allows; READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS implies
  DESCRIBE_CONFIGS, and ALL implies everything (ALLOW ACLs only);
- else, if no ACL at all exists for the resource, ``allow.everyone.if.no.acl.found`` decides (default
  false), and otherwise the action is denied.

``super.users`` are allowed everything. The ACLs are kept in ``DATA/acls.json`` (written whole,
atomically, after every change).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...acl_types import AclOperation as Operation
from ...acl_types import AclPermissionType as Permission
from ...acl_types import ResourcePatternType as PatternType
from ...acl_types import TOPIC_OPERATIONS, ResourceType
from ..persistence.atomic_file import PRIVATE, write_json_atomically

__all__ = ["ResourceType", "PatternType", "Operation", "Permission", "AclBinding", "AclFilter", "Authorizer",
           "WILDCARD", "WILDCARD_PRINCIPAL", "TOPIC_OPERATIONS"]

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


# authorizer.class.name values that turn the authorizer on (KRaft's and the ZooKeeper-era one)
AUTHORIZER_CLASS_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.authorizer.AclAuthorizer")
_IMPLIES_DESCRIBE = {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
_IMPLIES_DESCRIBE_CONFIGS = {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}


@dataclass(frozen=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType  # LITERAL or PREFIXED
    principal: str  # "User:alice", "User:*"
    host: str  # an address or "*"
    operation: Operation
    permission: Permission

    def problem(self) -> str | None:
        """Why Kafka would refuse to create this ACL, or None."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return "Invalid resource type"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return "Invalid pattern type"
        if self.operation in (Operation.UNKNOWN, Operation.ANY):
            return "Invalid operation"
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            return "Invalid permission type"
        if not self.resource_name:
            return "Resource name must not be empty"
        if ":" not in self.principal or not self.principal.split(":", 1)[1]:
            return f"Could not parse principal from `{self.principal}` (no colon is found)"
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != "kafka-cluster":
            return "The only valid name for the CLUSTER resource is kafka-cluster"
        return None

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name == name or self.resource_name == WILDCARD


@dataclass(frozen=True)
class AclFilter:
    """Kafka's AclBindingFilter: None / ANY fields match everything; MATCH patterns match the ACLs that
    would apply to the named resource."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type is not ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.resource_name is not None and not acl.matches_resource(acl.resource_type, self.resource_name):
                return False
        else:
            if self.pattern_type is not PatternType.ANY and acl.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and acl.resource_name != self.resource_name:
                return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not Operation.ANY and acl.operation != self.operation:
            return False
        return self.permission is Permission.ANY or acl.permission == self.permission


class Authorizer:
    """The ACLs and the decisions made from them (see the module docstring)."""

    def __init__(self, path: Path | None, super_users: Iterable[str] = (), allow_if_no_acl: bool = False):
        self.path = path
        self.super_users = set(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: list[AclBinding] = []
        if path is not None and path.exists():
            self.acls = [AclBinding(ResourceType(e[0]), e[1], PatternType(e[2]), e[3], e[4], Operation(e[5]),
                                    Permission(e[6])) for e in json.loads(path.read_text())]

    @classmethod
    def from_settings(cls, settings: dict[str, str], path: Path | None) -> Authorizer | None:
        """The authorizer ``authorizer.class.name`` asks for (Kafka's class names), or None without one."""
        name = (settings.get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASS_NAMES:
            raise ValueError(f"authorizer.class.name: {name!r} is not one of {', '.join(AUTHORIZER_CLASS_NAMES)}")
        users = [u.strip() for u in settings.get("super.users", "").split(";") if u.strip()]
        allow = settings.get("allow.everyone.if.no.acl.found", "false").strip().lower()
        if allow not in ("true", "false"):
            raise ValueError(f"invalid value {allow!r} for allow.everyone.if.no.acl.found")
        return cls(path, users, allow == "true")

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        found_resource_acl = allowed = False
        for acl in self.acls:
            if not acl.matches_resource(resource_type, name):
                continue
            found_resource_acl = True
            if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD):
                continue
            if acl.permission is Permission.DENY:
                if acl.operation in (operation, Operation.ALL):
                    return False
            elif acl.operation is Operation.ALL or acl.operation == operation or (
                    operation is Operation.DESCRIBE and acl.operation in _IMPLIES_DESCRIBE) or (
                    operation is Operation.DESCRIBE_CONFIGS and acl.operation in _IMPLIES_DESCRIBE_CONFIGS):
                allowed = True
        if allowed:
            return True
        return self.allow_if_no_acl and not found_resource_acl

    def authorize_any(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether ``operation`` is allowed on some resource of ``resource_type``, named or not yet made, as
        Kafka's ``authorizeByResourceType``: an ALLOW binding for the principal that no DENY binding
        covers (a DENY of the same literal name, a DENY prefix of it, or a DENY of every name)."""
        if principal in self.super_users:
            return True

        def applies(acl: AclBinding) -> bool:
            return (acl.resource_type is resource_type and acl.principal in (principal, WILDCARD_PRINCIPAL)
                    and acl.host in (host, WILDCARD) and acl.operation in (operation, Operation.ALL))
        denied = [acl for acl in self.acls if acl.permission is Permission.DENY and applies(acl)]
        if any(acl.resource_name == WILDCARD and acl.pattern_type is PatternType.LITERAL for acl in denied):
            return False

        def covered(allow: AclBinding) -> bool:
            return any((deny.pattern_type is PatternType.LITERAL and deny.resource_name == allow.resource_name
                        and allow.pattern_type is PatternType.LITERAL)
                       or (deny.pattern_type is PatternType.PREFIXED
                           and allow.resource_name.startswith(deny.resource_name)) for deny in denied)
        if any(acl.permission is Permission.ALLOW and applies(acl) and not covered(acl) for acl in self.acls):
            return True
        return self.allow_if_no_acl and not any(acl.resource_type is resource_type for acl in self.acls)

    def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """Add ACLs; per binding, None or Kafka's reason for refusing it."""
        results: list[str | None] = []
        for binding in bindings:
            problem = binding.problem()
            if problem is None and binding not in self.acls:
                self.acls.append(binding)
            results.append(problem)
        self._save()
        return results

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self.acls if acl_filter.matches(acl)]

    def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove every ACL each filter matches; per filter, what it removed."""
        removed = [self.describe(f) for f in filters]
        gone = {acl for matched in removed for acl in matched}
        if gone:
            self.acls = [acl for acl in self.acls if acl not in gone]
            self._save()
        return removed

    def _save(self) -> None:
        if self.path is None:
            return
        entries = [[int(a.resource_type), a.resource_name, int(a.pattern_type), a.principal, a.host,
                    int(a.operation), int(a.permission)] for a in self.acls]
        write_json_atomically(self.path, entries, mode=PRIVATE)
