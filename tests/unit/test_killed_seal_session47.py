"""Session 47 (audit 47k): a real `memlife run` SIGKILLed between its operations Parquet and its run
receipt (the seal's own window: the Parquet, the dataset file, the chain over every
operation receipt, then `receipt.json`).

The receipts go to S3 (moto over HTTP). The server holds the night's PUT of its run
receipt; the test kills the process while it waits there, so the kill lands in that window
every time, with no timing. Then the night is finished, either by a rerun with the same
settings or by the next night (which seals the dead run as ABANDONED). Both seals write the
same rows again under `operations.2.parquet`, and the first file, byte-identical, is named
by no receipt: `receipts verify` of the run fails for good (PARQUET_NOT_SEALED, and
DATASET_NOT_SEALED for the dataset file), though nothing is wrong with the evidence.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
NIGHT = "2026-06-01T00:00:00+00:00"
NEXT = "2026-06-02T00:00:00+00:00"


class HoldRunReceipt:
    """WSGI middleware: the first PUT of a run receipt (`runs/.../receipt.json`) is held,
    never stored; ``reached`` says a writer is waiting there."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app, self.reached, self.release, self.armed = (
            app,
            threading.Event(),
            threading.Event(),
            True,
        )

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if self.armed and environ["REQUEST_METHOD"] == "PUT" and path.endswith("/receipt.json"):
            self.armed = False
            self.reached.set()
            self.release.wait(300)
            start_response("503 Service Unavailable", [("Content-Length", "0")])
            return [b""]
        return self.app(environ, start_response)


@pytest.fixture()
def s3_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, HoldRunReceipt]]:
    """A demo store (60 records, an evaluation set from it) whose receipts go to moto S3
    over HTTP, through ``HoldRunReceipt``."""
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):  # fmt: skip
        monkeypatch.setenv(key, value)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    hold = HoldRunReceipt(server._server.app)  # type: ignore[union-attr]
    server._server.app = hold  # type: ignore[union-attr]
    try:
        host, port = server.get_host_and_port()
        bucket = f"audit-{uuid.uuid4().hex[:12]}"  # moto's buckets outlive one server
        boto3.client("s3", endpoint_url=f"http://{host}:{port}").create_bucket(Bucket=bucket)
        monkeypatch.setenv("MEMLIFE_RECEIPTS", f"s3://{bucket}/r?endpoint_url=http://{host}:{port}")
        assert invoke("demo", "-n", "60", "--anchor", NIGHT)[0] == 0
        code, out, err = invoke("eval", "init", "-o", str(home / "cases.yaml"), "--now", NIGHT)
        assert code == 0, out + err
        yield home, hold
    finally:
        hold.release.set()
        server.stop()


def _run(home: Path, now: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now", now,
           "--eval-cases", str(home / "cases.yaml"), "--allow-future-cutoff", "--json"]  # fmt: skip
    return subprocess.Popen(cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _killed_before_its_receipt(home: Path, hold: HoldRunReceipt) -> None:
    night = _run(home, NIGHT)
    assert hold.reached.wait(240), night.communicate()[1][-2000:]
    os.kill(night.pid, signal.SIGKILL)
    assert night.wait() == -signal.SIGKILL
    hold.release.set()


def _finished(home: Path, now: str) -> dict[str, Any]:
    proc = _run(home, now)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)


def test_a_night_killed_before_its_run_receipt_and_rerun_verifies(
    s3_home: tuple[Path, HoldRunReceipt],
) -> None:
    """The adversary SIGKILLs `memlife run` after its operations Parquet, before its run
    receipt; the operator reruns it with the same cutoff. What must hold: the rerun succeeds
    and `receipts verify` of the run passes (invariants 4 and 12: a crash at any point)."""
    home, hold = s3_home
    _killed_before_its_receipt(home, hold)
    rerun = _finished(home, NIGHT)
    assert rerun["status"] == "success"
    code, out, _ = invoke("receipts", "verify", rerun["run_id"])
    assert code == 0, out


def test_a_night_killed_before_its_run_receipt_and_sealed_by_the_next_verifies(
    s3_home: tuple[Path, HoldRunReceipt],
) -> None:
    """As above, but the schedule's next night comes instead of a rerun, and seals the dead
    run (ABANDONED). What must hold: both nights' evidence verifies."""
    home, hold = s3_home
    _killed_before_its_receipt(home, hold)
    nxt = _finished(home, NEXT)
    assert nxt["other_counts"]["abandoned_runs_sealed"] == 1
    code, out, _ = invoke("receipts", "list", "--json")
    runs = sorted(r["run_id"] for r in json.loads(out))
    assert code == 0 and len(runs) == 2 and nxt["run_id"] == runs[1], out
    for run_id in runs:
        code, out, _ = invoke("receipts", "verify", run_id)
        assert code == 0, out
