"""The table layout of issue 25: a narrow ``frames`` table (the body as JSON) and a table of typed bodies
per message type (``bodies/<message>``), on captures decoded in process (stage 2's code, without Spark;
the Spark job's tables are compared with these in tests/capture_spark).

- ``frames`` has no struct column: a few dozen Parquet leaves, a small footer; pandas reads it as flat
  rows (scalars, the error codes' list, the body's JSON text).
- Each bodies table holds the typed body of exactly the frames of its message, and says what the
  frame's JSON says (``capture_bodies``), for every message type in the test captures.
- Reading ``bodies/FetchResponse`` opens only that table's files, whose footers describe that message
  alone.
"""
from __future__ import annotations

import json
from pathlib import Path

from support import capture_transactions
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from support.capture_bodies import assert_bodies_tables_match_frames
from support.capture_in_process import decode_in_process
from support.capture_synthetic import build_synthetic

from kafkawire.capture.tables.bodies import arrow_type
from kafkawire.capture.tables.table_schemas import MESSAGES, TABLES, body_schema, schema_of
from kafkawire.capture.tables.table_sets import BODIES, TABLE_ORDER, table_names
from kafkawire.capture_spark.part_files import TableFiles, parquet_leaves


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bodies-synthetic")
    return decode_in_process(build_synthetic(folder).path, folder / "tables")


@pytest.fixture(scope="module")
def transactions(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bodies-transactions")
    return decode_in_process(capture_transactions.build(folder / "transactions.pcapng"), folder / "tables")


def leaves(schema: pa.Schema) -> int:
    return sum(1 for _ in parquet_leaves(schema))


def test_frames_has_no_typed_body(synthetic):
    schema = TABLES["frames"]
    assert schema.field("body").type == pa.string()
    assert [f.name for f in schema if pa.types.is_struct(f.type) or pa.types.is_map(f.type)] == []
    assert leaves(schema) == len(schema) < 30
    (part,) = (synthetic / "frames").glob("part-*.parquet")
    metadata = pq.ParquetFile(part).metadata
    assert metadata.num_columns == len(schema)
    assert metadata.serialized_size < 8192  # the footer: a few KB, where ~2,300 leaves took 700 KB


def test_pandas_reads_frames_as_flat_rows(synthetic):
    frame = pq.read_table(synthetic / "frames").to_pandas()
    assert list(frame.columns) == TABLES["frames"].names and len(frame) > 50
    for column in frame.columns:
        values = [value for value in frame[column] if value is not None]
        assert not any(isinstance(value, dict) for value in values), column
    bodies = [json.loads(text) for text in frame["body"] if text is not None]
    assert len(bodies) > 50 and all(isinstance(body, dict) for body in bodies)


def test_a_bodies_table_per_message_present(synthetic):
    found = table_names(str(synthetic))
    assert found[:len(TABLE_ORDER)] == list(TABLE_ORDER)
    bodies = [name.split("/", 1)[1] for name in found if name.startswith(f"{BODIES}/")]
    assert {"ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse", "MetadataRequest"} <= set(bodies)
    assert len(bodies) < 20  # the messages the capture has, not every message there is
    for message in bodies:
        (part,) = (synthetic / BODIES / message).glob("part-*.parquet")
        schema = pq.ParquetFile(part).schema_arrow
        assert schema == body_schema(message) and schema.field("body").type == arrow_type(message)


@pytest.mark.parametrize("capture", ["synthetic", "transactions"])
def test_each_bodies_table_holds_the_typed_bodies_of_its_frames(capture, request):
    seen = assert_bodies_tables_match_frames(request.getfixturevalue(capture))
    if capture == "transactions":
        assert {"InitProducerIdResponse", "AddPartitionsToTxnRequest", "EndTxnRequest", "TxnOffsetCommitRequest",
                "AddOffsetsToTxnResponse"} <= seen


class _Recording(pafs.FileSystemHandler):
    """The local file system, remembering which files were opened."""

    def __init__(self):
        self.local = pafs.LocalFileSystem()
        self.opened: list[str] = []

    def get_type_name(self):
        return "recording"

    def equals(self, other):
        return self is other

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def open_input_file(self, path):
        self.opened.append(path)
        return self.local.open_input_file(path)

    def open_input_stream(self, path):
        self.opened.append(path)
        return self.local.open_input_stream(path)

    def normalize_path(self, path):
        return path

    def create_dir(self, path, recursive):  # pragma: no cover - reads only
        raise NotImplementedError

    delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = move = copy_file = create_dir
    open_output_stream = open_append_stream = create_dir


def test_reading_fetch_responses_touches_only_their_table(synthetic):
    handler = _Recording()
    table = pq.read_table(str(synthetic / BODIES / "FetchResponse"), filesystem=pafs.PyFileSystem(handler),
                          columns=["connection", "body"])
    assert table.num_rows == len([f for f in pq.read_table(synthetic / "frames").to_pylist()
                                  if f["api_name"] == "Fetch" and f["direction"] == "response" and f["body"]])
    assert handler.opened and all(path.startswith(str(synthetic / BODIES / "FetchResponse") + "/")
                                  for path in handler.opened)
    (part,) = (synthetic / BODIES / "FetchResponse").glob("part-*.parquet")
    assert pq.ParquetFile(part).metadata.num_columns == leaves(body_schema("FetchResponse"))
    assert leaves(body_schema("FetchResponse")) < 60


def test_part_files_read_back_as_their_schemas(tmp_path):
    """The job's part files carry no copy of the Arrow schema in their footers; what Parquet's own
    types say reads back as the same schema, for every table and every message's bodies table."""
    names = [*TABLES, *(f"{BODIES}/{message}" for message in sorted(MESSAGES))]
    with TableFiles(str(tmp_path), 0, 0) as files:
        for name in names:
            files.write(name, pa.RecordBatch.from_pylist([{}], schema=schema_of(name)))  # a row of nulls
    for name in names:
        (part,) = (tmp_path / name).glob("part-*.parquet")
        assert b"ARROW:schema" not in (pq.ParquetFile(part).metadata.metadata or {}), name
        assert pq.read_schema(part) == schema_of(name), name
