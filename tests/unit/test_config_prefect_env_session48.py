"""Session 48 (audit 48vii): Prefect's settings as memlife's entry points leave them.

`memlife run` picks its engine by reading the user's Prefect profile (PREFECT_API_URL of
the active profile in ~/.prefect/profiles.toml); `prefect_env.configure` then points
PREFECT_HOME under MEMLIFE_HOME before Prefect is imported, and Prefect looks for the
profiles there. Checked in a child process with a home of its own: the real Prefect reads
its settings once, at import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlife.prefect_env import QUIET
from tests.conftest import REPO

QUIET_KEYS = tuple(QUIET)

CHILD = """
from memlife.cli.common import prefect_api_url
from memlife.prefect_env import configure
chosen = prefect_api_url()  # what `memlife run` prints as 'engine: prefect (Prefect API ...)'
configure()                  # what run_flow and flows/*.py do before importing Prefect
from prefect.settings import get_current_settings
print(chosen, get_current_settings().api.url)
"""


def test_the_users_prefect_profile_still_wins_after_configure(tmp_path: Path) -> None:
    """Adversary: an operator whose Prefect profile (``prefect profile use team``, no
    environment variable) names the team's server runs `memlife run`. Must hold: the flow
    talks to the API the CLI announced (prefect_env's own promise: "a user's own
    PREFECT_API_URL / profile still wins"). Today the CLI prints
    ``engine: prefect (Prefect API http://127.0.0.1:9/api)`` and the run completes on a
    temporary server under MEMLIFE_HOME: the team's server never sees it (no UI, no
    model-call limit, no automation)."""
    user = tmp_path / "user"
    (user / ".prefect").mkdir(parents=True)
    (user / ".prefect" / "profiles.toml").write_text(
        'active = "team"\n\n[profiles.team]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
    )
    drop = ("PREFECT_HOME", "PREFECT_API_URL", "PREFECT_PROFILES_PATH", "PREFECT_PROFILE")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MEMLIFE_")}
    env.update(HOME=str(user), MEMLIFE_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300, check=True)  # fmt: skip
    chosen, used = out.stdout.split()
    assert chosen == "http://127.0.0.1:9/api"  # the CLI read the profile
    assert used == chosen, out.stderr[-2000:]


def test_configure_fills_defaults_and_never_overrides_the_users_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: an operator who set Prefect's variables on purpose (DEBUG logs, their own
    PREFECT_HOME, analytics as their organisation decides) starts `memlife run` or imports
    the flows. Must hold: configure() only fills what is unset (prefect_env's promise: "a
    user's own PREFECT_API_URL / profile still wins"). Kills two mutations: ``setdefault``
    written as an assignment, and the ``PREFECT_HOME`` guard dropped."""
    from memlife import prefect_env

    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "DEBUG")
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "true")
    monkeypatch.delenv("PREFECT_RESULTS_PERSIST_BY_DEFAULT", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "mine"))
    prefect_env.configure(home=tmp_path / "memlife-home")
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "DEBUG"
    assert os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] == "true"
    assert os.environ["PREFECT_RESULTS_PERSIST_BY_DEFAULT"] == "false"  # unset: filled
    assert os.environ["PREFECT_HOME"] == str(tmp_path / "mine")


def test_configure_puts_an_unset_prefect_home_under_memlife_home_as_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: the default, relative MEMLIFE_HOME (``.memlife``) and a process that
    changes directory after configure() (a worker's flow run, a test, a notebook). Must
    hold: PREFECT_HOME is the absolute folder under MEMLIFE_HOME, so the temporary server's
    database stays in one place. Kills ``base.resolve()`` written as ``base``."""
    from memlife import prefect_env

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    prefect_env.configure(home=".memlife")
    assert os.environ["PREFECT_HOME"] == str(tmp_path / ".memlife" / "prefect")


@pytest.mark.parametrize("module", ["flows.limits", "flows.nightly", "flows.shard", "flows.events"])
def test_every_flows_module_is_quiet_before_prefect_loads(module: str, tmp_path: Path) -> None:
    """Adversary: a deployment's own code (or a test) imports one flows module first, e.g.
    ``from flows.limits import LimitedConsolidator``. Must hold: Prefect loads with the quiet,
    offline settings (DO_NOT_TRACK, no server analytics), as DESIGN.md and prefect_env's
    docstring say for flows/. Prefect reads its settings when it is imported: set later,
    they no longer count. limits.py imported ``prefect.concurrency`` straight away (fixed in
    session 48)."""
    code = (
        "import os, sys\n"
        f"import {module}\n"
        "from prefect.settings import get_current_settings\n"
        "print(os.environ.get('DO_NOT_TRACK'), get_current_settings().server.analytics_enabled)\n"
    )
    drop = {*QUIET_KEYS, "PREFECT_HOME"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MEMLIFE_")}
    env.update(MEMLIFE_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=300, check=True)  # fmt: skip
    assert out.stdout.split() == ["1", "False"], out.stderr[-2000:]
