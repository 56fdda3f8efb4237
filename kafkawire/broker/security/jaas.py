"""JAAS entries on the broker: the parser is the shared one (``kafkawire.sasl.jaas``); a PlainLoginModule's
``user_<name>="<password>"`` options are the users Kafka's PlainServerCallbackHandler checks."""
from __future__ import annotations

from ...sasl.jaas import JaasEntry, parse_jaas

__all__ = ["JaasEntry", "parse_jaas", "plain_users"]


def plain_users(entry: JaasEntry) -> dict[str, str]:
    return {name[len("user_"):]: password for name, password in entry.options.items() if name.startswith("user_")}
