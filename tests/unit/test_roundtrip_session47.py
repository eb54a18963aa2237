"""Session 47 (audit 47e): export / import round trips attacked as an operator would run
them (README's migration: `export -o --erasures --access`, then `import --erasures
--access`), through the real `memlife` CLI on the embedded SQLite store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlife import state as state_mod
from memlife.cli import app
from memlife.dispute_export import Dispute, carry_disputes
from memlife.erase import pending_erasures
from memlife.errors import InputError
from memlife.journal import OpKind, open_journal
from memlife.review_queue import ReviewQueue, item_id
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import CREDENTIALS, provision, state_url
from tests.support.records import good
from tests.unit.test_guards_session35 import NS, T0, finding, rec
from tests.unit.test_import_export import write_jsonl


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def _ok(runner: CliRunner, *args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def _held_erasure_exported(runner: CliRunner, tmp_path: Path) -> tuple[Path, Path]:
    """A store whose held m-h had an erasure asked for (deferred by its hold), exported
    with its erasures: (records file, erasures file)."""
    old = f"sqlite:///{tmp_path / 'old.db'}"
    src = write_jsonl(tmp_path / "a.jsonl", [
        json.dumps(good("m-h", content="Held secret.", retention_class="legal_hold")),
        json.dumps(good("m-k", content="Kept fact.")),
    ])  # fmt: skip
    _ok(runner, "import", str(src), "--store", old)
    _ok(runner, "erase", "--actor", "u-1", "--id", "m-h", "--yes", "--store", old)
    records, erasures = tmp_path / "all.jsonl", tmp_path / "e.jsonl"
    _ok(runner, "export", "--store", old, "-o", str(records), "--erasures", str(erasures))
    return records, erasures


def _deferrals(home: Path) -> list[Path]:
    return sorted((home / "receipts").rglob("deferrals/*.json"))


def test_importing_the_same_erasures_twice_defers_the_held_record_once(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """The operator runs the migration's import twice (a retry after a timeout, a second
    copy of the command). Records are idempotent (`unchanged`), tombstones too
    (`tombstones_added` 0), and `erase --pending` defers a pending record once. Must hold:
    the carried pending erasure is deferred once as well: one journaled erase operation and
    one deferral receipt for m-h, not one more per import."""
    records, erasures = _held_erasure_exported(runner, tmp_path)
    new = f"sqlite:///{tmp_path / 'new.db'}"
    _ok(runner, "import", str(records), "--store", new, "--erasures", str(erasures))
    once = _deferrals(home)
    again = json.loads(_ok(runner, "import", str(records), "--store", new,
                           "--erasures", str(erasures), "--json"))  # fmt: skip
    assert (again["imported"], again["unchanged"]) == (0, 2)
    with SqliteStore(tmp_path / "new.db") as s:
        ops = [o for o in open_journal(s).for_record("m-h") if o.kind is OpKind.erase]
    assert len(ops) == 1, [o.operation_id for o in ops]
    assert _deferrals(home) == once


def test_a_carried_pending_erasure_keeps_when_it_was_asked_for(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """The erasures file names when each pending erasure was asked for (`requested_at`,
    a required field). A person's erasure request is dated by its asking, not by the day
    the operator moved the store. Must hold: the migrated store's pending erasure, and so
    its own export, carries the original request time."""
    records, erasures = _held_erasure_exported(runner, tmp_path)
    (line,) = [json.loads(x) for x in erasures.read_text().splitlines() if "pending" in x]
    asked = datetime.fromisoformat(line["requested_at"])
    new = tmp_path / "new.db"
    # the move happens later than the request (a clock that moved on)
    _ok(runner, "import", str(records), "--store", f"sqlite:///{new}", "--erasures",
        str(erasures))  # fmt: skip
    with SqliteStore(new) as s:
        (row,) = pending_erasures(s)
    assert datetime.fromisoformat(row["requested_at"]) == asked


def _night(runner: CliRunner, store: str, at: str) -> dict:
    return json.loads(_ok(runner, "run", "--now", at, "--store", store, "--engine", "local",
                          "--json"))  # fmt: skip


def test_a_disputed_record_is_not_deleted_by_the_migrated_stores_night(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """A reviewer disputed m-1 ("never deleted until the dispute is resolved", README);
    its deadline passes and the night keeps it (DISPUTED). The operator moves the store as
    README says (`export -o --erasures --access`, `import --erasures --access`). Must
    hold: the migrated store's night at the same cutoff keeps m-1 as the old one does."""
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    src = write_jsonl(tmp_path / "a.jsonl", [json.dumps(good(
        "m-1", memory_type="procedural", namespace="/users/u-1/procedures", subject="deploy",
        owner=None, created_at="2026-11-01T00:00:00Z", last_verified_at="2026-11-01T00:00:00Z",
        expires_at="2026-11-05T00:00:00Z",
    ))])  # fmt: skip
    _ok(runner, "import", str(src), "--store", old)
    _night(runner, old, "2026-11-02T00:00:00Z")  # a procedure without an owner: reviewed
    (item,) = json.loads(_ok(runner, "review", "list", "--store", old, "--json"))
    _ok(runner, "review", "resolve", item["item_id"], "--decision", "dispute",
        "--reviewer", "ana@example.com", "--store", old)  # fmt: skip
    files = [str(tmp_path / n) for n in ("all.jsonl", "e.jsonl", "r.parquet")]
    _ok(runner, "export", "--store", old, "-o", files[0], "--erasures", files[1],
        "--access", files[2])  # fmt: skip
    _ok(runner, "import", files[0], "--store", new, "--erasures", files[1], "--access", files[2])
    assert _night(runner, old, "2026-11-06T00:00:00Z")["lifecycle"]["deleted"] == 0
    _night(runner, new, "2026-11-06T00:00:00Z")
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.get("m-1") is not None


# -- the carried dispute on each review backend (memlife/dispute_export.py) ---------------


@pytest.fixture(params=["sqlite", "dynamodb"])
def backend(request, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A SQLite store (items in its file), or an AgentCore store (the fake, moto) with its
    review items in a DynamoDB state table (moto)."""
    if request.param == "sqlite":
        monkeypatch.setenv("MEMLIFE_STATE", "local")
        s = SqliteStore(home / "memlife.db")
        yield s
        s.close()
        return
    from tests.fakes.agentcore import agentcore_store

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with agentcore_store() as (s, _fake):
        url = state_url()
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: provision(url)})
        yield s


def _dispute(r: Any, **kw: Any) -> Dispute:
    base = dict(kind="dispute", item_id=item_id(r.id, "MISSING_OWNER", r.actor_id, r.namespace),
                record_id=r.id, actor_id=r.actor_id, namespace=r.namespace,
                reason="MISSING_OWNER", reviewer="ana@example.com", opened_at=T0,
                content_sha256=r.sha256)  # fmt: skip
    return Dispute.model_validate({**base, **kw})


def test_a_carried_dispute_guards_its_record_once_and_never_another_scope(backend: Any) -> None:
    """The adversary imports the erasures file twice and adds a dispute line for a record
    of another actor under the same id. Must hold, on either review backend: the record of
    the line's own scope is disputed (the night reads it so: never deleted), by the same
    reviewer, once; the second import carries nothing again; the other scope's line is
    reported not found and disputes nothing."""
    backend.put_many([rec("m-1"), rec("m-2", actor_id="u-2", namespace="/users/u-2/facts")])
    m1 = backend.get("m-1")
    lines = [_dispute(m1), _dispute(m1, record_id="m-2")]  # m-2 is u-2's, not u-1's
    first = carry_disputes(backend, lines, now=T0 + timedelta(days=1))
    assert (first["carried"], first["not_found"]) == ([lines[0].item_id], ["m-2"])
    queue = ReviewQueue.for_store(backend)
    assert queue.disputed("u-1", NS) == {"m-1"}
    assert queue.disputed("u-2", "/users/u-2/facts") == frozenset()
    item = queue.get(lines[0].item_id)
    assert (item.state, item.decision, item.reviewer) == ("disputed", "dispute", "ana@example.com")
    again = carry_disputes(backend, lines, now=T0 + timedelta(days=2))
    assert (again["carried"], again["already"]) == ([], [lines[0].item_id])
    assert [i.item_id for i in queue.list(actor="u-1")] == [lines[0].item_id]


def test_an_answer_given_in_the_new_store_stands_against_a_carried_dispute(
    backend: Any,
) -> None:
    """The new store's own night opened the item and a reviewer there kept the record;
    then the old store's erasures file (a dispute of the same item) is imported late.
    Must hold: the new store's answer stands (resolved, keep); the line is reported."""
    backend.put_many([rec("m-1")])
    m1 = backend.get("m-1")
    queue = ReviewQueue.for_store(backend)
    queue.queue([finding(m1)], budget=10, run_id="run-n", at=T0)
    (item,) = queue.list()
    queue.close(item.item_id, state="resolved", decision="keep", reviewer="bo@example.com",
                at=T0, operation_id=None)  # fmt: skip
    out = carry_disputes(backend, [_dispute(m1)], now=T0 + timedelta(days=1))
    assert out["resolved_here"] == [item.item_id] and out["carried"] == []
    after = queue.get(item.item_id)
    assert (after.state, after.decision) == ("resolved", "keep")
    assert queue.disputed("u-1", NS) == frozenset()


def test_a_hostile_dispute_line_is_refused_by_number_and_field() -> None:
    """Lines an adversary edits into the file: a dispute with a content field smuggled in,
    an item id that is not one, a reason in lower case. Must hold: each refused naming its
    line and field, before anything is applied."""
    from memlife.erasure_export import parse_erasures

    ok = _dispute(rec("m-1")).model_dump(mode="json")
    for n, bad in enumerate([{**ok, "content": "Lives in Lisbon."}, {**ok, "item_id": "x"},
                             {**ok, "reason": "missing owner"}], 1):  # fmt: skip
        lines = [json.dumps(ok)] * n + [json.dumps(bad)]
        with pytest.raises(InputError, match=f"line {n + 1}: field"):
            parse_erasures(lines)


def test_the_export_writes_disputes_without_content(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """The exported dispute line carries ids, reason, reviewer and times, never the text."""
    path = tmp_path / "s.db"
    with SqliteStore(path) as s:
        s.put_many([rec("m-1", "Owes 500 EUR to Bob.")])
        m1 = s.get("m-1")
        queue = ReviewQueue.for_store(s)
        queue.queue([finding(m1)], budget=10, run_id="run-n", at=T0)
        (item,) = queue.list()
        queue.close(item.item_id, state="disputed", decision="dispute",
                    reviewer="ana@example.com", at=T0, operation_id=None)  # fmt: skip
    out = tmp_path / "e.jsonl"
    _ok(runner, "export", "--store", f"sqlite:///{path}", "-o", str(tmp_path / "a.jsonl"),
        "--erasures", str(out))  # fmt: skip
    (line,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert (line["kind"], line["record_id"], line["reviewer"]) == (
        "dispute", "m-1", "ana@example.com")  # fmt: skip
    assert "500" not in out.read_text() and "Bob" not in out.read_text()
