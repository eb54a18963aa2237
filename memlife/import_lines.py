"""One JSONL line -> its store row, or the RecordError naming line, id and field; and a
block of whole lines through that, line by line. Shared by the worker loop (import_parse)
and the columnar path (import_columnar), which sends here every row it does not plainly
accept.

Each line goes through the same checks in the same order as ``importer.parse_line``:
UTF-8, nesting depth, the fast path (``fast_record.fast_row``), else the checked path
(``model.parse_record_line``, which names the error, then :func:`check_declared_sha256`),
then the content size bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memlife.errors import RecordError
from memlife.fast_record import fast_row
from memlife.model import MemoryRecord, content_sha256, parse_record_line
from memlife.stores.sqlite import record_to_row

MAX_DEPTH = 16  # a record is 3 deep; 16 leaves room and stops a 100,000-deep line cold
# A string, its closing quote optional: a line with an unterminated string (invalid JSON,
# refused by the parser) is then read in one pass, where a required quote made every quote
# after it start a scan to the end of the line (quadratic: hours for a 1 MiB line of \").
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_CONTENT = 5  # the content column of a store row
_CREATED_AT = 9


MAX_LINE_BYTES = 1 << 20


def line_bound(content_max: int) -> int:
    """The default line bound: 1 MiB, or what a record at the policy's content limit takes
    once exported (JSON writes a control character as six bytes), so a store's own export
    imports again."""
    return max(MAX_LINE_BYTES, 6 * content_max + (64 << 10))


def json_depth(raw: bytes) -> int:
    """Deepest nesting of objects/arrays in a JSON text, brackets inside strings ignored."""
    import numpy as np  # only for lines with many brackets: a worker rarely needs it

    bare = _STRING.sub(b'""', raw)
    if not bare:
        return 0
    steps = np.zeros(256, np.int64)
    steps[[ord("{"), ord("[")]] = 1
    steps[[ord("}"), ord("]")]] = -1
    return int(np.cumsum(steps[np.frombuffer(bare, np.uint8)]).max(initial=0))


def checked_text(raw: bytes, n: int, max_depth: int = MAX_DEPTH) -> str:
    """The line as text, once it is UTF-8 and not nested too deeply; else RecordError."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(None, "<encoding>", f"not UTF-8 at byte {exc.start}", n) from None
    # depth <= number of opening brackets (those inside strings only overcount): a record
    # line has 3, so the regex-and-numpy depth scan runs only for unusual lines
    if raw.count(b"{") + raw.count(b"[") > max_depth and json_depth(raw) > max_depth:
        raise RecordError(None, "<json>", f"nested deeper than {max_depth} levels", n)
    return text


def check_declared_sha256(record: MemoryRecord, n: int | None) -> None:
    """A declared ``provenance.content_sha256`` must be the content's: consolidation memos,
    derived digests and tombstone matching trust it, so a line declaring another content's
    hash would alias that content. Refused at import (RecordError), never stored."""
    declared = record.provenance.content_sha256
    if declared:  # None or "": not declared, the store computes it
        actual = content_sha256(record.content)
        if declared != actual:
            raise RecordError(
                record.id,
                "provenance.content_sha256",
                f"does not match the content (its sha256 is {actual})",
                n,
            )


def line_row(raw: bytes, n: int, *, content_max: int) -> tuple[Any, ...]:
    """One line -> its store row, or RecordError naming line, id and field."""
    # A line the fast path takes is UTF-8 (its JSON parser refuses anything else) and 3
    # deep, so checking those first, as importer.parse_line does, could not refuse it
    row = fast_row(raw)  # None: not plainly valid, the checked path below decides
    if row is None:
        text = checked_text(raw, n)
        try:
            record = parse_record_line(text, n)
        except RecursionError:  # belt and braces: the depth check should have caught it
            raise RecordError(None, "<json>", "nested too deeply", n) from None
        check_declared_sha256(record, n)
        row = record_to_row(record)
    content: str = row[_CONTENT]
    if len(content) * 4 > content_max:  # a character is at most 4 bytes of UTF-8
        size = len(content.encode("utf-8"))
        if size > content_max:
            raise RecordError(
                row[0], "content", f"{size} bytes, over the limit of {content_max}", n
            )
    return row


@dataclass(frozen=True)
class Chunk:
    """Whole lines of the file, the first one numbered ``first_line``."""

    first_line: int
    data: bytes
    content_max: int
    max_line_bytes: int
    future_after: datetime  # created_at past this is reported (FUTURE_CREATED_AT)


@dataclass
class Parsed:
    """A chunk's valid lines as (line, row, created in the future) and its invalid lines as
    RecordError arguments (record id, field, reason, line), each in file order."""

    rows: list[tuple[int, tuple[Any, ...], bool]] = field(default_factory=list)
    errors: list[tuple[str | None, str, str, int | None]] = field(default_factory=list)


def parse_lines(chunk: Chunk) -> Parsed:
    """The rows and errors of a chunk's lines, line by line (:func:`line_row`)."""
    out = Parsed()
    pieces = chunk.data.split(b"\n")
    last = len(pieces) - 1
    future_after = chunk.future_after
    for i, piece in enumerate(pieces):
        n = chunk.first_line + i
        if i == last:
            if not piece:
                break
            raw = piece  # the file's last line, without a newline
        else:
            raw = piece + b"\n"  # as readline gives it: error columns count the same
        if len(piece) > chunk.max_line_bytes:
            out.errors.append((None, "<line>", f"longer than {chunk.max_line_bytes} bytes", n))
            continue
        if not raw.strip():
            continue
        try:
            row = line_row(raw, n, content_max=chunk.content_max)
        except RecordError as exc:
            out.errors.append((exc.record_id, exc.field, exc.reason, exc.line))
            continue
        out.rows.append((n, row, datetime.fromisoformat(row[_CREATED_AT]) > future_after))
    return out
