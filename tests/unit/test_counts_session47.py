"""Session 47 (audit 47q): the night's counts against what the store and the journal show.

A run's summary (what `memlife run` prints), its receipt's counts and a dry run's "an apply
run would" column must say what the store shows changed: every processed record in one
outcome (retained, superseded, deleted, quarantined, reviewed, held, failed; `consolidated`
counts the replacements written, no processed record), deleted = records gone,
superseded = records whose status became superseded, consolidated = records written.
Real SQLite stores, the local engine, the real CLI through its typer runner.
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife import fault_points, faults
from memlife.model import MemoryRecord, MemoryType, RetentionClass
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from memlife.would_change import would_change
from tests.fakes.messages_api import MessagesServer
from tests.support.cli import invoke

NOW = datetime(2026, 6, 1, tzinfo=UTC)
OUTCOMES = ("retained", "superseded", "deleted", "quarantined", "reviewed", "held", "failed")
ENFORCED, ROLLOUT = "/users/u-1/facts", "/users/u-1/notes"  # default policy: notes not enforced


def rec(rid: str, ns: str, text: str, *, age: int = 30, **kw: Any) -> MemoryRecord:
    return MemoryRecord(id=rid, actor_id="u-1", namespace=ns, content=text, owner="team-a",
                        memory_type=kw.pop("memory_type", MemoryType.semantic),
                        created_at=NOW - timedelta(days=age), **kw)  # fmt: skip


def seed(home: Path, records: list[MemoryRecord]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as s:
        s.put_many(records)


def statuses(home: Path) -> dict[str, str]:
    with SqliteStore(home / "memlife.db") as s:
        return {r.id: str(r.status) for r in s.iter_all()}


def night(*extra: str, now: datetime = NOW) -> dict[str, Any]:
    code, out, err = invoke("run", "--engine", "local", "--now", now.isoformat(), "--json", *extra)
    assert code == 0, out + err
    return json.loads(out)


def lands(life: dict[str, int]) -> None:
    assert life["processed"] == sum(life[k] for k in OUTCOMES), life


def test_a_rerun_of_a_completed_night_prints_the_counts_its_receipt_holds(home: Path) -> None:
    """The operator runs the night twice at one cutoff (a scheduler's double fire) with no
    evaluation set; the night's one judgement deletion (an episode past its age limit in an
    enforced namespace) is withheld by the gate (GATE_NOT_CONFIGURED): the record stays,
    retained. The rerun commits nothing and names the first run's receipt. Must hold: what
    the rerun prints is what that receipt says (retained 1), and every processed record is
    in an outcome; it printed processed 1, retained 0, every outcome 0."""
    seed(home, [rec("ep", ENFORCED, "Went hiking on the ridge trail.", age=376,
                    memory_type=MemoryType.episodic)])  # fmt: skip
    first = night()
    assert first["lifecycle"]["retained"] == 1 and statuses(home) == {"ep": "active"}
    again = night()
    assert again["other_counts"]["rerun_of_completed_run"] == 1
    assert again["receipt"] == first["receipt"]
    receipt = json.loads(Path(again["receipt"]).read_text())
    assert again["lifecycle"] == receipt["counts"] == first["lifecycle"]
    lands(again["lifecycle"])


@pytest.mark.parametrize("with_set", [False, True], ids=["no-eval-set", "eval-set"])
def test_a_dry_run_does_not_promise_deletions_the_rollout_only_proposes(
    home: Path, tmp_path: Path, with_set: bool
) -> None:
    """A record past its `expires_at` in a namespace where deletion is not enforced (the
    default policy's rollout: `/users/*/notes`). The operator reads the dry run's "an apply
    run would" column before approving the apply run. Must hold: its `delete` figure is what
    the apply run then deletes: 0 (the apply run only proposes it, NOT_ENFORCED); it said 1,
    with or without an evaluation set."""
    seed(home, [rec("n", ROLLOUT, "Went hiking on the ridge trail.",
                    expires_at=NOW - timedelta(days=1))])  # fmt: skip
    extra: tuple[str, ...] = ()
    if with_set:
        cases = tmp_path / "cases.yaml"
        code, out, err = invoke("eval", "init", "-o", str(cases), "--now", NOW.isoformat())
        assert code == 0, out + err
        extra = ("--eval-cases", str(cases))
    dry = night("--dry-run", *extra)
    applied = night(*extra)
    assert applied["other_counts"]["proposed_deletions"] == 1 and statuses(home) == {"n": "active"}
    assert dict(would_change(dry))["delete"] == applied["lifecycle"]["deleted"] == 0


def test_a_rerun_of_a_completed_night_adds_nothing_to_the_metrics(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler fires the same night twice (one cutoff): the second run commits
    nothing ("nothing new was committed"). Must hold: CloudWatch's daily Sum of `deleted`
    is the one deletion the night made, not 2 (the rerun published the counts again)."""
    import boto3
    from moto import mock_aws

    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():  # fmt: skip
        monkeypatch.setenv(k, v)
    seed(home, [rec("x", ENFORCED, "Went hiking.", expires_at=NOW - timedelta(days=1))])
    with mock_aws():
        runs = [run_local(RunConfig(dry_run=False, now=NOW, metrics_namespace="MemLife/Q"))
                for _ in range(2)]  # fmt: skip
        assert runs[1].other["rerun_of_completed_run"] == 1 and statuses(home) == {}
        stats = boto3.client("cloudwatch", region_name="us-east-1").get_metric_statistics(
            Namespace="MemLife/Q", MetricName="deleted", StartTime=NOW - timedelta(hours=1),
            EndTime=NOW + timedelta(hours=23), Period=86400, Statistics=["Sum"],
            Dimensions=[{"Name": "Mode", "Value": "apply"},
                        {"Name": "PolicyVersion", "Value": runs[0].policy_version}],
        )  # fmt: skip
    assert [d["Sum"] for d in stats["Datapoints"]] == [1.0]


def test_a_dry_run_with_a_model_configured_does_not_promise_a_review_item(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> None:
    """A model key is configured. The operator dry-runs the night (no --with-model: no call,
    an estimate) over a probable update ("drinks green tea" -> "does not drink green tea"),
    then applies it; the model answers `update`. Whether the pair goes to the model or to
    the review queue does not depend on the model's answer: a model is configured, so the
    apply run hands it to the model and opens no item. Must hold: the dry run's "left for
    review" is the apply run's `reviewed` (0); it said 1."""
    from tests.unit.test_locomo_model_nights_session47 import answer, with_model

    with_model(monkeypatch, messages_server)
    messages_server.set_handler(answer("update"))
    seed(home, [rec("c", ROLLOUT, "The user drinks green tea.", age=30),
                rec("d", ROLLOUT, "The user does not drink green tea.", age=10)])  # fmt: skip
    dry = night("--dry-run")
    assert messages_server.message_requests == []
    applied = night()
    assert statuses(home)["c"] == "superseded" and applied["lifecycle"]["reviewed"] == 0
    assert dict(would_change(dry))["left for review"] == applied["lifecycle"]["reviewed"]


TEXTS = ("The user lives in Oslo.", "The user lives in Oslo!", "The user drinks green tea.",
         "The user does not drink green tea.", "Went hiking on the ridge trail.")  # fmt: skip
ROW = st.tuples(st.sampled_from([ENFORCED, ROLLOUT]), st.sampled_from(TEXTS),
                st.integers(0, 400), st.booleans(), st.booleans())  # fmt: skip
POINTS = [p for p in fault_points.POINTS if p not in fault_points.IMPORT_POINTS]


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(rows=st.lists(ROW, min_size=1, max_size=6), point=st.sampled_from(POINTS),
       skip=st.integers(0, 1))  # fmt: skip
def test_a_rerun_after_a_crash_counts_what_the_store_shows(
    rows: list[tuple[str, str, int, bool, bool]], point: str, skip: int, tmp_path: Path
) -> None:
    """The adversary kills the night at a checkpoint (any run point, first or second
    passage) over a mix of expired, held, duplicate and contradicting records in enforced
    and rollout namespaces, then the same night runs again. Must hold for the rerun's
    summary and its receipt: every processed record in one outcome, processed = the records
    the night read, deleted = records gone, superseded = records that became superseded,
    consolidated = records written."""
    fresh = Path(tempfile.mkdtemp(dir=tmp_path))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MEMLIFE_HOME", str(fresh))
        env.setenv("MEMLIFE_STORE", f"sqlite:///{fresh / 'memlife.db'}")
        env.setenv("MEMLIFE_RECEIPTS", f"file://{fresh / 'receipts'}")
        seed(fresh, [rec(f"r-{i}", ns, text, age=age,
                         expires_at=NOW - timedelta(days=1) if expired else None,
                         retention_class=RetentionClass.legal_hold if held else "standard")
                     for i, (ns, text, age, expired, held) in enumerate(rows)])  # fmt: skip
        before = statuses(fresh)
        try:
            with faults.inject(point, skip=skip):
                run_local(RunConfig(dry_run=False, now=NOW, workers=1))
        except faults.InjectedFault:
            pass
        else:  # the fault never fired: a rerun of a completed night (the first test above)
            return
        summary = run_local(RunConfig(dry_run=False, now=NOW, workers=1))
    after, life = statuses(fresh), summary.lifecycle
    lands(life)
    assert json.loads(Path(str(summary.receipt)).read_text())["counts"] == life
    assert life["processed"] == len(before)
    assert life["deleted"] == len(set(before) - set(after))
    assert life["consolidated"] == len(set(after) - set(before))
    became = [k for k in before if k in after and before[k] != after[k] == "superseded"]
    assert life["superseded"] == len(became)
