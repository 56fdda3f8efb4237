"""The authorizer against StandardAuthorizer's rules: deny wins, wildcard principals and hosts, literal,
wildcard and prefixed patterns, implied DESCRIBE and DESCRIBE_CONFIGS (for ALLOW only), super users,
allow.everyone.if.no.acl.found, filters for describe and delete, and persistence."""
from __future__ import annotations

from kafkawire.broker.security.acls import (
    AclBinding, AclFilter, Authorizer, Operation as Op, PatternType as PT, Permission as P, ResourceType as RT,
)

ALICE, BOB = "User:alice", "User:bob"


def acl(name, operation, permission=P.ALLOW, principal=ALICE, host="*", pattern=PT.LITERAL, kind=RT.TOPIC):
    return AclBinding(kind, name, pattern, principal, host, operation, permission)


def test_allow_deny_and_implied_operations(tmp_path):
    auth = Authorizer(tmp_path / "acls.json")
    assert auth.create([acl("orders", Op.READ), acl("orders", Op.WRITE, P.DENY, principal="User:*"),
                        acl("pay", Op.ALTER_CONFIGS, pattern=PT.PREFIXED), acl("*", Op.DESCRIBE, principal=BOB)]) \
        == [None] * 4
    assert auth.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "orders")
    assert auth.authorize(ALICE, "10.0.0.1", Op.DESCRIBE, RT.TOPIC, "orders")  # READ implies DESCRIBE
    assert not auth.authorize(ALICE, "10.0.0.1", Op.WRITE, RT.TOPIC, "orders")  # deny for everyone
    assert not auth.authorize(ALICE, "h", Op.CREATE, RT.TOPIC, "orders")
    assert auth.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, RT.TOPIC, "payments")  # prefixed, implied
    assert not auth.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "payments")  # ALTER_CONFIGS does not imply it
    assert auth.authorize(BOB, "h", Op.DESCRIBE, RT.TOPIC, "anything")  # the literal wildcard
    assert not auth.authorize(BOB, "h", Op.READ, RT.TOPIC, "anything")
    assert not auth.authorize(ALICE, "h", Op.READ, RT.GROUP, "orders")  # another resource type
    # a DENY of READ does not deny DESCRIBE; a DENY of ALL denies everything
    auth.create([acl("logs", Op.DESCRIBE), acl("logs", Op.READ, P.DENY)])
    assert auth.authorize(ALICE, "h", Op.DESCRIBE, RT.TOPIC, "logs")
    auth.create([acl("logs", Op.ALL, P.DENY, host="10.9.9.9")])
    assert not auth.authorize(ALICE, "10.9.9.9", Op.DESCRIBE, RT.TOPIC, "logs")
    assert auth.authorize(ALICE, "10.9.9.8", Op.DESCRIBE, RT.TOPIC, "logs")
    # persisted
    again = Authorizer(tmp_path / "acls.json")
    assert again.acls == auth.acls


def test_super_users_and_the_no_acl_rule():
    auth = Authorizer(None, super_users={"User:admin"})
    assert auth.authorize("User:admin", "h", Op.ALTER, RT.CLUSTER, "kafka-cluster")
    assert not auth.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    everyone = Authorizer(None, allow_if_no_acl=True)
    assert everyone.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")
    everyone.create([acl("t", Op.READ, principal=BOB)])
    assert not everyone.authorize(ALICE, "h", Op.READ, RT.TOPIC, "t")  # an ACL exists: no longer "none found"
    assert everyone.authorize(ALICE, "h", Op.READ, RT.TOPIC, "u")


def test_invalid_bindings_are_refused():
    auth = Authorizer(None)
    problems = auth.create([acl("t", Op.ANY), acl("", Op.READ), acl("t", Op.READ, principal="alice"),
                            acl("t", Op.READ, pattern=PT.MATCH), acl("c", Op.ALTER, kind=RT.CLUSTER)])
    assert all(problems) and auth.acls == []


def test_filters_for_describe_and_delete():
    auth = Authorizer(None)
    bindings = [acl("orders", Op.READ), acl("ord", Op.WRITE, pattern=PT.PREFIXED), acl("*", Op.DESCRIBE),
                acl("orders", Op.READ, principal=BOB), acl("g", Op.READ, kind=RT.GROUP)]
    auth.create(bindings)
    assert auth.describe(AclFilter()) == bindings
    assert auth.describe(AclFilter(RT.TOPIC, "orders", PT.MATCH)) == bindings[:4]
    assert auth.describe(AclFilter(RT.TOPIC, "orders", PT.LITERAL)) == [bindings[0], bindings[3]]
    assert auth.describe(AclFilter(principal=BOB)) == [bindings[3]]
    removed = auth.delete([AclFilter(RT.TOPIC, pattern_type=PT.PREFIXED), AclFilter(operation=Op.DESCRIBE)])
    assert removed == [[bindings[1]], [bindings[2]]]
    assert auth.acls == [bindings[0], bindings[3], bindings[4]]


def test_the_stored_security_state_is_readable_by_its_owner_only(tmp_path, monkeypatch):
    # acls.json and scram-credentials.json are created 0600, never wider even for a moment: the mode is
    # checked on the temporary file as it is renamed into place, and a crash's 0644 leftover is not reused
    import os
    import stat
    from kafkawire.broker.persistence import atomic_file
    from kafkawire.broker.security.scram_store import ScramStore, parse_add_scram
    renamed = {}
    real_replace = os.replace

    def replace(source, target):
        renamed[os.path.basename(target)] = stat.S_IMODE(os.stat(source).st_mode)
        real_replace(source, target)

    monkeypatch.setattr(atomic_file.os, "replace", replace)
    old = os.umask(0o022)
    try:
        for name in ("acls.json", "acls.json.tmp", "scram-credentials.json"):
            (tmp_path / name).write_text("[]" if name.startswith("acls") else "{}")
            (tmp_path / name).chmod(0o644)  # an earlier broker's files and a crash's leftover
        Authorizer(tmp_path / "acls.json").create([acl("orders", Op.READ)])
        store = ScramStore(tmp_path / "scram-credentials.json")
        _, user, credential = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
        store.put(user, credential)
        store.save()
    finally:
        os.umask(old)
    assert renamed == {"acls.json": 0o600, "scram-credentials.json": 0o600}
    for name in ("acls.json", "scram-credentials.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    assert not (tmp_path / "acls.json.tmp").exists()


def test_an_operation_on_some_resource_of_a_type(tmp_path):
    """KIP-679's idempotent producers need WRITE on some topic, made or not: authorizeByResourceType."""
    auth = Authorizer(tmp_path / "acls.json", super_users=["User:admin"])
    assert not auth.authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)
    auth.create([acl("tok-", Op.WRITE, pattern=PT.PREFIXED), acl("orders", Op.ALL, principal=BOB),
                 acl("orders", Op.WRITE, P.DENY, principal=BOB)])
    assert auth.authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)  # a prefix, no such topic yet
    assert not auth.authorize_any(ALICE, "h", Op.WRITE, RT.GROUP)
    assert not auth.authorize_any(BOB, "h", Op.WRITE, RT.TOPIC)  # its one ALLOW is denied
    assert auth.authorize_any(BOB, "h", Op.READ, RT.TOPIC)  # ALL covers READ
    auth.create([acl("tok-ab", Op.WRITE, P.DENY, pattern=PT.PREFIXED)])
    assert auth.authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)  # a narrower deny leaves the rest of the prefix
    auth.create([acl("tok", Op.WRITE, P.DENY, pattern=PT.PREFIXED)])
    assert not auth.authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)  # a deny prefix covering the allow
    auth.create([acl("*", Op.WRITE, principal=BOB), acl("*", Op.WRITE, P.DENY, principal="User:*")])
    assert not auth.authorize_any(BOB, "h", Op.WRITE, RT.TOPIC)  # a deny of every name wins
    assert auth.authorize_any("User:admin", "h", Op.WRITE, RT.TOPIC)
    assert Authorizer(None, allow_if_no_acl=True).authorize_any(ALICE, "h", Op.WRITE, RT.TOPIC)
