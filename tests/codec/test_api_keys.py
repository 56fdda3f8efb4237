"""The generated ``ApiKey`` enum: one member per API key of the specs, named as Java's ``ApiKeys``
(the spec's name in upper snake case), and the registry's entries keyed by it."""
from __future__ import annotations

import json
import re

from kafkawire.messages import ApiKey, api, apis

from support.paths import SCHEMAS


def upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def test_one_member_per_api_key_of_the_specs():
    keys = {}
    for path in SCHEMAS.glob("*Request.json"):
        spec = json.loads(re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M))
        keys[spec["apiKey"]] = spec["name"][: -len("Request")]
    assert {member.value: member.name for member in ApiKey} == {key: upper_snake(name) for key, name in keys.items()}


def test_the_registry_is_keyed_by_the_enum():
    assert ApiKey.FETCH == 1 and ApiKey.API_VERSIONS == 18
    assert api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS).name == "DescribeUserScramCredentials"
    for info in apis(include_removed=True):
        assert info.key is ApiKey(info.key) and api(info.name).key is info.key


def test_api_versions_responses_keep_the_v0_header():
    assert api(ApiKey.API_VERSIONS).response_header_version(4) == 0  # KIP-511
    assert api(ApiKey.METADATA).response_header_version(12) == 1
