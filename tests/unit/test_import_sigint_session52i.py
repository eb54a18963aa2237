"""Audit 52i (session 52: the CLI as a careless operator and a shell script use it): Ctrl-C
on an import whose worker processes parse and write.

Ctrl-C at a terminal sends SIGINT to the whole foreground process group: to `memlife
import` and to its worker processes (import_turns: children reading pickled messages on
stdin). README "Exit codes": "An error is one line on stderr; MEMLIFE_DEBUG=1 shows the
traceback"; audit 45h held an interrupted command to exit 130 with no traceback. The parent
did; each worker printed its own Python traceback (``KeyboardInterrupt`` in ``serve``).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from memlife.stores.sqlite import SqliteStore
from tests.conftest import REPO
from tests.support.cli import invoke
from tests.support.records import good

IDS = [f"m-{i:04d}" for i in range(300)]


def _ctrl_c_at_a_worker(home: Path, source: Path) -> subprocess.CompletedProcess[str]:
    """`memlife import SOURCE --workers 2` in a session of its own (as a shell's job), a
    worker stopped before it parses its first block; then SIGINT to the whole group, as the
    terminal sends it."""
    mark = home.parent / "at-fault"
    env = {**os.environ, "MEMLIFE_FAULT": "import_chunk", "MEMLIFE_FAULT_MODE": "hang",
           "MEMLIFE_FAULT_MARK": str(mark), "NO_COLOR": "1", "TERM": "dumb"}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlife", "import", str(source), "--workers", "2"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():  # a worker stands at the fault point
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the import never reached its fault point"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole job
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(good(i)) + "\n" for i in IDS))
    return path


def test_ctrl_c_on_a_worker_import_prints_no_traceback(home: Path, tmp_path: Path) -> None:
    home.mkdir(parents=True)
    stopped = _ctrl_c_at_a_worker(home, _file(tmp_path))
    assert stopped.returncode == 130, stopped.stderr
    assert "Traceback" not in stopped.stderr and "KeyboardInterrupt" not in stopped.stderr, (
        stopped.stderr
    )


def test_an_interrupted_worker_import_leaves_a_store_the_rerun_finishes(
    home: Path, tmp_path: Path
) -> None:
    """Control (holds before and after the fix): the store the interrupted import leaves is
    a whole SQLite file, and running the import again brings every line in, once."""
    home.mkdir(parents=True)
    source = _file(tmp_path)
    stopped = _ctrl_c_at_a_worker(home, source)
    assert stopped.returncode != 0
    db = home / "memlife.db"
    if db.exists():
        with sqlite3.connect(db) as con:
            assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    code, out, err = invoke("import", str(source), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["imported"] + report["unchanged"] == len(IDS), report
    with SqliteStore(db) as store:
        assert sum(1 for _ in store.iter_all()) == len(IDS)
