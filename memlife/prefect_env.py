"""Quiet, offline Prefect settings, applied before Prefect is imported (flows/ and the CLI).

memlife itself never imports Prefect; this only sets environment defaults, so a user's
own PREFECT_API_URL / profile still wins.
"""

from __future__ import annotations

import os
from pathlib import Path

from memlife.settings import settings

QUIET = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    # the run's log tab: memlife's flow-run logger at INFO goes to the API; the console
    # shows warnings only
    "PREFECT_LOGGING_TO_API_ENABLED": "true",
    "PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL": "INFO",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
    "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "false",
}


def configure(home: str | os.PathLike[str] | None = None) -> None:
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
    if "PREFECT_HOME" not in os.environ:
        base = Path(home or settings().home) / "prefect"
        os.environ["PREFECT_HOME"] = str(base.resolve())
        # the user's own profile (its PREFECT_API_URL) still wins: the CLI chose its engine
        # by it, and Prefect would read it under the new home no more
        profiles = Path("~/.prefect/profiles.toml").expanduser()
        if profiles.is_file():
            os.environ.setdefault("PREFECT_PROFILES_PATH", str(profiles))
