"""The import's default on a SQLite file: worker processes that parse *and* write, in turn.

Why: parsing a line and writing its row cost about the same (~15 us each on the quiet
2-core machine), and in one process the two share one GIL; a worker that only parsed had
to pickle every 26-column row back, which cost what it saved (BENCHMARKS.md, "Seventh
pass: the import in turns"). Here rows never cross a pipe.

The shape, for ``count`` workers:
- this process reads the file in blocks of whole lines (``importer.line_blocks``) and
  hands a group of up to ``GROUP_BLOCKS`` blocks to an idle worker;
- the worker parses the group (``import_parse.parse_chunk_table``: the rows every path
  builds, as one Arrow table), keeps the table and sends back each valid line's (line, id,
  future) and the invalid lines;
- in file order, this process drops repeated ids (first line wins; ``import_write``) and
  gives the group its turn once the group before it is committed;
- the worker writes the kept rows on its own connection, in transactions of ``rows_batch``
  rows or ``rows_chars`` of content, and says what the write found: the table binds as it
  is (``import_ingest``), or, where a batch's actor has tombstones, a row names sources or
  an id is stored already, goes through ``SqliteStore.insert_rows`` (tombstones and existing ids checked in the
  same transaction).

So groups are written strictly in file order, one at a time: a failure leaves a prefix of
the file stored in whole transactions, and running the import again finishes it. While
one worker writes, the other parses. Workers are child Python processes reading pickled
messages on stdin and answering on stdout (never a fork of this threaded process).
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

from memlife.errors import MemlifeError, RecordError
from memlife.import_parse import Chunk, parse_chunk_table
from memlife.import_write import Flushed, SeenIds, drop_repeats

# blocks a turn: ~14,000 demo lines. 1M lines, one run each, when a group waited as Python
# rows (~1.7 kB each; an Arrow table now, ~0.6 kB): 1 block 24.8k records/s and 483 MB
# summed; 2 blocks 27.9k, 569 MB; 3 blocks 27.7k, 657 MB
GROUP_BLOCKS = 2


class TurnFailed(MemlifeError, RuntimeError):
    """A worker raised or died; the message says which, how and at which line."""


class NoWorkers(MemlifeError, OSError):
    """No child process could be started here: nothing was read or written yet, and the
    caller imports in its own process instead."""


@dataclass
class Outcome:
    """What the turns found, for the caller's report (each list in file order)."""

    invalid: list[RecordError] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    written: Flushed = field(default_factory=Flushed)


@dataclass(frozen=True)
class Span:
    """A block of whole lines: where it is in the file and the number of its first line."""

    first_line: int
    offset: int
    length: int


@dataclass(frozen=True)
class Limits:
    """What every block's parse needs besides its lines (import_lines.Chunk's fields)."""

    content_max: int
    max_line_bytes: int
    future_after: datetime
    source_id: tuple[int, int] | None = None  # (st_dev, st_ino) of the file the parent opened


@dataclass
class _Group:
    index: int
    first_line: int
    worker: int
    errors: list[tuple[str | None, str, str, int | None]] | None = None
    lines: list[tuple[int, str, bool]] | None = None


def import_in_turns(
    store_path: Path,
    source: Path,
    items: Iterator[tuple[int, int, bytes] | int],
    count: int,
    limits: Limits,
    over_long: Callable[[int], tuple[str | None, str, str, int | None]],
    rows_batch: int,
    rows_chars: int,
) -> Outcome:
    """Import the blocks of ``source`` that ``items`` yields (``importer.line_spans``: first
    line, offset, lines; or the number of an over-long line) through ``count`` workers
    writing into the store at ``store_path``. A worker reads its blocks from the file
    itself: only their offsets cross the pipe. ``over_long(line)``: the error arguments of
    an over-long line."""
    out = Outcome()
    seen = SeenIds()
    ordered: deque[_Group | tuple[str | None, str, str, int | None]] = deque()
    idle = list(range(count))
    ready: deque[tuple[_Group, list[int]]] = deque()  # checked, with the lines dropped
    writing: _Group | None = None
    groups: dict[int, _Group] = {}  # dealt, not yet written
    dealt = 0
    units = _groups(items, over_long)
    exhausted = False
    with _Pool(count, ("open", str(store_path), str(source), limits)) as pool, closing(seen):
        while True:
            while idle and not exhausted:  # deal the next groups to idle workers
                for unit in units:
                    if isinstance(unit, tuple):
                        ordered.append(unit)
                        continue
                    group = _Group(dealt, unit[0].first_line, idle.pop(0))
                    dealt += 1
                    groups[group.index] = group
                    ordered.append(group)
                    pool.send(group.worker, ("parse", group.index, unit))
                    break
                else:
                    exhausted = True
            # in file order, as soon as each group is parsed (not between two turns):
            # report its invalid lines, drop its repeated ids
            while ordered:
                head = ordered[0]
                if isinstance(head, tuple):
                    out.invalid.append(RecordError(*head))
                    ordered.popleft()
                    continue
                if head.lines is None:
                    break
                out.invalid += [RecordError(*e) for e in head.errors or []]
                repeats = drop_repeats(seen, head.lines)
                out.held += repeats.held
                out.warnings += repeats.warnings
                ready.append((head, sorted(repeats.dropped)))
                head.lines = []
                ordered.popleft()
            if writing is None and ready:  # the next group's turn: the one before is committed
                writing, dropped = ready.popleft()
                pool.send(writing.worker, ("write", writing.index, dropped, rows_batch, rows_chars))
            if writing is None and not ordered and exhausted:
                break
            kind, worker, value = pool.receive()
            if kind == "parsed":
                index, errors, lines = value
                groups[index].errors, groups[index].lines = errors, lines
            elif kind == "written" and writing is not None and worker == writing.worker:
                out.written.extend(value)
                del groups[writing.index]
                writing = None
                idle.append(worker)
            else:
                at = next((g.first_line for g in groups.values() if g.worker == worker), None)
                where = f"at line {at}" if at is not None else "(a worker without a group)"
                raise TurnFailed(f"{where}: {value}")
    return out


def _groups(
    items: Iterator[tuple[int, int, bytes] | int],
    over_long: Callable[[int], tuple[str | None, str, str, int | None]],
) -> Iterator[list[Span] | tuple[str | None, str, str, int | None]]:
    """Groups of up to GROUP_BLOCKS consecutive blocks, and an over-long line's error
    between them, in file order."""
    group: list[Span] = []
    for item in items:
        if isinstance(item, int):
            if group:
                yield group
                group = []
            yield over_long(item)
            continue
        first_line, offset, data = item
        group.append(Span(first_line, offset, len(data)))
        if len(group) >= GROUP_BLOCKS:
            yield group
            group = []
    if group:
        yield group


# Ctrl-C at a terminal reaches the whole process group, these workers too: the parent
# reports it (exit 130, no traceback); a worker stops quietly, a write in progress rolled
# back whole by serve's ``finally`` (the next import finishes the file). Each worker
# printed its KeyboardInterrupt traceback (audit 52i).
_WORKER = (
    "try:\n"
    "    from memlife.import_turns import serve\n"
    "    serve()\n"
    "except KeyboardInterrupt:\n"
    "    raise SystemExit(130) from None\n"
)


class _Pool:
    """``count`` worker processes; their answers arrive on one queue, each tagged with the
    worker's number (a reader thread per worker drains its pipe, so a worker never blocks
    writing to us while we write to it)."""

    def __init__(self, count: int, opening: tuple[Any, ...]):
        here = str(Path(__file__).resolve().parent.parent)  # the directory holding memlife/
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        self._procs: list[subprocess.Popen[bytes]] = []
        self._answers: queue.Queue[tuple[str, int, Any]] = queue.Queue()
        self._readers: list[threading.Thread] = []
        try:
            for k in range(count):
                proc = subprocess.Popen(
                    [sys.executable, "-c", _WORKER],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                )
                self._procs.append(proc)
                reader = threading.Thread(target=self._read, args=(k, proc), daemon=True)
                reader.start()
                self._readers.append(reader)
                self.send(k, opening)
        except OSError as exc:
            self.close()
            raise NoWorkers(f"cannot start an import worker: {exc}") from exc
        except BaseException:
            self.close()
            raise

    def _read(self, k: int, proc: subprocess.Popen[bytes]) -> None:
        pipe = cast(IO[bytes], proc.stdout)
        while True:
            try:
                kind, value = pickle.load(pipe)
            except (EOFError, pickle.UnpicklingError, OSError, ValueError):
                code = proc.wait()
                self._answers.put(("died", k, f"worker process {proc.pid} exited with code {code}"))
                return
            if kind == "error":
                self._answers.put(("error", k, f"worker process {proc.pid} raised {value}"))
                return
            if kind != "opened":
                self._answers.put((kind, k, value))

    def send(self, k: int, message: tuple[Any, ...]) -> None:
        pipe = cast(IO[bytes], self._procs[k].stdin)
        try:
            pickle.dump(message, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            pipe.flush()
        except (BrokenPipeError, OSError):  # it died: its reader says how
            pass

    def receive(self) -> tuple[str, int, Any]:
        return self._answers.get()

    def close(self) -> None:
        """End of input for every worker: a write in progress commits or rolls back whole,
        then the worker exits; one that hangs is killed."""
        for proc in self._procs:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> _Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve() -> None:
    """The worker: ("open", store, source file, limits), ("parse", group, spans), ("write",
    group, dropped lines, rows a transaction, content a transaction) in on stdin; answers
    out on stdout. A group's rows wait for their turn as one Arrow table, and the write
    binds it as it is (``import_ingest``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from memlife.import_ingest import IngestWriter
    from memlife.stores.sqlite import SqliteStore

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
    inbox = sys.stdin.buffer
    writer: IngestWriter | None = None
    source: IO[bytes] | None = None
    limits: Limits | None = None
    tables: dict[int, pa.Table] = {}
    try:
        while True:
            try:
                message = pickle.load(inbox)
            except EOFError:
                return
            kind = message[0]
            try:
                answer: tuple[str, Any]
                if kind == "open":
                    SqliteStore(message[1]).close()  # the schema made or brought up to date
                    writer, limits = IngestWriter(message[1]), message[3]
                    source = open(message[2], "rb")  # noqa: SIM115 (closed in finally)
                    st = os.fstat(source.fileno())  # replaced by rename since: not this file
                    if limits.source_id not in (None, (st.st_dev, st.st_ino)):
                        raise OSError(f"{message[2]} is no longer the file being imported")
                    answer = ("opened", None)
                elif kind == "parse" and source is not None and limits is not None:
                    _, index, spans = message
                    errors = []
                    parts = []
                    for span in spans:
                        table, errs = parse_chunk_table(_chunk(source, span, limits))
                        parts.append(table)
                        errors += errs
                    table = pa.concat_tables(parts)
                    pa.default_memory_pool().release_unused()  # the reader's buffers
                    tables[index] = table
                    lines = list(zip(table.column("line").to_pylist(),
                                     table.column("id").to_pylist(),
                                     table.column("future").to_pylist(), strict=True))  # fmt: skip
                    answer = ("parsed", (index, errors, lines))
                elif kind == "write" and writer is not None:
                    _, index, dropped, size, max_chars = message
                    table = tables.pop(index)
                    if dropped:
                        kept = pc.invert(
                            pc.is_in(table.column("line"), pa.array(dropped, pa.int64()))
                        )
                        table = table.filter(kept)
                    written = Flushed()
                    for batch in _batches(table, size, max_chars):
                        written.extend(writer.write(batch))
                    answer = ("written", written)
                else:
                    answer = ("error", f"unexpected {kind!r} (before the store was opened?)")
            except Exception as exc:  # reported to the parent, which stops the import
                answer = ("error", f"{type(exc).__name__}: {exc}")
            try:
                pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
                out.flush()
            except BrokenPipeError:  # the parent stopped reading (it stopped the import)
                return
            if answer[0] == "written" and writer is not None:
                # while the other worker takes its turn: a PASSIVE checkpoint never blocks
                # its writes, and the WAL restarts once one has caught up
                writer.fold_wal()
    finally:
        if writer is not None:
            writer.close()
        if source is not None:
            source.close()


def _batches(table: Any, size: int, max_chars: int | None) -> Iterator[Any]:
    """The table cut into batches, in order: after ``size`` rows, or after the row whose
    content brings the batch to ``max_chars`` characters (code points, as ``len``)."""
    import numpy as np
    import pyarrow.compute as pc

    chars = pc.utf8_length(table.column("content")).to_numpy() if max_chars else None
    start = 0
    while start < table.num_rows:
        end = min(start + size, table.num_rows)
        if chars is not None:
            over = np.flatnonzero(np.cumsum(chars[start:end]) >= max_chars)
            if len(over):
                end = start + int(over[0]) + 1
        yield table.slice(start, end - start)
        start = end


def _chunk(source: IO[bytes], span: Span, limits: Limits) -> Chunk:
    source.seek(span.offset)
    data = source.read(span.length)
    if len(data) != span.length:  # the file changed under the import
        raise OSError(f"expected {span.length} bytes at offset {span.offset}, read {len(data)}")
    return Chunk(span.first_line, data, limits.content_max, limits.max_line_bytes,
                 limits.future_after)  # fmt: skip
