"""Shared fixtures. Prefect is configured quiet and offline before anything imports it."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memlife.prefect_env import QUIET  # noqa: E402  (imports no Prefect)

if TYPE_CHECKING:  # the fixtures import them when used: collecting stays fast
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

_PREFECT_HOME = tempfile.mkdtemp(prefix="memlife-prefect-")
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)  # one per worker, every run
os.environ.update(
    QUIET,
    PREFECT_HOME=_PREFECT_HOME,
    PREFECT_LOCAL_STORAGE_PATH=str(Path(_PREFECT_HOME) / "storage"),
)

pytest_plugins = ["tests.fakes.messages_api"]


def _private_websocket_random() -> None:
    """websockets draws each keepalive ping's payload from the global random state
    (``random.getrandbits``), in Prefect's event-loop thread, every 20 s while the session's
    Prefect harness keeps its events client connected. A ping landing while Hypothesis draws
    an example moved the state under it: the intermittent HypothesisDeprecationWarning "Do
    not use the random module inside strategies" (found by tracing every call of the random
    module in a full run). The pings get a generator of their own."""
    import random
    from importlib import import_module

    for name in ("websockets.asyncio.connection", "websockets.legacy.protocol"):
        try:
            module = import_module(name)
        except ImportError:  # another websockets layout: nothing of ours to do
            continue
        module.random = random.Random()  # type: ignore[attr-defined]


_private_websocket_random()

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated MEMLIFE_HOME with default store and receipts URLs inside it."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMLIFE_STORE", f"sqlite:///{tmp_path / 'home' / 'memlife.db'}")
    monkeypatch.setenv("MEMLIFE_RECEIPTS", f"file://{tmp_path / 'home' / 'receipts'}")
    monkeypatch.chdir(REPO)
    return tmp_path / "home"


@pytest.fixture()
def memory_and_store(home: Path) -> Iterator[tuple[LongTermMemory, SqliteStore]]:
    """The online library's long-term memory over the home's SQLite store, and the store."""
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(home / "memlife.db")
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield m, store
    m.close()
    store.close()


@pytest.fixture()
def offline_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated MEMLIFE_HOME whose default store is its own memlife.db, no model key:
    a night runs offline (the extractive consolidator) on what a test seeds there."""
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test harness (temporary database) for every flow test of the session."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        with prefect_test_harness(server_startup_timeout=120):
            yield


@pytest.fixture(autouse=True)
def _state_url_restored() -> Iterator[None]:
    """A run whose state is a parameter (``run_start.use_state``) sets MEMLIFE_STATE for its
    whole process, as a worker needs: put back after each test, so no later test meets it."""
    saved = os.environ.get("MEMLIFE_STATE")
    yield
    if saved is None:
        os.environ.pop("MEMLIFE_STATE", None)
    else:
        os.environ["MEMLIFE_STATE"] = saved
