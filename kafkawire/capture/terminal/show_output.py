"""``kafkawire show``'s output: a line (or a JSON object) per frame and per problem.

``Printer`` numbers the frames in the order the stream gives them (filters or not, so that ``-V N`` finds
the frame a filtered listing showed as N), decodes each (``frame_facts``) and writes what the filter keeps.
"""
from __future__ import annotations

import datetime
import json

from .frame_facts import FrameFacts, TopicNames, frame_facts
from ..model import KafkaFrame, Problem
from ..files.reading import CAPTURE_PROBLEMS, SkippedBytes
from .show_filter import Candidate, FrameFilter
from ..tables.topic_names import names_ids, topic_label

__all__ = ["Printer"]


def _time(ts_ns: int) -> str:
    """HH:MM:SS.ffffff in UTC (datetime's strftime of the same microsecond, without building a datetime)."""
    seconds, micros = divmod(ts_ns // 1000, 1_000_000)
    minutes, second = divmod(seconds, 60)
    return f"{minutes // 60 % 24:02}:{minutes % 60:02}:{second:02}.{micros:06}"


def _iso(ts_ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ts_ns // 1000 / 1e6, datetime.timezone.utc)
    return moment.isoformat()


def _error_name(code: int) -> str:
    from kafkawire.error_codes import ErrorCode
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class Printer:
    """Turns the stream's items into lines (or JSON Lines), numbering frames; ``item`` returns True
    when nothing more is wanted (``-V`` printed its frame)."""

    def __init__(self, out, keep: FrameFilter, as_json: bool, detail: int | None):
        self.out, self.keep, self.as_json, self.detail = out, keep, as_json, detail
        self.names = TopicNames()
        self.frames = 0

    def item(self, item) -> bool:
        if isinstance(item, KafkaFrame):
            return self._frame(item)
        if isinstance(item, Problem) and self.detail is None:
            self._problem(item)
        return False

    def _frame(self, frame: KafkaFrame) -> bool:
        self.frames += 1
        number = self.frames
        if self.detail is not None and number != self.detail:
            if frame.direction == "response" and names_ids(frame.api_key, frame.api_version):
                frame_facts(frame, self.names)  # topic names by id, for the frame asked for
            return False
        facts = frame_facts(frame, self.names)
        if self.detail is None:
            for problem in facts.problems:
                self._problem(problem)
            if self.keep and not self.keep.matches(self._candidate(frame, facts)):
                return False
        record = self._record(number, frame, facts)
        if self.as_json:
            if self.detail is not None:
                record["body"] = self._body(facts)
            self._write(json.dumps(record))
        else:
            self._write(self._line(record))
            if self.detail is not None:
                self._write(self._detail_text(frame, facts))
        return self.detail is not None

    def _candidate(self, frame: KafkaFrame, facts: FrameFacts) -> Candidate:
        client_id = frame.request.client_id if frame.request is not None else frame.client_id
        topics = tuple(text for topic in facts.topics for text in (topic.name, topic.topic_id) if text is not None)
        return Candidate(False, None, frame.api_key, client_id, (frame.client,), topics, tuple(facts.error_codes),
                         facts.decoded.error is not None, frame.correlation_id, frame.direction)

    def _record(self, number: int, frame: KafkaFrame, facts: FrameFacts) -> dict:
        response = frame.direction == "response"
        request = frame.request
        return {
            "frame": number, "ts": _iso(frame.end_ts_ns) if self.as_json else None, "ts_ns": frame.end_ts_ns,
            "connection": frame.connection, "client": frame.client, "broker": frame.broker,
            "direction": frame.direction, "api_key": frame.api_key, "api_name": facts.decoded.api_name,
            "api_version": frame.api_version, "correlation_id": frame.correlation_id,
            "client_id": request.client_id if response and request is not None else frame.client_id,
            "size": frame.size, "stream_offset": frame.offset,
            "topics": [{"topic": t.name, "topic_id": t.topic_id, "partitions": t.partitions} for t in facts.topics],
            "records": facts.records,
            "latency_ms": (frame.end_ts_ns - request.end_ts_ns) / 1e6 if response and request is not None else None,
            "error_code": facts.error_code, "error_codes": facts.error_codes,
            "decode_error": facts.decoded.error,
        }

    def _line(self, r: dict) -> str:
        response = r["direction"] == "response"
        if r["api_key"] is None:  # a response that answers no request the capture shows
            api_name, version = "unmatched", "response"
        else:
            api_name = r["api_name"] or f"api{r['api_key']}"
            version = f"v{r['api_version']}"
        parts = [f"{r['frame']:>6}", _time(r["ts_ns"]), f"{r['client']} {'<' if response else '>'} {r['broker']}",
                 f"{api_name} {version}", "resp" if response else "req ", f"corr={r['correlation_id']}"]
        if not response and r["client_id"]:
            parts.append(f"id={r['client_id']}")
        topics = _topics_text_of(r)
        if topics:
            parts.append(topics)
        parts.append(f"{r['size']:,} B")
        if r["records"]:
            parts.append(f"{r['records']:,} records")
        if response:
            if r["latency_ms"] is not None:
                parts.append(f"{r['latency_ms']:.1f} ms")
            if r["decode_error"] is None and r["api_name"] is not None:
                parts.append("errors=" + ",".join(_error_name(c) for c in r["error_codes"]) if r["error_codes"]
                             else "ok")
        if r["decode_error"] is not None:
            parts.append(f"UNDECODED: {r['decode_error']}")
        return "  ".join(parts)

    def _body(self, facts: FrameFacts):
        from ..tables.bodies import converter
        body, version = facts.decoded.body, facts.decoded.version
        if body is None or version is None:  # (a body comes with its version)
            return None
        return json.loads(converter(body.NAME, version).json(body))

    def _detail_text(self, frame: KafkaFrame, facts: FrameFacts) -> str:
        decoded = facts.decoded
        lines = [f"  connection {frame.connection}, stream offset {frame.offset}, header v{decoded.header_version}, "
                 f"body read at v{decoded.version}"]
        body = self._body(facts)
        if body is not None and decoded.body is not None:
            lines.append(f"  {decoded.body.NAME}:")
            lines.extend("    " + line for line in json.dumps(body, indent=2, ensure_ascii=False).splitlines())
        return "\n".join(lines)

    def _problem(self, problem: Problem) -> None:
        if self.keep and not self.keep.matches(Candidate(
                True, problem.kind, problem.api_key, None, tuple(problem.connection.split("-")), (), (), False,
                problem.correlation_id, problem.direction)):
            return
        if self.as_json:
            self._write(json.dumps({
                "problem": problem.kind, "ts": _iso(problem.ts_ns) if problem.ts_ns else None, "ts_ns": problem.ts_ns,
                "connection": problem.connection, "direction": problem.direction, "reason": problem.reason,
                "stream_offset": problem.offset, "length": problem.length, "api_key": problem.api_key,
                "api_version": problem.api_version, "correlation_id": problem.correlation_id,
                "file": None, "file_offset": None}))
            return
        where = problem.connection or "capture"
        self._write(f"{'!':>6}  {_time(problem.ts_ns) if problem.ts_ns else '':15}  {where}  "
                    f"{problem.kind}: {problem.reason}")

    def skipped(self, skip: SkippedBytes) -> None:
        """A run of capture bytes the reader gave up on (a problem of no connection, in the file)."""
        kind = CAPTURE_PROBLEMS[skip.kind]
        if self.keep and not self.keep.matches(Candidate(True, kind, None, None, (), (), (), False, None, None)):
            return
        if self.as_json:
            self._write(json.dumps({
                "problem": kind, "ts": None, "ts_ns": None, "connection": None, "direction": None,
                "reason": skip.reason, "stream_offset": None, "length": skip.length, "api_key": None,
                "api_version": None, "correlation_id": None, "file": skip.path, "file_offset": skip.offset}))
        else:
            self._write(f"{'!':>6}  {'':15}  {skip.path}  {kind}: {skip.reason}")

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")


def _topics_text_of(record: dict) -> str:
    parts = []
    for topic in record["topics"]:
        name = topic_label(topic["topic"], topic["topic_id"])
        partitions = topic["partitions"]
        parts.append(f"{name}[{','.join(str(p) for p in partitions)}]" if partitions else str(name))
    if len(parts) > 4:
        parts = parts[:4] + [f"+{len(parts) - 4} topics"]
    return " ".join(parts)
