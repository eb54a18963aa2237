"""Audit 49b (session 49: the review queue as an operator and a hostile resolver).

Two findings, each shown on the real components (the SQLite store and its review queue;
the AgentCore fake with its review items in a DynamoDB state table under moto; the real
`memlife` CLI, resolve, journal and receipts):

1. A dispute carried by `import --erasures` kept the old store's item id. Where that id
   followed an item a reviewer had answered for earlier content (``content_item_id``), the
   new store, which holds no resolved items, could never reach it: its night opened a
   second item for the same finding (the queue showed the finding twice), and a `delete`
   through that second item was not refused, so the disputed record was deleted
   ("never deleted until the dispute is resolved"). A line whose reason is no review
   reason was carried too, as an item no night ever finds.
2. `review resolve --decision delete` checked for disputes before it took the store's
   lease: a dispute another reviewer filed between that check and the lease (a review UI
   with two people) did not stop the delete, and the disputed record was deleted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlife import state as state_mod
from memlife.cli import app
from memlife.dispute_export import Dispute, carry_disputes
from memlife.errors import InputError
from memlife.model import Status
from memlife.plan import Reason
from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.review_queue.base import content_item_id
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import CREDENTIALS, provision, state_url
from tests.support.records import good
from tests.unit.test_guards_session35 import NS, POLICY, T0, finding, rec
from tests.unit.test_import_export import write_jsonl

PROC = "/users/u-1/procedures"


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(params=["sqlite", "dynamodb"])
def backend(request: Any, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
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


def _ok(runner: CliRunner, *args: str) -> str:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def _night(runner: CliRunner, store: str, at: str) -> None:
    _ok(runner, "run", "--now", at, "--store", store, "--engine", "local", "--json")


def _items(runner: CliRunner, store: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(_ok(runner, "review", "list", "--store", store,
                                                 "--json"))  # fmt: skip
    return items


def _follower_dispute(r: Any, earlier_sha: str) -> Dispute:
    """The line `export --erasures` writes for a dispute of the item that followed one a
    reviewer answered for the record's earlier content ``earlier_sha`` (content_item_id)."""
    first = item_id(r.id, "MISSING_OWNER", r.actor_id, r.namespace)
    return Dispute(kind="dispute", item_id=content_item_id(first, earlier_sha), record_id=r.id,
                   actor_id=r.actor_id, namespace=r.namespace, reason="MISSING_OWNER",
                   reviewer="ana@example.com", opened_at=T0, content_sha256=r.sha256)  # fmt: skip


# -- 1. a migrated dispute is the new store's item for its finding ------------------------------
def _migrated_follower_dispute(runner: CliRunner, tmp_path: Path) -> str:
    """The operator's path, through the CLI: a procedure without an owner is reviewed and
    kept; its text is updated (`import --update`), so the next night asks again under the
    item that follows the kept one; ana disputes that item. The store is then moved as
    README says (`export -o --erasures`, `import --erasures`) and the new store's night
    runs. Returns the new store's URL."""
    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    base = dict(memory_type="procedural", namespace=PROC, subject="deploy", owner=None,
                created_at="2026-11-01T00:00:00Z", last_verified_at="2026-11-01T00:00:00Z")  # fmt: skip
    v1 = write_jsonl(tmp_path / "v1.jsonl", [json.dumps(good("m-1", content="Deploy with make ship.", **base))])  # fmt: skip
    _ok(runner, "import", str(v1), "--store", old)
    _night(runner, old, "2026-11-02T00:00:00Z")
    (first,) = _items(runner, old)
    _ok(runner, "review", "resolve", first["item_id"], "--decision", "keep", "--reviewer",
        "bo@example.com", "--store", old)  # fmt: skip
    v2 = write_jsonl(tmp_path / "v2.jsonl", [json.dumps(good("m-1", content="Deploy with make release.", **base))])  # fmt: skip
    _ok(runner, "import", str(v2), "--store", old, "--update")
    _night(runner, old, "2026-11-03T00:00:00Z")
    (follower,) = _items(runner, old)
    assert follower["item_id"] != first["item_id"]  # the finding asked again, under its own item
    _ok(runner, "review", "resolve", follower["item_id"], "--decision", "dispute", "--reviewer",
        "ana@example.com", "--store", old)  # fmt: skip
    files = [str(tmp_path / n) for n in ("all.jsonl", "e.jsonl")]
    _ok(runner, "export", "--store", old, "-o", files[0], "--erasures", files[1])
    _ok(runner, "import", files[0], "--store", new, "--erasures", files[1])
    _night(runner, new, "2026-11-04T00:00:00Z")
    return new


def test_a_migrated_dispute_is_the_only_item_of_its_finding_and_guards_its_record(
    home: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """Must hold in the new store: the finding is listed once, disputed by ana (the queue
    asks nothing twice), and eve's delete through any item of m-1 is refused: a disputed
    record is never deleted until its dispute is resolved."""
    new = _migrated_follower_dispute(runner, tmp_path)
    items = _items(runner, new)
    mine = [i for i in items if (i["record_id"], i["reason"]) == ("m-1", "MISSING_OWNER")]
    for other in (i for i in mine if i["state"] != "disputed"):
        res = runner.invoke(app, ["review", "resolve", other["item_id"], "--decision", "delete",
                                  "--reviewer", "eve@example.com", "--store", new])  # fmt: skip
        assert res.exit_code == 2 and "disputed" in res.output, res.output
    assert json.loads(_ok(runner, "export", "--store", new).splitlines()[0])["id"] == "m-1"
    assert [(i["state"], i["reviewer"]) for i in mine] == [("disputed", "ana@example.com")]


def test_a_carried_follower_dispute_is_carried_by_the_nights_finding(backend: Any) -> None:
    """The same on each review backend, through the library: the line of a follower item
    carried, then the new store's night makes the finding. Must hold: no second item; the
    one item is ana's dispute, carried (nights 2)."""
    backend.put_many([rec("m-1")])
    m1 = backend.get("m-1")
    carry_disputes(backend, [_follower_dispute(m1, "ab" * 32)], now=T0)
    queue = ReviewQueue.for_store(backend)
    queue.queue([finding(m1)], budget=10, run_id="night-n", at=T0 + timedelta(days=1))
    items = queue.list()
    assert [(i.state, i.reviewer, i.nights) for i in items] == [("disputed", "ana@example.com", 2)]


def test_a_delete_is_refused_on_a_record_disputed_under_an_unreachable_item(
    backend: Any, home: Path
) -> None:
    """A store migrated before the fix holds the orphaned dispute already (filed under the
    follower id, as the old carry filed it) beside the item its night opened since. Must
    hold: eve's delete through that item is refused and m-1 stays."""
    backend.put_many([rec("m-1")])
    m1 = backend.get("m-1")
    orphan = _follower_dispute(m1, "ab" * 32).item_id
    queue = ReviewQueue.for_store(backend)
    # the item as the old carry opened it: under the line's own id, then disputed
    queue.queue([finding(m1)], budget=10, run_id="import", at=T0)
    (opened,) = queue.list()
    raw = {**opened.as_json(), "item_id": orphan}
    from memlife.review_queue.base import ReviewItem

    queue.backend.write_night([], [ReviewItem(**raw)], "import", T0.isoformat())
    queue.close(orphan, state="disputed", decision="dispute", reviewer="ana@example.com",
                at=T0, operation_id=None)  # fmt: skip
    assert queue.disputed("u-1", NS) == {"m-1"}
    with pytest.raises(ReviewError, match="disputed"):
        resolve(backend, opened.item_id, "delete", "eve@example.com", policy=POLICY,
                receipts=f"file://{home}/receipts", now=T0 + timedelta(hours=1))  # fmt: skip
    assert backend.get("m-1") is not None


def test_the_disputed_item_itself_may_still_end_its_dispute_with_a_delete(
    backend: Any, home: Path
) -> None:
    """Control: a delete through the disputed item itself ends the dispute (README); the
    record goes, with its receipt, and the item is resolved."""
    backend.put_many([rec("m-1")])
    m1 = backend.get("m-1")
    queue = ReviewQueue.for_store(backend)
    queue.queue([finding(m1)], budget=10, run_id="night-1", at=T0)
    (item,) = queue.list()
    kw: dict[str, Any] = {"policy": POLICY, "receipts": f"file://{home}/receipts"}
    resolve(backend, item.item_id, "dispute", "ana@example.com", now=T0 + timedelta(hours=1), **kw)
    done = resolve(backend, item.item_id, "delete", "ana@example.com",
                   now=T0 + timedelta(hours=2), **kw)  # fmt: skip
    assert done["status"] == "success" and backend.get("m-1") is None
    assert queue.disputed("u-1", NS) == frozenset()


def test_a_dispute_line_whose_reason_is_no_review_reason_is_refused_by_line_and_field() -> None:
    """An edited line: `reason` of the right shape but no review finding (LEGAL_HOLD, or
    made up). Must hold: refused naming its line and field, before anything is applied."""
    from memlife.erasure_export import parse_erasures

    ok = _follower_dispute(rec("m-1"), "ab" * 32).model_dump(mode="json")
    for bad in ("LEGAL_HOLD", "NOT_A_FINDING"):
        with pytest.raises(InputError, match="line 2: field 'reason'"):
            parse_erasures([json.dumps(ok), json.dumps({**ok, "reason": bad})])


def test_every_review_reason_is_accepted_on_a_dispute_line() -> None:
    """Control: a line of each review reason parses."""
    from memlife.erasure_export import parse_erasures
    from memlife.plan import REVIEW_REASONS

    ok = _follower_dispute(rec("m-1"), "ab" * 32).model_dump(mode="json")
    lines = [json.dumps({**ok, "reason": r.value}) for r in sorted(REVIEW_REASONS)]
    _, carried = parse_erasures(lines)
    assert len(carried) == len(REVIEW_REASONS)


# -- 2. the dispute check of a delete is made under the store's lease ---------------------------
def _race(monkeypatch: pytest.MonkeyPatch, backend: Any, home: Path, disputed: str) -> None:
    """eve's delete passes its checks; before it takes the store's lease, ana's dispute of
    ``disputed`` (another item) runs to its end, as another reviewer's process would."""
    import memlife.quarantine as quarantine

    real = quarantine.manual_run
    eve_at = T0 + timedelta(hours=2)

    def ana_first(*args: Any, **kw: Any) -> Any:
        if kw.get("now") == eve_at:  # eve's run, after her checks
            resolve(backend, disputed, "dispute", "ana@example.com", policy=POLICY,
                    receipts=f"file://{home}/receipts", now=T0 + timedelta(hours=1))  # fmt: skip
        return real(*args, **kw)

    monkeypatch.setattr(quarantine, "manual_run", ana_first)


def test_a_dispute_filed_while_a_delete_waits_for_the_lease_stops_it(
    backend: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m-1 has two items (no owner, stale verification). eve deletes it through one; ana
    disputes the other in the meantime. Must hold: the delete is refused, m-1 stays, ana's
    dispute stands and eve's item stays open."""
    backend.put_many([rec("m-1")])
    m1 = backend.get("m-1")
    queue = ReviewQueue.for_store(backend)
    queue.queue([finding(m1, Reason.MISSING_OWNER, Reason.STALE_VERIFICATION)], budget=10,
                run_id="night-1", at=T0)  # fmt: skip
    eves = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    anas = item_id("m-1", "STALE_VERIFICATION", "u-1", NS)
    _race(monkeypatch, backend, home, anas)
    with pytest.raises(ReviewError, match="disputed"):
        resolve(backend, eves, "delete", "eve@example.com", policy=POLICY,
                receipts=f"file://{home}/receipts", now=T0 + timedelta(hours=2))  # fmt: skip
    kept = backend.get("m-1")
    assert kept is not None and kept.status is Status.active
    assert queue.get(anas).state == "disputed"  # type: ignore[union-attr]
    assert queue.get(eves).state == "open"  # type: ignore[union-attr]


def test_a_source_disputed_while_its_replacements_delete_waits_is_kept(
    backend: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m-old is superseded by m-new (as a night's merge or an earlier reviewer leaves it);
    its item, opened while it was active, is still open. eve deletes m-new, which takes
    m-old with it; ana disputes m-old's item meanwhile. Must hold: the delete is refused
    and both records stay."""
    backend.put_many([rec("m-old", status="superseded", provenance={"replaced_by": "m-new"}),
                      rec("m-new", "Lives in Porto.", provenance={"supersedes": ["m-old"]})])  # fmt: skip
    old, new = backend.get("m-old"), backend.get("m-new")
    queue = ReviewQueue.for_store(backend)
    queue.queue([finding(old), finding(new)], budget=10, run_id="night-1", at=T0)
    _race(monkeypatch, backend, home, item_id("m-old", "MISSING_OWNER", "u-1", NS))
    with pytest.raises(ReviewError, match="disputed"):
        resolve(backend, item_id("m-new", "MISSING_OWNER", "u-1", NS), "delete",
                "eve@example.com", policy=POLICY, receipts=f"file://{home}/receipts",
                now=T0 + timedelta(hours=2))  # fmt: skip
    assert backend.get("m-new") is not None and backend.get("m-old") is not None


def test_a_dispute_filed_before_the_delete_is_refused_before_anything_is_written(
    backend: Any, home: Path
) -> None:
    """Control (session 41): ana's dispute lands first; eve's delete through the other item
    is refused by the first check, no run is started (no receipt written)."""
    backend.put_many([rec("m-1")])
    m1 = backend.get("m-1")
    queue = ReviewQueue.for_store(backend)
    queue.queue([finding(m1, Reason.MISSING_OWNER, Reason.STALE_VERIFICATION)], budget=10,
                run_id="night-1", at=T0)  # fmt: skip
    receipts = home / "receipts"
    resolve(backend, item_id("m-1", "STALE_VERIFICATION", "u-1", NS), "dispute",
            "ana@example.com", policy=POLICY, receipts=f"file://{receipts}",
            now=T0 + timedelta(hours=1))  # fmt: skip
    before = sorted(p for p in receipts.rglob("*") if p.is_file())
    with pytest.raises(ReviewError, match="disputed"):
        resolve(backend, item_id("m-1", "MISSING_OWNER", "u-1", NS), "delete", "eve@example.com",
                policy=POLICY, receipts=f"file://{receipts}", now=T0 + timedelta(hours=2))  # fmt: skip
    assert sorted(p for p in receipts.rglob("*") if p.is_file()) == before
    assert backend.get("m-1") is not None
