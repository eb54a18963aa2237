"""Audit 52j (session 52): a night stopped by a graceful signal, SIGINT (Ctrl-C) or SIGTERM
(`systemctl stop`, a Kubernetes eviction, `timeout`), in real `memlife run` processes.

Two findings:

- A store large enough to plan in processes (500+ shards, `pipeline.plan_in_processes`):
  Ctrl-C did not stop the night. `with ProcessPoolExecutor` waited for the planning child,
  which caught the interrupt of its current part and went on planning every part left,
  calling the model for each (460 paid calls after the Ctrl-C here), before the command
  exited. SIGTERM (default action) killed the parent outright and left the child orphaned:
  it kept calling the model, then hung forever on its queue (holding the night's pipes).
- SIGTERM was not handled at all: the night died without its cleanup, no failure receipt,
  its lease left held (another host waits out the TTL: exit 4), no message; Ctrl-C ran the
  cleanup but printed nothing either.

The model is the local Messages API fake, holding every request until the test lets it go:
with both planning processes inside a request, the count of requests cannot move unless a
process plans on after the signal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.messages_api import MessagesServer, Reply
from tests.support.cli import invoke
from tests.support.records import good
from tests.unit.test_killed_statement_session50a import NIGHT, REPO, _env, _state, seeded_night
from tests.unit.test_review_nights_session50k import replies

ACTORS = 520  # two planning processes: 250+ shards each (pipeline.planning_workers)
HOLD_AT_MOST = 20.0  # the held requests go on after this, so an unfixed night can end


def _records(path: Path) -> Path:
    """Per actor, an older and a newer statement of one preference: a group the model judges,
    in a namespace the default policy does not gate."""
    lines = []
    for a in range(ACTORS):
        actor, ns = f"u-{a:04d}", f"/users/u-{a:04d}/notes"
        for n, (text, at) in enumerate((("I drink green tea every morning.", "2026-01-02"),
                                        ("I now drink black coffee every morning.", "2026-03-02"))):  # fmt: skip
            lines.append(json.dumps(good(f"m-{a:04d}-{n}", actor_id=actor, namespace=ns,
                                         content=text, created_at=f"{at}T10:00:00Z")))  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def fanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 520 shards (the seed each test copies)."""
    home = tmp_path_factory.mktemp("fanned") / "home"
    home.mkdir()
    code, out, err = invoke("import", str(_records(home.parent / "in.jsonl")), env=_env(home))
    assert code == 0, out + err
    return home


class HeldModel:
    """Holds every request until ``release``; one that comes after release is answered."""

    def __init__(self, server: MessagesServer):
        self.server, self.released = server, threading.Event()
        server.set_handler(self._answer)

    def _answer(self, body: dict[str, Any]) -> Reply:
        self.released.wait(120)
        return replies(body)

    def requests(self) -> int:
        return len(self.server.message_requests)


@pytest.fixture
def held(messages_server: MessagesServer) -> Iterator[HeldModel]:
    model = HeldModel(messages_server)
    try:
        yield model
    finally:
        model.released.set()


def _night_processes(home: Path) -> list[int]:
    """Live processes of this home's night (the test's own children and theirs)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if f"MEMLIFE_HOME={home}".encode() in env and proc.name.isdigit():
            pids.append(int(proc.name))
    return pids


def _stopped_while_planning(
    home: Path, held: HeldModel, sig: signal.Signals, *, group: bool
) -> tuple[subprocess.Popen[str], int]:
    """`memlife run` on ``home``, sent ``sig`` once both planning processes are inside a
    model request (to its process group, as a terminal's Ctrl-C is, or to the parent only,
    as `timeout` and `kill` send it); (the process, once exited; requests at the signal)."""
    env = _env(home, ANTHROPIC_API_KEY="sk-ant-fake", ANTHROPIC_BASE_URL=held.server.base_url)
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now", NIGHT]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        while held.requests() < 2:  # the parent's own part and the child's, both held
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            threading.Event().wait(0.05)
        at_signal = held.requests()
        (os.killpg if group else os.kill)(proc.pid, sig)
        # an unfixed parent waits on its child, which waits on the model: let it go on
        threading.Timer(HOLD_AT_MOST, held.released.set).start()
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, at_signal


def _end_orphans(home: Path, held: HeldModel) -> list[int]:
    """The night's processes left after its command exited, ended (the test started them)."""
    left = _night_processes(home)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    held.released.set()
    return left


def test_ctrl_c_stops_a_night_planning_in_processes(
    fanned: Path, held: HeldModel, tmp_path: Path
) -> None:
    """A terminal's Ctrl-C during consolidation: the command exits 130 with one line, no
    process of the night plans on, and no model request is made after the Ctrl-C. Before:
    the planning child went on with every part left (460 more requests) and the command
    exited only then, silent."""
    home = tmp_path / "home"
    shutil.copytree(fanned, home)
    proc, at_signal = _stopped_while_planning(home, held, signal.SIGINT, group=True)
    after = held.requests() - at_signal
    err = proc.stderr.read() if proc.stderr else ""
    assert _end_orphans(home, held) == []
    assert proc.returncode == 130, err
    assert after == 0, f"{after} model requests after the Ctrl-C"
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith("error: stopped by SIGINT"), err


def test_sigterm_stops_a_night_planning_in_processes_and_leaves_no_orphan(
    fanned: Path, held: HeldModel, tmp_path: Path
) -> None:
    """SIGTERM to the command alone (`timeout`, `kill`): it exits 143 with one line, its
    lease given back and its failure receipt written, and no process of the night is left.
    Before: the parent died outright (lease held, no receipt, no message) and its planning
    child, orphaned, went on calling the model, then waited on its queue forever."""
    home = tmp_path / "home"
    shutil.copytree(fanned, home)
    proc, at_signal = _stopped_while_planning(home, held, signal.SIGTERM, group=False)
    left = _end_orphans(home, held)
    err = proc.stderr.read() if proc.stderr else ""
    assert left == [], "planning processes left running after the night exited"
    assert proc.returncode == 143, err
    assert held.requests() == at_signal
    assert err.strip().splitlines()[-1].startswith("error: stopped by SIGTERM"), err
    assert _leases(home) == 0
    receipts = list((home / "receipts" / "runs").rglob("receipt.json"))
    assert [json.loads(r.read_text())["status"] for r in receipts] == ["failure"]


def _leases(home: Path) -> int:
    conn = sqlite3.connect(home / "memlife.db")
    try:
        return int(conn.execute("SELECT count(*) FROM leases").fetchone()[0])
    finally:
        conn.close()


# -- a small night stopped mid-commit (a fault point that hangs), then run again -----------


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base, clean, done = seeded_night(tmp_path_factory)
    return {"base": base, "state": _state(clean), "summary": json.loads(done.stdout)}


def _stopped_at(home: Path, point: str, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    mark = home.parent / "at-fault"
    env = _env(home, MEMLIFE_FAULT=point, MEMLIFE_FAULT_MODE="hang", MEMLIFE_FAULT_MARK=str(mark))
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now", NIGHT,
           "--eval-cases", str(home / "cases.yaml"), "--allow-future-cutoff", "--json"]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        while not mark.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            threading.Event().wait(0.05)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _converges(home: Path, night: dict[str, Any]) -> None:
    """The rerun finishes the night once: the uninterrupted night's records, operations and
    receipts, its counts, verified; the stopped attempt's receipt says `failure`."""
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now", NIGHT,
           "--eval-cases", str(home / "cases.yaml"), "--allow-future-cutoff", "--json"]  # fmt: skip
    rerun = subprocess.run(cmd, cwd=REPO, env=_env(home), capture_output=True, text=True,
                           timeout=600)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    summary = json.loads(rerun.stdout)
    assert summary["lifecycle"] == night["summary"]["lifecycle"]
    assert summary["counts"] == night["summary"]["counts"]
    state = _state(home)
    for part in ("records", "ops", "receipts"):
        assert state[part] == night["state"][part], part
    assert state["leases"] == 0
    code, out, _ = invoke("receipts", "verify", summary["run_id"], env=_env(home))
    assert code == 0, out


def test_sigterm_mid_commit_cleans_up_then_the_rerun_finishes_the_night(
    night: dict[str, Any], tmp_path: Path
) -> None:
    """`systemctl stop` between a delete and its receipt: exit 143 with one line, the lease
    given back at once (a worker on another host need not wait out its TTL), a `failure`
    receipt; the rerun finishes the night as the uninterrupted one. Before: killed outright
    (-15), lease held, no receipt, nothing said."""
    home = tmp_path / "home"
    shutil.copytree(night["base"], home)
    stopped = _stopped_at(home, "after_delete", signal.SIGTERM)
    assert stopped.returncode == 143, stopped.stderr[-2000:]
    assert "Traceback" not in stopped.stderr, stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1].startswith("error: stopped by SIGTERM")
    assert _leases(home) == 0
    receipt = next((home / "receipts" / "runs").rglob("receipt.json"))
    assert json.loads(receipt.read_text())["status"] == "failure"
    _converges(home, night)


def test_ctrl_c_mid_commit_cleans_up_then_the_rerun_finishes_the_night(
    night: dict[str, Any], tmp_path: Path
) -> None:
    """Control: Ctrl-C at the same moment already ran the cleanup (exit 130, no traceback,
    lease given back, `failure` receipt) and the rerun converges."""
    home = tmp_path / "home"
    shutil.copytree(night["base"], home)
    stopped = _stopped_at(home, "after_delete", signal.SIGINT)
    assert stopped.returncode == 130, stopped.stderr[-2000:]
    assert "Traceback" not in stopped.stderr, stopped.stderr
    assert _leases(home) == 0
    receipt = next((home / "receipts" / "runs").rglob("receipt.json"))
    assert json.loads(receipt.read_text())["status"] == "failure"
    _converges(home, night)
