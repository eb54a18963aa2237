"""Fault injection at the executor's step boundaries (tests prove crash safety with it).

Points: after_journal_write, after_replacement_write, after_supersede, after_delete,
before_receipt, after_receipt; and the run's stages (pipeline): after_stage (everything
staged, nothing written), after_gate (verdict known, nothing committed),
after_commit_groups (replacements and supersedes committed, deletions not yet),
after_shard_reported (a shard's decisions are in the batch's report: between shards);
import_chunk (an import worker process, before it parses a block of lines),
import_commit (the row path's write, its rows inserted, before the transaction commits).
Armed by `inject()` in-process, or for a subprocess by MEMLIFE_FAULT=<point>[:<skip>] and
MEMLIFE_FAULT_MODE=raise|kill|hang (kill = SIGKILL, no cleanup; hang = create the file
MEMLIFE_FAULT_MARK holding this process id, then sleep until killed: a holder that stalls
mid-run, for the lease tests, or a worker to kill from outside). A hang whose mark exists
already passes: among processes armed alike, only the first to get there stops.
<skip> lets the point pass that many times first (stop in the middle of a batch).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memlife.errors import InjectedFault as InjectedFault  # moved; re-exported
from memlife.fault_points import IMPORT_POINTS as IMPORT_POINTS
from memlife.fault_points import POINTS as POINTS
from memlife.settings import settings

_armed: dict[str, list[Any]] = {}  # point -> [remaining skips: int, mode: str]


def _from_env() -> None:
    # checkpoints run per shard: parse the settings only when a fault is asked for
    if _armed or not any(k.upper() == "MEMLIFE_FAULT" for k in os.environ):
        return
    spec = settings().fault
    if spec and not _armed:
        point, _, skip = spec.partition(":")
        _armed[point] = [int(skip or 0), settings().fault_mode]


def checkpoint(point: str) -> None:
    _from_env()
    armed = _armed.get(point)
    if armed is None:
        return
    if armed[0] > 0:
        armed[0] -= 1
        return
    del _armed[point]
    if armed[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if armed[1] == "hang":
        mark = settings().fault_mark
        if mark:
            try:  # create-only: another process that stopped here first keeps the mark
                fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
        while True:
            time.sleep(3600)
    raise InjectedFault(point)


@contextmanager
def inject(point: str, skip: int = 0, mode: str = "raise") -> Iterator[None]:
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}")
    _armed[point] = [skip, mode]
    try:
        yield
    finally:
        _armed.pop(point, None)
