"""schemas/ agrees with upstream Kafka 4.3's message specs (../shared/kafka-message-specs-4.3) on every
wire fact, with no exception; the KIP-1178 overlay (schemas/kip-1178/) is upstream's Fetch plus exactly
KIP-1178 on v19.

The overlay's FetchRequest and FetchResponse have validVersions "4-19" where upstream has "4-18", and
FetchRequest's FetchPartition ends with the extra field
``{"name": "RemotePartitionMaxBytes", "type": "int32", "versions": "19+", "ignorable": true}``.
Values are normalised as ``codegen/parse.py`` reads them (scalar defaults and tags as Jackson coerces
them, version ranges parsed, absent keys as their defaults), so only a real difference shows.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from codegen.import_specs import import_specs
from codegen.model import Versions
from codegen.parse import strip_comments

from support.paths import REPO as ROOT
from support.paths import UPSTREAM_SPECS
SCHEMAS = ROOT / "schemas"
OVERLAY = SCHEMAS / "kip-1178"
UPSTREAM = UPSTREAM_SPECS

needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(), reason=f"no upstream specs at {UPSTREAM}")

TOP_FACTS = ("apiKey", "type", "name", "validVersions", "flexibleVersions", "deprecatedVersions", "listeners",
             "latestVersionUnstable")
FIELD_FACTS = ("name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default", "ignorable",
               "mapKey", "entityType", "zeroCopy", "flexibleVersions")

EXTRA_FIELD = {"name": "RemotePartitionMaxBytes", "type": "int32", "versions": "19+", "ignorable": True}


def load(path: Path) -> dict:
    return json.loads(strip_comments(path.read_text(encoding="utf-8")))


def _versions(value, default="none"):
    if value is None or (isinstance(value, str) and not value.strip()):
        value = default
    if value is None:
        return None
    return str(Versions.parse(value))


def _default(value):
    # Jackson coerces a JSON scalar to the String the generator expects; an absent default is "".
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _tag(value):
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def top_facts(raw: dict) -> dict:
    listeners = raw.get("listeners", [])
    if isinstance(listeners, str):
        listeners = [listeners]
    return {
        "apiKey": raw.get("apiKey"),
        "type": raw.get("type"),
        "name": raw.get("name"),
        "validVersions": _versions(raw.get("validVersions"), None),
        "flexibleVersions": _versions(raw.get("flexibleVersions"), None),
        "deprecatedVersions": _versions(raw.get("deprecatedVersions")),
        "listeners": tuple(sorted(listeners)),
        "latestVersionUnstable": bool(raw.get("latestVersionUnstable", False)),
    }


def field_facts(raw: dict) -> dict:
    tagged = _versions(raw.get("taggedVersions"))
    versions = raw.get("versions")
    return {
        "name": raw.get("name"),
        "type": raw.get("type", "").strip(),
        "versions": _versions(versions, None) if versions is not None or tagged == "none" else tagged,
        "nullableVersions": _versions(raw.get("nullableVersions")),
        "taggedVersions": tagged,
        "tag": _tag(raw.get("tag")),
        "default": _default(raw.get("default")),
        "ignorable": bool(raw.get("ignorable", False)),
        "mapKey": bool(raw.get("mapKey", False)),
        "entityType": raw.get("entityType", "unknown"),
        "zeroCopy": bool(raw.get("zeroCopy", False)),
        "flexibleVersions": (_versions(raw.get("flexibleVersions"))
                             if raw.get("flexibleVersions") not in (None, "") else None),
    }


def diff_fields(where: str, ours: list, theirs: list, out: list) -> None:
    """Append differences between two ordered field lists (wire order matters) to ``out``."""
    ours_by_name = {f.get("name"): f for f in ours}
    theirs_by_name = {f.get("name"): f for f in theirs}
    for name in ours_by_name.keys() - theirs_by_name.keys():
        out.append(("extra field", f"{where}.{name}", json.dumps(ours_by_name[name], sort_keys=True)))
    for name in theirs_by_name.keys() - ours_by_name.keys():
        out.append(("missing field", f"{where}.{name}", json.dumps(theirs_by_name[name], sort_keys=True)))
    common_ours = [f.get("name") for f in ours if f.get("name") in theirs_by_name]
    common_theirs = [f.get("name") for f in theirs if f.get("name") in ours_by_name]
    if common_ours != common_theirs:
        out.append(("field order", where, f"{common_ours} != {common_theirs}"))
    for name in common_ours:
        mine, upstream = ours_by_name[name], theirs_by_name[name]
        a, b = field_facts(mine), field_facts(upstream)
        for key in FIELD_FACTS:
            if a[key] != b[key]:
                out.append((key, f"{where}.{name}", f"ours {a[key]!r}, upstream {b[key]!r}"))
        if ("fields" in mine) != ("fields" in upstream):
            out.append(("fields present", f"{where}.{name}", f"ours {'fields' in mine}, upstream {'fields' in upstream}"))
        diff_fields(f"{where}.{name}", mine.get("fields") or [], upstream.get("fields") or [], out)


def diff_spec(file: str, ours: dict, theirs: dict) -> list:
    out: list = []
    a, b = top_facts(ours), top_facts(theirs)
    for key in TOP_FACTS:
        if a[key] != b[key]:
            out.append((key, file, f"ours {a[key]!r}, upstream {b[key]!r}"))
    diff_fields(ours.get("name", file), ours.get("fields", []), theirs.get("fields", []), out)
    ours_common = {s["name"]: s for s in ours.get("commonStructs", [])}
    theirs_common = {s["name"]: s for s in theirs.get("commonStructs", [])}
    if ours_common.keys() != theirs_common.keys():
        out.append(("commonStructs", file, f"ours {sorted(ours_common)}, upstream {sorted(theirs_common)}"))
    for name in ours_common.keys() & theirs_common.keys():
        x, y = ours_common[name], theirs_common[name]
        if _versions(x.get("versions"), None) != _versions(y.get("versions"), None):
            out.append(("versions", f"{file}:{name}", f"ours {x.get('versions')!r}, upstream {y.get('versions')!r}"))
        diff_fields(f"{ours.get('name')}:{name}", x.get("fields", []), y.get("fields", []), out)
    return out


def _spec_files(directory: Path) -> set[str]:
    return {p.name for p in directory.glob("*.json")}


@needs_upstream
def test_same_set_of_spec_files():
    ours, theirs = _spec_files(SCHEMAS), _spec_files(UPSTREAM)
    assert sorted(ours - theirs) == []
    assert sorted(theirs - ours) == []
    assert len(ours) == 198


@needs_upstream
def test_every_wire_fact_agrees():
    differences = []
    for name in sorted(_spec_files(SCHEMAS) & _spec_files(UPSTREAM)):
        differences += diff_spec(name, load(SCHEMAS / name), load(UPSTREAM / name))
    assert differences == []


@needs_upstream
def test_overlay_is_upstreams_fetch_plus_kip_1178_on_v19():
    assert _spec_files(OVERLAY) == {"FetchRequest.json", "FetchResponse.json"}
    differences = []
    for name in sorted(_spec_files(OVERLAY)):
        differences += diff_spec(name, load(OVERLAY / name), load(UPSTREAM / name))
    assert sorted(differences) == sorted([
        ("validVersions", "FetchRequest.json", "ours '4-19', upstream '4-18'"),
        ("extra field", "FetchRequest.Topics.Partitions.RemotePartitionMaxBytes", json.dumps(EXTRA_FIELD, sort_keys=True)),
        ("validVersions", "FetchResponse.json", "ours '4-19', upstream '4-18'"),
    ])
    # v19 is the version after upstream's newest: v4-18 of the overlay are upstream's, byte for byte
    assert load(UPSTREAM / "FetchRequest.json")["validVersions"] == "4-18"


@needs_upstream
def test_import_specs_reproduces_schemas(tmp_path):
    """schemas/ is what ``python -m codegen.import_specs`` makes of the reference, file for file."""
    out = tmp_path / "schemas"
    (out / "Stale.json").parent.mkdir()
    (out / "Stale.json").write_text("{}")
    changed, removed = import_specs(UPSTREAM, out)
    assert removed == ["Stale.json"] and len(changed) == 198
    for path in SCHEMAS.glob("*.json"):
        assert (out / path.name).read_text() == path.read_text(), path.name
    assert import_specs(UPSTREAM, out) == ([], [])


def test_extra_fetch_field_is_exactly_as_specified():
    ours = load(OVERLAY / "FetchRequest.json")
    topics = next(f for f in ours["fields"] if f["name"] == "Topics")
    assert topics["type"] == "[]FetchTopic"
    partitions = next(f for f in topics["fields"] if f["name"] == "Partitions")
    assert partitions["type"] == "[]FetchPartition"
    extra = [f for f in partitions["fields"] if f["name"] == "RemotePartitionMaxBytes"]
    assert extra == [EXTRA_FIELD]
    assert partitions["fields"][-1] == EXTRA_FIELD  # appended at the end, after upstream's fields


@needs_upstream
@pytest.mark.parametrize("name", sorted(_spec_files(UPSTREAM)) if UPSTREAM.is_dir() else [])
def test_keys_are_a_subset_of_upstreams(name):
    """No key in ours that upstream's file lacks (other than "about", which ours drops)."""
    ours, theirs = load(SCHEMAS / name), load(UPSTREAM / name)
    assert set(ours) <= set(theirs)

    def walk(a_fields, b_fields, where):
        b_by_name = {f["name"]: f for f in b_fields}
        for f in a_fields:
            if f["name"] not in b_by_name:
                continue
            g = b_by_name[f["name"]]
            assert set(f) <= set(g), f"{where}.{f['name']}: keys {sorted(set(f) - set(g))} not upstream's"
            walk(f.get("fields", []), g.get("fields", []), f"{where}.{f['name']}")

    walk(ours.get("fields", []), theirs.get("fields", []), ours["name"])


def _walk_keys(node, path="$"):
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key
            yield from _walk_keys(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk_keys(value, f"{path}[{index}]")


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.json")) + sorted(OVERLAY.glob("*.json")),
                         ids=lambda p: str(p.relative_to(SCHEMAS)))
def test_schemas_have_no_about_and_no_comments(path):
    text = path.read_text(encoding="utf-8")
    assert strip_comments(text) == text, f"{path.name} has comments"
    raw = json.loads(text)  # plain JSON: comments would not parse
    abouts = [where for where, key in _walk_keys(raw) if key == "about"]
    assert abouts == [], f"{path.name}: 'about' at {abouts[:5]}"


def test_normalisation_matches_parse():
    """The normalisation above reads scalars the way codegen/parse.py does."""
    assert field_facts({"name": "A", "type": "int32", "versions": "0+", "default": -1})["default"] == "-1"
    assert field_facts({"name": "A", "type": "bool", "versions": "0+", "default": True})["default"] == "true"
    assert field_facts({"name": "A", "type": "int32", "taggedVersions": "3+", "tag": "0"})["tag"] == 0
    assert field_facts({"name": "A", "type": "int32", "taggedVersions": "3+", "tag": 0})["versions"] == "3+"
    assert field_facts({"name": "A", "type": "int32", "versions": "1-32767"})["versions"] == "1+"
    assert top_facts({"listeners": "broker"})["listeners"] == ("broker",)


def test_diff_finds_differences():
    """The comparison is not vacuous: each kind of change to a spec shows up."""
    base = {"apiKey": 1, "type": "response", "name": "XResponse", "validVersions": "0-3", "flexibleVersions": "2+",
            "fields": [{"name": "A", "type": "int32", "versions": "0+"},
                       {"name": "B", "type": "[]Inner", "versions": "1+", "fields": [
                           {"name": "C", "type": "string", "versions": "1+", "nullableVersions": "2+"},
                           {"name": "D", "type": "int16", "versions": "2+", "taggedVersions": "2+", "tag": 0}]}],
            "commonStructs": [{"name": "Common", "versions": "0+", "fields": [
                {"name": "E", "type": "int8", "versions": "0+", "default": "1"}]}]}
    assert diff_spec("X.json", base, json.loads(json.dumps(base))) == []

    def changed(edit):
        copy = json.loads(json.dumps(base))
        edit(copy)
        return [kind for kind, _, _ in diff_spec("X.json", copy, base)]

    assert changed(lambda s: s.update(flexibleVersions="3+")) == ["flexibleVersions"]
    assert changed(lambda s: s.update(deprecatedVersions="0")) == ["deprecatedVersions"]
    assert changed(lambda s: s["fields"][1]["fields"][0].update(nullableVersions="1+")) == ["nullableVersions"]
    assert changed(lambda s: s["fields"][1]["fields"][1].update(tag=1)) == ["tag"]
    assert changed(lambda s: s["fields"][0].update(default="7")) == ["default"]
    assert changed(lambda s: s["fields"][0].update(ignorable=True)) == ["ignorable"]
    assert changed(lambda s: s["fields"].reverse()) == ["field order"]
    assert changed(lambda s: s["fields"][1]["fields"].pop()) == ["missing field"]
    assert changed(lambda s: s["commonStructs"][0]["fields"][0].update(type="int16")) == ["type"]
    assert changed(lambda s: s["commonStructs"][0].update(versions="1+")) == ["versions"]
    # Scalars normalised as parse.py reads them: no difference.
    assert changed(lambda s: s["commonStructs"][0]["fields"][0].update(default=1)) == []
    assert changed(lambda s: s["fields"][1]["fields"][1].update(tag="0")) == []
