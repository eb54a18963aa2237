"""A real `prefect server start` on 127.0.0.1 for tests: quiet, offline, only the services
a run needs; processes we start are process groups of their own, stopped by pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).parent / "prefect")
# the nightly schedule would fill the database with runs; the other loops are not needed
SERVICES_OFF = ("SCHEDULER", "LATE_RUNS", "PAUSE_EXPIRATIONS", "CANCELLATION_CLEANUP", "FOREMAN",
                "REPOSSESSOR", "CLEANUP_RECONCILER", "TRIGGERS")  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prefect_env(home: Path, api: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a Prefect process (server, CLI, worker) with its own PREFECT_HOME."""
    env = {
        **(base if base is not None else os.environ),
        "PREFECT_HOME": str(home),
        "PREFECT_LOCAL_STORAGE_PATH": str(home / "storage"),
        "PREFECT_API_URL": api,
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'server.db'}",
        "PREFECT_CLI_PROMPT": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "1",
        **{f"PREFECT_SERVER_SERVICES_{svc}_ENABLED": "false" for svc in SERVICES_OFF},
    }
    for key in ("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_PROFILES_PATH"):
        env.pop(key, None)
    return env


def start(args: list[str], env: dict[str, str], log: IO[str], cwd: Path) -> subprocess.Popen:
    """A process group of its own (so stop() ends it and whatever it started)."""
    return subprocess.Popen(args, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip


def stop(proc: subprocess.Popen | None) -> None:
    """Stop a process group we started (by its leader's pid), escalating to SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_until(
    done: Callable[[], Any], what: str, timeout: float, alive: dict[str, tuple] | None = None,
    poll: float = 0.5,
) -> Any:  # fmt: skip
    """Poll ``done`` until it returns something truthy; fail at ``timeout`` or as soon as one
    of the ``alive`` processes ((Popen, log path) by name) has exited (its log's tail shown)."""
    deadline = time.monotonic() + timeout
    while True:
        got = done()
        if got:
            return got
        for name, (proc, log) in (alive or {}).items():
            assert proc.poll() is None, f"{name} exited while waiting for {what}:\n" + tail(log)
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f}s waiting for {what}"
        time.sleep(poll)


def tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


def cli(args: list[str], env: dict[str, str], timeout: float = 180) -> str:
    done = subprocess.run([PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    assert done.returncode == 0, f"prefect {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@contextmanager
def prefect_server(tmp: Path, base: dict[str, str] | None = None) -> Iterator[tuple[str, dict]]:
    """Start `prefect server start`, wait until healthy; yields (api URL, CLI environment)."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = prefect_env(tmp / "prefect-server", api, base)
    log_path = tmp / "prefect-server.log"
    with log_path.open("w") as log:
        server = start([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                       env, log, tmp)  # fmt: skip
        try:

            def healthy() -> bool:
                try:
                    return httpx.get(f"{api}/health", timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_until(healthy, "a healthy prefect server", 300, {"server": (server, log_path)})
            yield api, env
        finally:
            stop(server)
