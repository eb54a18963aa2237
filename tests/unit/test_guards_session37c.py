"""Guards left untested by the twenty-fourth audit (session 37): configuration and
orchestration wiring (memlife/settings.py, flows/) and the run report page
(memlife/report_html.py).

Each test names the guard it attacks and the mutant that showed it untested. Real runs over
a real SQLite store (``run_local``), the real receipt sink, the real settings parser: no
mocks of memlife logic. Five tests reproduced a real bug on the code before session 37
(each docstring says "Real bug")."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.audit import open_sink
from memlife.demo import generate
from memlife.errors import SettingsError
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.report_html import Breakdown, history, namespace_pattern, render
from memlife.settings import PREFIX, settings
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
EVIL = "<script>alert(1)</script>"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for key in list(os.environ):
        if key.startswith(PREFIX) or key.startswith("ANTHROPIC_"):
            monkeypatch.delenv(key)
    return monkeypatch


def _seed(path: Path, n: int = 40, seed: int = 11) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with SqliteStore(path) as store:
        store.put_many(list(generate(n, seed=seed, anchor=ANCHOR, markers=True)))


def _run(at: datetime, *, dry: bool = True, store: str | None = None) -> RunSummary:
    return run_local(RunConfig(dry_run=dry, now=at, consolidate=False, workers=1, store=store))


def _page(summary: RunSummary) -> str:
    assert summary.report_html
    return Path(summary.report_html).read_text()


def _cutoffs(receipts: list[dict[str, Any]]) -> list[str]:
    return [str(r.get("cutoff"))[:10] for r in receipts]


# -- the report page: trends ------------------------------------------------------------------


def test_history_keeps_the_latest_n_of_the_mode_oldest_first_without_the_run_itself(
    home: Path,
) -> None:
    """Attacks `memlife/report_html.py::history`: the `len(out) == n` bound (mutant: no
    break: every run came back), the newest-first walk `reversed(prefixes)` (mutant: the
    oldest n), the final `reversed(out)` (mutant: newest first on the chart's x axis) and
    the skip of ``run_id`` itself (mutant: the run counted in its own trend)."""
    _seed(home / "memlife.db")
    runs = [_run(ANCHOR + timedelta(days=d)) for d in range(4)]
    sink = open_sink()
    got = history(sink, "dry_run", runs[-1].run_id, n=2)
    assert _cutoffs(got) == [f"{ANCHOR + timedelta(days=d):%Y-%m-%d}" for d in (1, 2)]
    got = history(sink, "dry_run", runs[1].run_id, n=10)
    assert runs[1].cutoff[:10] not in _cutoffs(got) and len(got) == 3
    # a run folder whose receipt counts nothing (a failed start) is no point of the trend
    folder = "runs/2099/01/01/20990101T000000Z-dry-0000000000"
    sink.put_new(f"{folder}/manifest.json", b"{}", "application/json")
    sink.put_new(f"{folder}/receipt.json", b'{"mode": "dry_run", "cutoff": "2099-01-01"}',
                 "application/json")  # fmt: skip
    assert "2099-01-01" not in _cutoffs(history(sink, "dry_run", runs[0].run_id, n=10))


def test_apply_trends_count_no_dry_run(home: Path) -> None:
    """Attacks `receipt.get("mode") == mode` in `memlife/report_html.py::history`
    (mutant: an apply run's trend drew the dry runs before it as changes made)."""
    _seed(home / "memlife.db")
    _run(ANCHOR)
    _run(ANCHOR + timedelta(days=1))
    html = _page(_run(ANCHOR + timedelta(days=2), dry=False))
    assert "Trends (last 1 runs)" in html and "trends appear after two runs" in html


def test_trends_are_of_the_same_store_only(home: Path, tmp_path: Path) -> None:
    """Real bug: two stores, one receipts sink (MEMLIFE_RECEIPTS shared; run keys and the
    receipts dataset name the store, so this is a supported layout). Store B's first dry
    run showed a two-run trend: store A's run as B's history."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _seed(a, seed=1)
    _seed(b, seed=2)
    _run(ANCHOR, store=f"sqlite:///{a}")
    html = _page(_run(ANCHOR + timedelta(days=1), store=f"sqlite:///{b}"))
    assert "trends appear after two runs" in html
    assert "Trends (last 1 dry runs)" in html


def _figure(html: str, caption: str) -> str:
    return html.split(f"<figcaption>{caption}")[1].split("</figure>")[0]


def test_dry_run_trend_counts_both_kinds_of_delete() -> None:
    """Attacks `delete_expired + delete_pending` in
    `memlife/report_html.py::_trend_series` (mutant: deletes pending a grace period left
    out of the planned-deletes trend)."""
    past = [{"cutoff": "2026-10-31", "planned": {"delete_pending": 1000}, "mode": "dry_run"}]
    summary = {"run_id": "r", "mode": "dry_run", "status": "success", "cutoff": "2026-11-01",
               "counts": {"delete_pending": 1000}}  # fmt: skip
    trend = _figure(render(summary, Breakdown(), past), "planned changes per run")
    assert ">1,000<" in trend


def test_a_blocked_gate_reads_blocked() -> None:
    """Attacks `if gate.get("blocked")` in `memlife/report_html.py::gate_text` (mutant: a
    gate that held the commit back shown as passed)."""
    gate = {"configured": True, "blocked": True, "status": "fail", "gates": {}}
    html = render({"run_id": "r", "mode": "apply", "status": "blocked", "gate": gate},
                  Breakdown(), [])  # fmt: skip
    assert re.search(r'data-figure="gate" class="bad">blocked<', html)


def test_the_namespace_chart_shows_the_top_rows_only() -> None:
    """Attacks `ns_rows[:TOP]` in `memlife/report_html.py::render` (mutant: every pattern a
    row: a store of thousands of namespaces made a page thousands of bars tall)."""
    from memlife.report_html import TOP

    detail = Breakdown(by_namespace={f"/n{i:02d}": Counter(retain=100 - i) for i in range(20)})
    html = render({"run_id": "r", "mode": "apply", "status": "success"}, detail, [])
    chart = _figure(html, "records by namespace pattern")
    assert len(re.findall(r'class="l">/n\d\d<', chart)) == TOP
    assert 'class="l">/n00<' in chart and f'class="l">/n{TOP:02d}<' not in chart


# -- the report page: no ids ------------------------------------------------------------------


def test_a_session_id_right_after_the_actor_is_masked() -> None:
    """Real bug: the summary strategy's namespace template ``/summaries/{actorId}/{sessionId}``
    (the AgentCore pattern allows it) left the session id on the page: ids must never
    appear, and every session became its own row of the namespace chart."""
    detail = Breakdown(
        by_namespace={namespace_pattern("u-1", "/summaries/u-1/sess-4f2a"): Counter(retain=2)}
    )
    html = render({"run_id": "r", "mode": "apply", "status": "success"}, detail, [])
    assert "sess-4f2a" not in html


def test_namespace_keys_are_matched_without_case_underscores_or_dashes() -> None:
    """Attacks `.lower().replace("_", "").replace("-", "")` in
    `memlife/report_html.py::namespace_pattern` (mutant: `/Sessions/...`, `/session_id/...`
    and `/actor-id/...` kept the id after them)."""
    assert namespace_pattern("", "/Sessions/s-9/x") == "/Sessions/*/x"
    assert namespace_pattern("", "/session_id/s-9") == "/session_id/*"
    assert namespace_pattern("u-1", "/t/actor-id/a-7/u-1") == "/t/actor-id/*/*"


# -- the report page: every value escaped ------------------------------------------------------


def test_every_string_from_the_run_is_escaped() -> None:
    """Attacks each `escape(...)` of `memlife/report_html.py::render` and its helpers whose
    mutant the escaping test left alive: action keys in the stacked chart's titles and the
    legend (`escape(k)`), trend labels (`escape(lab)`), card values (`escape(shown)`), gate
    names (`escape(name)`) and reasons, model rejection keys (`escape(str(k))`)."""
    evil = EVIL
    detail = Breakdown(by_namespace={"/n": Counter({evil: 2, "retain": 1})})
    past = [{"cutoff": evil, "counts": {"deleted": 1}, "mode": "apply"}]
    summary = {
        "run_id": "r",
        "mode": "apply",
        "status": evil,
        "records": 3,
        "cutoff": "2026-11-02T00:00:00+00:00",
        "counts": {"retain": 3},
        "lifecycle": {"deleted": 1},
        "model": {"calls": 1, "rejections": {evil: 1}},
        "gate": {"configured": True, "status": "pass", "reasons": [evil],
                 "gates": {evil: {"before": 1, "value": 1, "threshold": 1, "passed": True}}},
        "failed_shards": [{"shard": "s", "code": evil}],
    }  # fmt: skip
    html = render(summary, detail, past)
    assert "<script" not in html
    assert html.count("&lt;script&gt;") >= 7


def test_status_card_marks_anything_but_success_bad() -> None:
    """Attacks `"ok" if status == "success" else "bad"` in `memlife/report_html.py::render`
    (mutant: a partial failure's status card shown in the success colour)."""
    html = render({"run_id": "r", "mode": "apply", "status": "partial_failure"}, Breakdown(), [])
    assert re.search(r'data-figure="status" class="bad">partial_failure<', html)
    html = render({"run_id": "r", "mode": "apply", "status": "success"}, Breakdown(), [])
    assert re.search(r'data-figure="status" class="ok">success<', html)


# -- settings ----------------------------------------------------------------------------------


def test_a_misspelled_fault_mode_is_an_error(clean_env: pytest.MonkeyPatch) -> None:
    """Real bug (drills): ``MEMLIFE_FAULT_MODE=kil`` was accepted and the armed point raised
    InjectedFault instead of killing the process: a crash drill tested a clean exception
    path and passed. The field is documented as raise, kill or hang."""
    clean_env.setenv("MEMLIFE_FAULT_MODE", "kil")
    with pytest.raises(SettingsError, match="MEMLIFE_FAULT_MODE"):
        settings()


def test_a_blank_operator_never_names_nobody(clean_env: pytest.MonkeyPatch) -> None:
    """Real bug: `env_ignore_empty` drops only "", so ``MEMLIFE_OPERATOR='   '`` (an unset
    template in a job definition) became the reviewer identity of erasures and hold
    releases: receipts.operator_identity promises it "never names nobody"."""
    from memlife.receipts import operator_identity

    clean_env.setenv("MEMLIFE_OPERATOR", "   ")
    try:
        who = operator_identity()
    except SettingsError:
        return
    assert who.strip()


def test_a_misspelled_variable_is_an_error(clean_env: pytest.MonkeyPatch) -> None:
    """Real bug: ``MEMLIFE_LEASE_TTL_SECOND=30`` (the trailing S forgotten) was ignored and
    the lease stayed 120 s; no message said the variable is not one memlife reads. The
    deploy-only variables (deploy/: MEMLIFE_WORKDIR, MEMLIFE_TIMEZONE, ...) are a known list."""
    clean_env.setenv("MEMLIFE_LEASE_TTL_SECOND", "30")
    with pytest.raises(SettingsError, match="MEMLIFE_LEASE_TTL_SECOND"):
        settings()


# -- flows: what a run tells Prefect -----------------------------------------------------------


def _summary(status: str, **kw: Any) -> RunSummary:
    base: dict[str, Any] = dict(
        run_id="20261101T000000Z-apply-0123456789", policy_version="v1",
        cutoff="2026-11-01T00:00:00+00:00", mode="apply", status=status,
        counts={"retain": 2}, lifecycle={"deleted": 1}, records=3, shards=2, report="r.jsonl",
        report_parquet="r.parquet", manifest="m.json", receipt="receipt.json", seconds=1.0,
    )  # fmt: skip
    return RunSummary(**{**base, **kw})


def test_a_successful_run_emits_no_event_and_a_blocked_one_its_own() -> None:
    """Attacks `if summary.status == "success": return None` and the status -> event map
    in `flows/events.py::run_event` (mutants: every night alerted; a gate-blocked night
    reported as a partial failure)."""
    from flows import events

    assert events.run_event(_summary("success")) is None
    blocked = events.run_event(_summary("blocked", gate={"status": "blocked"}))
    assert blocked is not None and blocked[0] == events.EVENT_BLOCKED
    partial = events.run_event(_summary("partial_failure"))
    assert partial is not None and partial[0] == events.EVENT_PARTIAL
    assert partial[2]["cutoff"] == "2026-11-01T00:00:00+00:00"
    assert partial[2]["run_id"] == "20261101T000000Z-apply-0123456789"


def test_the_event_carries_shard_names_and_gate_figures_never_their_detail() -> None:
    """Attacks the picks in `flows/events.py::run_event`: failed shards by name
    (`[s["shard"] ...]`; mutant: the whole entry, whatever it holds) and each gate's
    value/threshold/before/result (mutant: the gate entry as it is)."""
    from flows import events

    summary = _summary(
        "partial_failure",
        failed_shards=[{"shard": "u-1|/users/u-1/facts", "code": "THROTTLED", "detail": EVIL}],
        gate={"status": "warn", "gates": {"recall": {"value": 0.9, "threshold": 0.8,
              "before": 0.91, "result": "pass", "examples": [EVIL]}}},
    )  # fmt: skip
    event = events.run_event(summary)
    assert event is not None
    payload = event[2]
    assert EVIL not in repr(payload)
    assert payload["failed_shards"] == ["u-1|/users/u-1/facts"]
    assert payload["failed_shard_codes"] == {"u-1|/users/u-1/facts": "THROTTLED"}
    assert payload["gate"]["gates"]["recall"] == {
        "value": 0.9, "threshold": 0.8, "before": 0.91, "result": "pass"
    }  # fmt: skip


def test_failure_and_refusal_events_carry_the_error_type_never_its_message() -> None:
    """Attacks `type(error).__name__` in `flows/events.py::failure_event` and
    `::refused_event` (mutants: the message, which may quote a memory or a path)."""
    from types import SimpleNamespace

    from flows import events

    error = ValueError(f"could not parse {EVIL}")
    ctx = SimpleNamespace(run_id="r-1", mode="apply", policy=SimpleNamespace(version="v1"),
                          cutoff=ANCHOR)  # fmt: skip
    name, resource, payload = events.failure_event(ctx, error, "runs/x/receipt.json")  # type: ignore[arg-type]
    assert name == events.EVENT_FAILURE and payload["error"] == "ValueError"
    assert EVIL not in repr((resource, payload)) and payload["cutoff"] == ANCHOR.isoformat()
    name, resource, payload = events.refused_event(RunConfig(dry_run=True), error)
    assert name == events.EVENT_FAILURE and payload["error"] == "ValueError"
    assert payload["mode"] == "dry_run" and EVIL not in repr((resource, payload))


# -- flows: limits -----------------------------------------------------------------------------


def test_only_a_model_calling_consolidator_holds_the_limit_and_answers_pass_through() -> None:
    """Attacks `flows/limits.py::limited` (mutants: the extractive consolidator wrapped;
    nothing wrapped, so model calls ignore the global limit) and
    `LimitedConsolidator.consolidate` (mutant: the run's kept answers dropped)."""
    from flows import limits
    from memlife.consolidate.extractive import ExtractiveConsolidator

    extractive = ExtractiveConsolidator()
    assert limits.limited(extractive) is extractive
    assert limits.limited(None) is None

    class Remembering:
        name = "remembering"
        keeps_answers = True

        def __init__(self) -> None:
            self.seen: list[Any] = []

        def consolidate(self, group: Any, answers: Any = None) -> Any:
            self.seen.append(answers)
            return "result"

    inner = Remembering()
    wrapped = limits.limited(inner)
    assert isinstance(wrapped, limits.LimitedConsolidator) and wrapped.inner is inner
    book = object()
    result: Any = wrapped.consolidate("group", answers=book)  # type: ignore[arg-type]
    assert result == "result"
    assert inner.seen == [book]


def test_the_retry_options_follow_the_settings(clean_env: pytest.MonkeyPatch) -> None:
    """Attacks `flows/limits.py::retrying` (mutants: retries, backoff factor or jitter taken
    from a constant instead of MEMLIFE_TASK_RETRIES / _RETRY_BACKOFF_SECONDS / _RETRY_JITTER)."""
    from flows import limits
    from memlife import throttling

    clean_env.setenv("MEMLIFE_TASK_RETRIES", "2")
    clean_env.setenv("MEMLIFE_RETRY_BACKOFF_SECONDS", "3")
    clean_env.setenv("MEMLIFE_RETRY_JITTER", "0.25")
    opts = limits.retrying()
    assert opts["retries"] == 2 and opts["retry_jitter_factor"] == 0.25
    assert opts["retry_delay_seconds"] == throttling.backoff_delays(2, 3.0)
    assert opts["retry_delay_seconds"] != throttling.backoff_delays(2, 10.0)
    assert limits.TASK_RETRIES == 2 and limits.RETRY_BACKOFF_SECONDS == 3.0


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
def test_an_unbounded_factor_refuses_inf_and_nan(clean_env: pytest.MonkeyPatch, value: str) -> None:
    """Attacks `allow_inf_nan=False` in `memlife/settings.py::Settings` (mutant: allowed).
    MEMLIFE_RETRY_JITTER has a lower bound only, so nothing else refuses ``inf``: Prefect
    then draws a retry delay from an infinite clamp."""
    clean_env.setenv("MEMLIFE_RETRY_JITTER", value)
    with pytest.raises(SettingsError, match="MEMLIFE_RETRY_JITTER"):
        settings()


@pytest.mark.parametrize(
    ("var", "value", "words"),
    [
        ("MEMLIFE_STORE", "sqlite:///m.db#frag", "no query string or fragment"),
        ("MEMLIFE_STORE", "sqlite:///", "expected sqlite:///path"),
        ("MEMLIFE_STORE", "sqlit:///m.db", "use sqlite:///"),
        ("MEMLIFE_S3_ENDPOINT_URL", " http://127.0.0.1:9000", "expected an http(s) URL"),
        ("MEMLIFE_S3_ENDPOINT_URL", "http://", "expected an http(s) URL"),
        ("MEMLIFE_MODEL_CONCURRENCY", "0", "greater than or equal to 1"),
        ("MEMLIFE_RETRY_JITTER", "-0.5", "greater than or equal to 0"),
        ("MEMLIFE_MODEL_TIMEOUT", "0", "greater than 0"),
        ("MEMLIFE_FLOW_TIMEOUT_SECONDS", "0", "greater than 0"),
        ("MEMLIFE_TASK_RETRIES", "11", "less than or equal to 10"),
        ("MEMLIFE_RETRY_BACKOFF_SECONDS", "3601", "less than or equal to 3600"),
        ("MEMLIFE_LEASE_TTL_SECONDS", "86401", "less than or equal to 86400"),
        ("MEMLIFE_NAMESPACE", "/users/{user}/facts", "placeholder"),
        ("MEMLIFE_NAMESPACE", "/users/$ACTOR/facts", "placeholder"),
        ("MEMLIFE_NAMESPACE", "/users/{actor}/../facts", "namespace template"),
    ],
)
def test_a_bad_value_is_refused_in_its_own_words(
    clean_env: pytest.MonkeyPatch, var: str, value: str, words: str
) -> None:
    """Attacks the bounds and validators of `memlife/settings.py::Settings` one by one (the
    '#' of a sqlite URL, an empty path, the endpoint's surrounding space and missing host,
    `ge`/`gt`/`le` of the counts and spans, each namespace-template check) and the message
    of `_parse` (mutant: a generic message without the validator's words)."""
    clean_env.setenv(var, value)
    with pytest.raises(SettingsError) as info:
        settings()
    assert str(info.value).startswith(f"{var}: ") and words in str(info.value)


def test_a_changed_sdk_variable_is_seen_without_a_memlife_one_changing(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """Attacks `or k in _FOREIGN` in `memlife/settings.py::_relevant_environment` and the
    key of `settings()` (mutants: the cached settings kept the old API key after
    ANTHROPIC_API_KEY was set, so `memlife run --with-model` said no key was set)."""
    assert settings().anthropic_api_key is None
    clean_env.setenv("ANTHROPIC_API_KEY", "sk-test")
    key = settings().anthropic_api_key
    assert key is not None and key.get_secret_value() == "sk-test"
    clean_env.setenv("MEMLIFE_DEBUG", "true")
    assert settings().debug is True


def test_the_flow_pins_its_cutoff_to_the_flow_runs_scheduled_start(
    home: Path, prefect_harness: Any
) -> None:
    """Attacks `operator_config(config, flow_run.scheduled_start_time)` in
    `flows/nightly.py::nightly` (mutant: no schedule passed: the cutoff became the clock at
    the pipeline's start, so a retry of the same flow run was a new run at a later cutoff).
    The existing test checks operator_config alone, never what the flow hands it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort

    from flows.nightly import nightly

    _seed(home / "memlife.db")
    result: Any = nightly({"dry_run": True, "consolidate": False})  # type: ignore[call-overload]
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(sort=FlowRunSort.START_TIME_DESC, limit=1)
    scheduled = runs[0].expected_start_time
    assert scheduled is not None
    assert datetime.fromisoformat(result["cutoff"]) == scheduled
