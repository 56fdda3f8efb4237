"""The frames table's JSON bodies against the typed bodies tables (``bodies/<message>``), for any table
set: every frame with a body has exactly one row in its own message's table, found by the frame's key,
and that row's typed body says what the JSON says, field by field, read with the message's schema
(``kafkawire.messages.message_schemas``): bytes are base64 in the JSON, records ``{"records_bytes": N}``,
fields the version does not carry absent from the JSON and null in the typed body."""
from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import pyarrow.parquet as pq

from kafkawire.capture.tables.table_schemas import FRAME_KEY, schema_of
from kafkawire.capture.tables.table_sets import BODIES, table_names
from kafkawire.messages import api
from kafkawire.messages.message_schemas import SCHEMAS


def message_of(frame: dict) -> str:
    info = api(frame["api_key"])
    return info.request if frame["direction"] == "request" else info.response


def assert_bodies_tables_match_frames(out) -> set[str]:
    """Checks the bodies tables of the table set ``out`` against its frames; returns the messages seen."""
    out = Path(out)
    frames = pq.read_table(out / "frames").to_pylist()
    with_body = {tuple(frame[key] for key in FRAME_KEY): frame for frame in frames if frame["body"] is not None}
    tables = [name for name in table_names(str(out)) if name.startswith(f"{BODIES}/")]
    assert {f"{BODIES}/{message_of(frame)}" for frame in with_body.values()} == set(tables)
    seen = set()
    for name in tables:
        table = pq.read_table(out / name)
        assert table.schema == schema_of(name), name
        message = name.split("/", 1)[1]
        for row in table.to_pylist():
            key = tuple(row[k] for k in FRAME_KEY)
            assert key not in seen, key
            seen.add(key)
            frame = with_body[key]
            assert message_of(frame) == message
            assert (row["correlation_id"], row["api_version"]) == (frame["correlation_id"], frame["api_version"])
            assert_json_is_typed(json.loads(frame["body"]), row["body"], SCHEMAS[message], message)
    assert seen == set(with_body), "frames with a body but no typed row"
    return {name.split("/", 1)[1] for name in tables}


def assert_json_is_typed(text: dict, typed: dict, schema: dict, path: str) -> None:
    """A struct: its JSON object against its typed value (a dict from pyarrow)."""
    assert isinstance(text, dict) and isinstance(typed, dict), path
    assert set(text) <= {f["name"] for f in schema["fields"]}, path
    for field in schema["fields"]:
        name, where = field["name"], f"{path}.{field['name']}"
        if name == "unknown_tags":  # in the JSON only when there are some
            wanted = {int(tag): base64.b64decode(raw) for tag, raw in text.get(name, {}).items()}
            assert dict(typed[name] or []) == wanted, where
        elif name not in text:  # a field the version does not carry
            assert typed[name] is None, where
        else:
            _field(field["type"], field if "fields" in field else None, text[name], typed[name], where)


def _field(kafka_type: str, struct: dict | None, text, typed, path: str) -> None:
    if text is None:
        assert typed is None, path
        return
    if kafka_type.startswith("[]"):
        assert isinstance(text, list) and len(text) == len(typed), path
        for index, (one, other) in enumerate(zip(text, typed)):
            _field(kafka_type[2:], struct, one, other, f"{path}[{index}]")
    elif struct is not None:
        assert_json_is_typed(text, typed, struct, path)
    elif kafka_type == "records":
        assert text == {"records_bytes": len(typed)}, path
    elif kafka_type == "bytes":
        assert base64.b64decode(text) == typed, path
    elif kafka_type == "float64" and isinstance(text, str):  # NaN and the infinities, as text
        assert (math.isnan(typed) and text == "nan") or str(typed) == text, path
    else:
        assert text == typed and type(text) is type(typed), path
