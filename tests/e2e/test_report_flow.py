"""Under Prefect: the run's log tab shows the stages, and a link artifact points at the page."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from memlife.demo import generate
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)


def test_flow_logs_and_links_the_report(home: Path, prefect_harness) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterKey,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.client.schemas.sorting import ArtifactSort
    from prefect.logging.handlers import APILogHandler

    from flows.nightly import nightly

    home.mkdir(parents=True, exist_ok=True)
    records = list(generate(120, seed=4, anchor=ANCHOR, markers=True))
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(records)
    from prefect.settings import PREFECT_LOGGING_TO_API_ENABLED, temporary_settings

    # what memlife.prefect_env sets before Prefect loads; this session loaded it earlier
    runs_logger = logging.getLogger("prefect.flow_runs")
    level = runs_logger.level
    runs_logger.setLevel(logging.INFO)
    try:
        with temporary_settings({PREFECT_LOGGING_TO_API_ENABLED: True}):
            state = nightly(
                {"dry_run": True, "now": ANCHOR.isoformat(), "consolidate": False},
                return_state=True,
            )
            APILogHandler().flush()  # send the queued logs before reading them back
    finally:
        runs_logger.setLevel(level)
    result = state.result()
    flow_run_id = state.state_details.flow_run_id

    page = Path(result["report_html"])
    assert page.exists() and page.name == "report.html"
    with get_client(sync_client=True) as client:
        links = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["memlife-report"])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
        summaries = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["memlife-summary"])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
        logs = client.read_logs(
            log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        )
    assert links and page.resolve().as_uri() in str(links[0].data)  # a link artifact (markdown)
    assert "an apply run would" in str(summaries[0].data)
    text = "\n".join(log.message for log in logs)
    assert f"planned {len(records)} records" in text and "regression gate: not configured" in text
    assert f"run {result['run_id']}: success" in text
    for r in records:  # the log tab carries no content
        assert r.content not in text


def test_quiet_settings_still_fill_the_log_tab(monkeypatch) -> None:
    from memlife import prefect_env

    for key in prefect_env.QUIET:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PREFECT_HOME", "/tmp/unused-prefect-home")
    prefect_env.configure()
    import os

    assert os.environ["PREFECT_LOGGING_TO_API_ENABLED"] == "true"
    assert os.environ["PREFECT_LOGGING_LOGGERS_PREFECT_FLOW_RUNS_LEVEL"] == "INFO"
    assert os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "WARNING"
