"""Audit 52r (session 52's fixes attacked): SIGTERM's handler (audit 52j) in forked children.

`memlife` turns SIGTERM into `Stopped` (a KeyboardInterrupt) so that a stopped night cleans
up. A dry run without consolidation plans in *forked* children (`plan_in_processes`), which
inherit that handler. When the stopped parent ends its pool (`child.terminate()`, SIGTERM),
a child mid-part no longer dies: `Stopped` ends the part as an exception the pool's worker
loop catches, and the child takes the next part already queued to it and plans it, while the
parent waits for it at exit. 52j's own promise ("workers terminated") is broken on this path.

The hook (a sitecustomize on the night's PYTHONPATH) holds the forked child inside its first
shard until a signal comes, and logs each shard every process reports after that.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tests.support.cli import invoke
from tests.unit.test_killed_statement_session50a import NIGHT, REPO, _env
from tests.unit.test_signals_session52j import _night_processes, _records

HOOK = textwrap.dedent(
    """
    import os, time
    _PARENT = os.getpid()  # a forked child keeps its parent's value
    LOG = os.environ["AUDIT52R_LOG"]

    def _log(line):
        with open(LOG, "a") as f:
            f.write(line + "\\n")

    def _checkpoint_for(orig):
        def checkpoint(point):
            if point == "after_shard_reported" and os.getpid() != _PARENT:
                _log(f"{os.getpid()} shard")
                try:
                    fd = os.open(LOG + ".held", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    return orig(point)
                os.close(fd)
                try:
                    while True:
                        time.sleep(3600)
                except BaseException as exc:
                    _log(f"{os.getpid()} stopped {type(exc).__name__}")
                    raise
            return orig(point)
        return checkpoint

    import memlife.report as _report
    _report.checkpoint = _checkpoint_for(_report.checkpoint)
    """
)


@pytest.fixture(scope="module")
def fanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """520 shards: a parent and one planning child (pipeline.planning_workers)."""
    home = tmp_path_factory.mktemp("fanned52r") / "home"
    home.mkdir()
    code, out, err = invoke("import", str(_records(home.parent / "in.jsonl")), env=_env(home))
    assert code == 0, out + err
    return home


def test_a_forked_planning_child_ends_at_its_parents_sigterm(fanned: Path) -> None:
    hook = fanned.parent / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    log = fanned.parent / "log"
    log.unlink(missing_ok=True)
    Path(f"{log}.held").unlink(missing_ok=True)
    env = _env(fanned, hook, AUDIT52R_LOG=str(log))
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--dry-run", "--no-consolidate",
           "--engine", "local", "--now", NIGHT]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        while not Path(f"{log}.held").exists():  # the child is inside its first shard
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            threading.Event().wait(0.05)
        os.kill(proc.pid, signal.SIGTERM)  # to the command alone, as `timeout` sends it
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for pid in _night_processes(fanned):  # none expected; the test started them
        os.kill(pid, signal.SIGKILL)
    lines = log.read_text().splitlines()
    child = lines[0].split()[0]
    assert proc.returncode == 143, err
    # the child died at the signal: it caught nothing and reported no shard after its held one
    assert [line for line in lines if line.startswith(f"{child} ")][1:] == [], lines
