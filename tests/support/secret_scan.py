"""Where secrets turn up in what the capture decoder writes: every value of every column (bytes as they
are, text as UTF-8, and inside JSON text every string that is base64, as bytes are written there), and
every byte of every file (a Parquet page may be compressed: the values are what counts, the bytes are
checked as well)."""
from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _texts(value, found: list) -> None:
    """The bytes ``value`` holds, its nested values', and for text the base64 strings of its JSON."""
    if isinstance(value, (bytes, bytearray)):
        found.append(bytes(value))
    elif isinstance(value, str):
        found.append(value.encode())
        if value[:1] in "{[":
            try:
                _json_strings(json.loads(value), found)
            except ValueError:
                pass
    elif isinstance(value, dict):
        for item in value.values():
            _texts(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _texts(item, found)


def _json_strings(value, found: list) -> None:
    if isinstance(value, str):
        try:
            found.append(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            pass
    elif isinstance(value, dict):
        for item in value.values():
            _json_strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _json_strings(item, found)


def table_leaks(table: pa.Table, secrets: list[bytes], where: str = "") -> list[str]:
    """``where.column: secret`` for each secret found in a value of a column of ``table``."""
    leaks = []
    for name in table.column_names:
        found: list = []
        _texts(table.column(name).to_pylist(), found)
        for secret in secrets:
            if any(secret in value for value in found):
                leaks.append(f"{where}{name}: {secret!r}")
    return leaks


def folder_leaks(folder: Path, secrets: list[bytes]) -> list[str]:
    """Secrets in any file under ``folder`` (its bytes) or in any value of its Parquet files."""
    leaks = []
    files = [path for path in sorted(Path(folder).rglob("*")) if path.is_file()]
    assert files, f"nothing under {folder}"
    for path in files:
        data = path.read_bytes()
        leaks += [f"{path}: {secret!r}" for secret in secrets if secret in data]
        if path.suffix == ".parquet":
            leaks += table_leaks(pq.read_table(path), secrets, f"{path.relative_to(folder)}: ")
    return leaks


def text_leaks(text: str, secrets: list[bytes]) -> list[str]:
    return [repr(secret) for secret in secrets if secret.decode("latin-1") in text or secret in text.encode()]
