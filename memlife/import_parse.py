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
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, cast

from memlife import faults
from memlife.errors import MemlifeError

# the per-line work lives in import_lines (the columnar path uses it too); re-exported here
from memlife.import_lines import (
    MAX_DEPTH,
    Chunk,
    Parsed,
    check_declared_sha256,
    checked_text,
    json_depth,
    line_row,
    parse_lines,
)

__all__ = ["MAX_DEPTH", "Chunk", "Parsed", "WorkerFailed", "Workers", "Threads", "check_declared_sha256",
           "checked_text", "json_depth", "line_row", "parse_chunk", "parse_lines", "serve"]  # fmt: skip


def parse_chunk(chunk: Chunk) -> Parsed:
    """In a worker: the rows and errors of a chunk's lines (the serial loop's checks),
    through the columnar path when the block allows (``import_columnar.parse_block``)."""
    faults.checkpoint("import_chunk")
    from memlife.import_columnar import parse_block  # pyarrow: loaded on the first block

    return parse_block(chunk)


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
