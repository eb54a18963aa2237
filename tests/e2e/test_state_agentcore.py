"""``memlife run --store agentcore://… --state dynamodb://…``: the run's state lives in
DynamoDB and S3 (moto), nothing of it on the worker's disk, and the next run on a fresh
worker (empty MEMLIFE_HOME) finds it: same run, nothing redone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import memlife.state as state_mod
from memlife.cli import app
from memlife.demo import generate
from memlife.journal import OpKind, OpState
from memlife.journal.dynamodb import DynamoJournal
from memlife.review_queue.base import OPEN_STATES
from memlife.review_queue.dynamodb import DynamoReviews
from tests.fakes.agentcore import AgentCoreHarness
from tests.support.aws_state import provision, state_url
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases

runner = CliRunner()


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture()
def env(harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.setenv("MEMLIFE_STATE", "local")  # recorded, so the CLI's --state is undone after
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    harness.store().close = lambda: None  # type: ignore[method-assign]  # fresh memory + sidecar
    query = {"region": "us-east-1", "endpoint_url": harness.fake.endpoint_url,
             "sidecar_table": harness.sidecar_table}  # fmt: skip
    url = f"agentcore://{harness.fake.memory_id}?{urlencode(query)}"
    table = f"state-{tmp_path.name}"[:200]
    surl = state_url(table)
    state = provision(surl)  # under the harness' moto: the same in-process AWS
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="receipts")
    monkeypatch.setattr(state_mod, "_open", {})  # every "worker" opens its own clients
    return {"url": url, "state_url": surl, "state": state, "fake": harness.fake, "tmp": tmp_path,
            "s3": s3, "receipts": "s3://receipts/memlife"}  # fmt: skip


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def run_on_fresh_worker(env: dict, monkeypatch: pytest.MonkeyPatch, name: str, *extra: str) -> dict:
    home = env["tmp"] / name
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setattr(state_mod, "_open", {})
    code, out = cli("run", "--engine", "local", "--now", CUTOFF.isoformat(), "--store", env["url"],
                    "--state", env["state_url"], "--receipts", env["receipts"], "--json", *extra)  # fmt: skip
    assert code == 0, out
    assert files_under(home) == [], f"run state left on the worker: {files_under(home)}"
    return json.loads(out)


def test_apply_run_keeps_no_state_on_the_worker(env: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    records = list(generate(150, seed=5, anchor=ANCHOR, markers=True))
    src = env["tmp"] / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in records))
    monkeypatch.setenv("MEMLIFE_HOME", str(env["tmp"] / "importer"))
    assert cli("import", str(src), "--store", env["url"], "--json")[0] == 0

    # the gate is required where deletion is enforced: with a set, consolidation goes ahead
    cases = gate_cases(env["tmp"] / "cases.db", records, env["tmp"] / "cases.yaml")
    first = run_on_fresh_worker(env, monkeypatch, "worker-1", "--eval-cases", cases)
    assert first["mode"] == "apply" and first["status"] == "success"
    life = first["lifecycle"]
    assert life["deleted"] > 0 and life["consolidated"] > 0 and life["processed"] == 150
    # the journal is in DynamoDB: every operation of the run, receipted
    journal = DynamoJournal(env["state"])
    ops = journal.by_run(first["run_id"])
    assert len(ops) == life["deleted"] + life["superseded"] + life["consolidated"]
    assert {o.state for o in ops} == {OpState.RECEIPTED}
    assert journal.due(CUTOFF) == []
    # the report is Parquet on S3, partitioned by date
    assert first["report_parquet"].startswith(
        "s3://memlife-state/parts/reports/date=2026-11-01/run_id="
    )
    assert "/attempt=" in first["report_parquet"]
    bucket, _, key = first["report_parquet"][5:].partition("/")
    body = env["s3"].get_object(Bucket=bucket, Key=key)["Body"].read()
    rows = pq.read_table(pa.BufferReader(body)).num_rows
    assert rows == first["records"] == 150
    # embeddings computed for consolidation are cached in the state table, not on disk
    cached = [i for r in records for i in env["state"].query(f"emb#{r.sha256}")]
    assert cached and all("vector" in i for i in cached)

    # a second worker with an empty home reruns the same run: it resumes, redoes nothing
    before = {k: dict(v) for k, v in env["fake"].records.items()}
    queue_before = DynamoReviews(env["state"]).list(OPEN_STATES)
    second = run_on_fresh_worker(env, monkeypatch, "worker-2", "--eval-cases", cases)
    assert second["run_id"] == first["run_id"]
    assert env["fake"].records == before
    assert {o.operation_id for o in journal.by_run(first["run_id"])} == {
        o.operation_id for o in ops
    }
    # the review queue is in the state table too: the rerun finds the night's items (carried,
    # not opened again), and a reviewer on a third machine lists and resolves them
    opened = first["other_counts"]["review_opened"]
    assert opened > 0 and second["other_counts"]["review_carried"] == opened
    # the rerun plans the store as the run left it but opens no item about the run's own
    # replacements (a stronger, older statement in review disagrees with one: the next
    # night opens that), so the queue is as the first attempt left it
    written = {o.record_id for o in ops if o.kind is OpKind.write_replacement}
    assert written and second["other_counts"].get("review_opened", 0) == 0
    assert DynamoReviews(env["state"]).list(OPEN_STATES) == queue_before
    reviewer_home = env["tmp"] / "reviewer"
    monkeypatch.setenv("MEMLIFE_HOME", str(reviewer_home))
    monkeypatch.setenv("MEMLIFE_STATE", env["state_url"])
    monkeypatch.setattr(state_mod, "_open", {})
    code, out = cli("review", "list", "--store", env["url"], "--json")
    items = json.loads(out)
    assert code == 0 and len(items) == opened and {i["nights"] for i in items} == {1}
    assert not any(i["record_id"] in written for i in items)
    # (a manual run: its lease is in the state table too)
    done = runner.invoke(app, ["review", "resolve", items[0]["item_id"], "--decision", "dispute",
                               "--reviewer", "cy", "--store", env["url"], "--receipts",
                               env["receipts"], "--json"])  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["item"]["state"] == "disputed"
    assert files_under(reviewer_home) == [], files_under(reviewer_home)


def test_a_worker_that_kept_a_dry_runs_cache_deletes_and_receipts(
    env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review (session 16): a worker whose home holds a dry run's cache file (an earlier
    local dry run on the machine) raised AttributeError on every delete with the state in
    DynamoDB (that cache has no file path), after the record was gone: no receipt, and
    again every night."""
    from memlife.embed_cache import EmbeddingCache

    records = list(generate(150, seed=5, anchor=ANCHOR, markers=True))
    src = env["tmp"] / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in records))
    monkeypatch.setenv("MEMLIFE_HOME", str(env["tmp"] / "importer"))
    assert cli("import", str(src), "--store", env["url"], "--json")[0] == 0
    home = env["tmp"] / "worker-with-a-dry-run"
    EmbeddingCache(path=home / "embeddings.db").close()
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setattr(state_mod, "_open", {})
    code, out = cli("run", "--engine", "local", "--now", CUTOFF.isoformat(), "--store", env["url"],
                    "--state", env["state_url"], "--receipts", env["receipts"], "--json")  # fmt: skip
    assert code == 0, out
    run = json.loads(out)
    assert run["status"] == "success" and run["lifecycle"]["deleted"] > 0
    assert {o.state for o in DynamoJournal(env["state"]).by_run(run["run_id"])} == {
        OpState.RECEIPTED
    }


def test_bad_state_url_is_refused_before_anything_starts(env: dict, monkeypatch) -> None:
    monkeypatch.setenv("MEMLIFE_HOME", str(env["tmp"] / "w"))
    code, out = cli("run", "--engine", "local", "--store", env["url"], "--state",
                    "dynamodb://t?region=us-east-1", "--json")  # fmt: skip
    assert code == 2
    assert not env["fake"].ops("update") and not env["fake"].ops("delete")


def test_the_nightly_apply_run_compacts_closed_ledger_days(
    env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Online workers leave one small ledger part per flush; the nightly apply run folds the
    days before its cutoff (under its lease), leaves the cutoff's day open, counts nothing
    twice. A dry run folds nothing."""
    from datetime import timedelta

    from memlife.state.ledger import S3AccessLedger

    records = list(generate(20, seed=3, anchor=ANCHOR))
    src = env["tmp"] / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in records))
    monkeypatch.setenv("MEMLIFE_HOME", str(env["tmp"] / "importer"))
    assert cli("import", str(src), "--store", env["url"], "--json")[0] == 0
    ledger = S3AccessLedger(env["state"])
    for i, at in enumerate([CUTOFF - timedelta(days=2, hours=h) for h in (1, 2, 3)] +
                           [CUTOFF - timedelta(days=1, hours=1), CUTOFF - timedelta(hours=1),
                            CUTOFF - timedelta(hours=2)]):  # fmt: skip
        r = records[i]
        ledger.append(r.actor_id, r.namespace, r.id, rank=1, at=at)
        ledger.flush()  # one part each, as six online workers would leave
    stats = ledger.access_stats()
    days = lambda: sorted(k.split("/")[-2][5:] for k in ledger.files())  # noqa: E731
    assert days() == ["2026-10-30"] * 3 + ["2026-10-31"] + ["2026-11-01"] * 2

    dry = run_on_fresh_worker(env, monkeypatch, "dry", "--dry-run")
    assert "ledger_parts_compacted" not in dry["other_counts"] and len(days()) == 6
    done = run_on_fresh_worker(env, monkeypatch, "worker")
    assert done["other_counts"]["ledger_parts_compacted"] == 3  # 10-30's three; 10-31 has one
    assert days() == ["2026-10-30", "2026-10-31", "2026-11-01", "2026-11-01"]
    assert S3AccessLedger(env["state"]).access_stats() == stats  # every access, once


def test_erasure_and_a_hold_release_on_agentcore_with_state_in_dynamodb(
    env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Erasure crashed on this path after deleting the record (the DynamoDB embedding cache
    was asked for its length by an `or`): the operation stayed PLANNED, no receipt. Then a
    held tainted replacement, released, is rebuilt from its kept source (session 11)."""
    from memlife.erase import erase, pending_erasures, release_hold
    from memlife.journal import open_journal
    from memlife.model import MemoryRecord, MemoryType, Provenance, RetentionClass, Status
    from memlife.stores import open_store

    monkeypatch.setenv("MEMLIFE_HOME", str(env["tmp"] / "eraser"))
    monkeypatch.setenv("MEMLIFE_STATE", env["state_url"])

    def r(rid: str, content: str, **kw: object) -> MemoryRecord:
        base = dict(id=rid, actor_id="u-1", namespace="/users/u-1/facts", subject="city",
                    memory_type=MemoryType.semantic, content=content, created_at=ANCHOR)  # fmt: skip
        return MemoryRecord(**(base | kw))  # type: ignore[arg-type]

    store = open_store(env["url"])
    store.put_many([
        r("m-x", "Was treated for depression in 2025.", subject="health"),
        r("m-a", "The user lives in Berlin.", status=Status.superseded,
          provenance=Provenance(replaced_by="r-1")),
        r("m-b", "The user lives in Berlin, Germany.", status=Status.superseded,
          provenance=Provenance(replaced_by="r-1")),
        r("r-1", "The user lives in Berlin.", retention_class=RetentionClass.legal_hold,
          provenance=Provenance(supersedes=["m-a", "m-b"])),
    ])  # fmt: skip
    out = erase(store, "u-1", ids=["m-x"], receipts=env["receipts"], now=CUTOFF)
    assert out["status"] == "success" and out["erased"] == ["m-x"]
    assert store.get("m-x") is None
    assert {o.state for o in open_journal(store).for_record("m-x")} == {OpState.RECEIPTED}
    out = erase(store, "u-1", ids=["m-a"], receipts=env["receipts"], now=CUTOFF)
    assert out["deferred"] == ["r-1"] and [p["record_id"] for p in pending_erasures(store)] == [
        "r-1"
    ]
    done = release_hold(store, ["r-1"], receipts=env["receipts"], now=CUTOFF)
    assert [(e["erased"], e["rebuilt"]) for e in done["erasures"]] == [([], ["r-1"])]
    assert store.get("m-b").status is Status.superseded  # type: ignore[union-attr]
    assert store.get("r-1").provenance.supersedes == ["m-b"]  # type: ignore[union-attr]
    assert pending_erasures(store) == []
