"""The import's per-line work, also run in worker processes: JSONL bytes -> store rows.

``import_file`` (memlife/importer.py) reads a large file in blocks of whole lines and hands
each block to :func:`parse_chunk` in a worker process; the worker splits it into lines,
validates each line and builds its store row (``stores.sqlite.record_to_row``'s columns),
and sends rows and errors back. The main process keeps everything that depends on order
or on the store: repeated ids, batches, the insert and the report.

Workers are child Python processes running :func:`serve`, reading pickled chunks on
stdin and writing results on stdout (:class:`Workers`): never a fork of the importing
process (which has threads), and unlike multiprocessing's spawn they do not re-run the
caller's ``__main__``, so a script without a main guard can import in parallel too. This
module imports no numpy, policy or store connection, so a worker starts small.

Each line goes through the same checks in the same order as ``importer.parse_line``:
UTF-8, nesting depth, the fast path (``fast_record.fast_row``), else the checked path
(``model.parse_record_line``, which names the error, then :func:`check_declared_sha256`),
then the content size bound.
"""

from __future__ import annotations

import os
import pickle
import queue
import re
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

from memlife import faults
from memlife.errors import MemlifeError, RecordError
from memlife.fast_record import fast_row
from memlife.model import MemoryRecord, content_sha256, parse_record_line
from memlife.stores.sqlite import record_to_row

MAX_DEPTH = 16  # a record is 3 deep; 16 leaves room and stops a 100,000-deep line cold
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_CONTENT = 5  # the content column of a store row
_CREATED_AT = 9


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


def parse_chunk(chunk: Chunk) -> Parsed:
    """In a worker: the rows and errors of a chunk's lines (the serial loop's checks),
    through the columnar path when the block allows (``import_columnar.parse_block``)."""
    faults.checkpoint("import_chunk")
    from memlife.import_columnar import parse_block  # pyarrow: loaded on the first block

    return parse_block(chunk)


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


class WorkerFailed(MemlifeError, RuntimeError):
    """A worker process raised or died; the message says which and how."""


class Workers:
    """``count`` worker processes, chunks dealt round-robin, results taken in the order
    the chunks were given (each worker answers its own chunks first in, first out)."""

    def __init__(self, count: int):
        here = str(Path(__file__).resolve().parent.parent)  # the directory holding memlife/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._outboxes: list[queue.Queue[Chunk | None]] = []
        self._feeders: list[threading.Thread] = []
        self._order: deque[int] = deque()
        self._next = 0
        try:
            for _ in range(count):
                proc = subprocess.Popen(
                    [sys.executable, "-c", "from memlife.import_parse import serve; serve()"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                )
                box: queue.Queue[Chunk | None] = queue.Queue()
                # writing on a thread: a worker blocked writing its result to us while we
                # block writing its next chunk to it would be a deadlock
                stdin = cast(IO[bytes], proc.stdin)
                feeder = threading.Thread(target=_feed, args=(box, stdin), daemon=True)
                feeder.start()
                self._procs.append(proc)
                self._outboxes.append(box)
                self._feeders.append(feeder)
        except BaseException:
            self.close()
            raise

    @property
    def count(self) -> int:
        return len(self._procs)

    @property
    def in_flight(self) -> int:
        return len(self._order)

    def submit(self, chunk: Chunk) -> None:
        self._outboxes[self._next].put(chunk)
        self._order.append(self._next)
        self._next = (self._next + 1) % len(self._procs)

    def result(self) -> Parsed:
        """The oldest chunk's result (blocks until it is there)."""
        i = self._order.popleft()
        proc = self._procs[i]
        try:
            kind, value = pickle.load(cast(IO[bytes], proc.stdout))
        except (EOFError, pickle.UnpicklingError, OSError, ValueError) as exc:
            code = proc.wait()
            raise WorkerFailed(f"worker process {proc.pid} exited with code {code}") from exc
        if kind != "ok" or not isinstance(value, Parsed):
            raise WorkerFailed(f"worker process {proc.pid} raised {value}")
        return value

    def close(self) -> None:
        """Stop the workers: end of input; our end of their output closed first, so a worker
        still writing a result we will not read stops (broken pipe); kill any that hang."""
        for box in self._outboxes:
            box.put(None)
        for proc in self._procs:
            if proc.stdout is not None:
                proc.stdout.close()
        for feeder in self._feeders:
            feeder.join(timeout=10)
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Threads:
    """:class:`Workers`' interface, parsing on threads of this process: pyarrow's reader
    and SQLite's writes release the GIL, so on few cores this beats a worker process
    (no pickling of rows); results are taken in the order the chunks were given."""

    def __init__(self, count: int = 1):
        self.count = count
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, count), thread_name_prefix="memlife-parse"
        )
        self._order: deque[Future[Parsed]] = deque()
        self._inline: deque[Chunk] = deque()

    @property
    def in_flight(self) -> int:
        return len(self._order) + len(self._inline)

    def submit(self, chunk: Chunk) -> None:
        if self.count == 0:
            self._inline.append(chunk)
            return
        self._order.append(self._pool.submit(parse_chunk, chunk))

    def result(self) -> Parsed:
        if self.count == 0:
            return parse_chunk(self._inline.popleft())
        return self._order.popleft().result()

    def close(self) -> None:
        for pending in self._order:
            pending.cancel()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> Threads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _feed(box: queue.Queue[Chunk | None], pipe: IO[bytes]) -> None:
    try:
        while (chunk := box.get()) is not None:
            pickle.dump(chunk, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            pipe.flush()
    except (BrokenPipeError, OSError):  # the worker died: result() reports it
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def serve() -> None:
    """The worker: chunks in on stdin, ("ok", Parsed) or ("error", text) out on stdout."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the result stream
    source = sys.stdin.buffer
    while True:
        try:
            chunk = pickle.load(source)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("ok", parse_chunk(chunk))
        except Exception as exc:  # reported to the parent, which stops the import
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
        except BrokenPipeError:  # the parent stopped reading (it stopped the import)
            return
