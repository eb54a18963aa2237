"""A review item is about the content it was opened on: verify, supersede and delete are
refused (exit 2) once the record changed, and refused for an item that predates content
hashes; keep and dispute proceed. The next night renews the item for the new content, and
a change between the check and the apply is a STALE_PRECONDITION (nothing done)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.model import MemoryRecord, Status
from memlife.plan import Action, Decision, Reason
from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 2, tzinfo=UTC)
V1 = "To reset the router: unplug it, wait 30 seconds, plug it in."
V2 = "To reset the router: hold the reset button for 10 seconds."


def rec(rid: str, content: str = V1) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": "u-1", "namespace": "/users/u-1/procedures",
        "memory_type": "procedural", "content": content, "created_at": T0 - timedelta(days=9),
        "subject": "router_reset", "owner": None,
    })  # fmt: skip


def night(store: SqliteStore, run_id: str, at: datetime, *records: MemoryRecord,
          sha: bool = True) -> None:  # fmt: skip
    """A night's findings: MISSING_OWNER on each record, with its content hash."""
    ds = [Decision(r.id, r.actor_id, r.namespace, Action.review, [Reason.MISSING_OWNER], 0.5,
                   content_sha256=r.sha256 if sha else None, priority=1.0,
                   memory_type="procedural") for r in records]  # fmt: skip
    ReviewQueue.for_store(store).queue(ds, budget=10, run_id=run_id, at=at)


def cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["review", "resolve", *args, "--reviewer", "eve@example.com"])
    return res.exit_code, " ".join(res.output.split())


def test_changed_record_refused_then_renewed_by_the_next_night(home: Path) -> None:
    store = SqliteStore(home / "memlife.db")
    v1, pair = rec("m-proc"), rec("m-new", "To reset the router: call support.")
    store.put_many([v1, pair])
    night(store, "night-1", T0, v1)
    iid = item_id("m-proc", "MISSING_OWNER", "u-1", "/users/u-1/procedures")
    assert ReviewQueue.for_store(store).get(iid).content_sha256 == v1.sha256  # type: ignore[union-attr]
    store.put_many([v1.model_copy(update={"content": V2})])  # import --update
    v2 = store.get("m-proc")
    assert v2 is not None and v2.sha256 != v1.sha256
    store.close()

    for args in (["--decision", "delete"], ["--decision", "verify"],
                 ["--decision", "supersede", "--by", "m-new"]):  # fmt: skip
        code, out = cli(iid, *args)
        assert code == 2, out
        assert "changed since the item was opened" in out and args[1] + " is refused" in out
    store = SqliteStore(home / "memlife.db")
    assert store.get("m-proc") == v2  # untouched
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and item.state == "open"
    store.close()

    # dispute changes no record: it proceeds on the changed record
    code, out = cli(iid, "--decision", "dispute")
    assert code == 0, out

    # the next night renews the item for the new content; now delete acts on what it says
    store = SqliteStore(home / "memlife.db")
    night(store, "night-2", T0 + timedelta(days=1), v2)
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and (item.content_sha256, item.state, item.nights) == (
        v2.sha256, "disputed", 1,
    )  # fmt: skip
    store.close()
    res = CliRunner().invoke(app, ["review", "resolve", iid, "--decision", "delete",
                                   "--reviewer", "eve@example.com", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["item"]["state"] == "resolved"
    store = SqliteStore(home / "memlife.db")
    assert store.get("m-proc") is None
    store.close()


def test_an_item_without_a_hash_is_unknown_keep_proceeds(home: Path) -> None:
    store = SqliteStore(home / "memlife.db")
    r, s = rec("m-a"), rec("m-b", "Another procedure.")
    store.put_many([r, s])
    night(store, "night-1", T0, r, s, sha=False)  # items opened before hashes were kept
    store.close()
    a, b = (
        item_id("m-a", "MISSING_OWNER", "u-1", "/users/u-1/procedures"),
        item_id("m-b", "MISSING_OWNER", "u-1", "/users/u-1/procedures"),
    )
    code, out = cli(a, "--decision", "delete")
    assert code == 2 and "content it was about is unknown" in out, out
    code, out = cli(b, "--decision", "keep")
    assert code == 0, out
    # the next night records the hash: delete proceeds
    store = SqliteStore(home / "memlife.db")
    night(store, "night-2", T0 + timedelta(days=1), r)
    assert ReviewQueue.for_store(store).get(a).content_sha256 == r.sha256  # type: ignore[union-attr]
    store.close()
    code, out = cli(a, "--decision", "delete")
    assert code == 0, out


def test_a_change_after_the_check_is_a_stale_precondition(home: Path) -> None:
    """The operation carries the item's hash as its precondition: the applier re-checks it
    against the record as it is at apply time."""
    store = SqliteStore(home / "memlife.db")
    v1 = rec("m-proc")
    store.put_many([v1])
    night(store, "night-1", T0, v1)
    store.put_many([v1.model_copy(update={"content": V2})])
    store.get = lambda rid: v1 if rid == "m-proc" else None  # type: ignore[method-assign]
    iid = item_id("m-proc", "MISSING_OWNER", "u-1", "/users/u-1/procedures")
    out = resolve(store, iid, "delete", "eve@example.com", policy="policies/default.yaml",
                  now=T0 + timedelta(hours=1))  # fmt: skip
    assert out["status"] != "success"
    assert [o["error"] for o in out["operations"]] == ["STALE_PRECONDITION"]
    assert out["item"]["state"] == "open"
    del store.get
    current = store.get("m-proc")
    assert current is not None and current.status is Status.active and current.content == V2
    store.close()


def test_an_item_never_acts_on_another_actors_record_of_the_same_id(home: Path) -> None:
    """Adversarial review: u-1's m-proc was erased while its item was open and u-2 took the
    id. The u-1 item cannot delete, verify or supersede u-2's record (it no longer exists in
    u-1's namespace); keep closes it; u-2's record is untouched. And should the id change
    hands between the check and the apply, the applier refuses it (SCOPE_CHANGED)."""
    store = SqliteStore(home / "memlife.db")
    v1 = rec("m-proc")
    store.put_many([v1])
    night(store, "night-1", T0, v1)
    iid = item_id("m-proc", "MISSING_OWNER", "u-1", "/users/u-1/procedures")
    store.delete_many(["m-proc"])
    theirs = v1.model_copy(update={"actor_id": "u-2", "namespace": "/users/u-2/procedures"})
    store.put_many([theirs])  # same content too: the hash check alone would let it through
    store.close()
    for decision in ("delete", "verify"):
        code, out = cli(iid, "--decision", decision)
        assert code == 2 and "no longer exists in u-1 /users/u-1/procedures" in out, out
    store = SqliteStore(home / "memlife.db")
    assert store.get("m-proc") == theirs
    # the id changes hands after the check: the operation's scope is re-checked at apply
    store.get = lambda rid: v1 if rid == "m-proc" else None  # type: ignore[method-assign]
    out = resolve(store, iid, "delete", "eve@example.com", policy="policies/default.yaml",
                  now=T0 + timedelta(hours=1))  # fmt: skip
    assert [o["error"] for o in out["operations"]] == ["SCOPE_CHANGED"], out
    del store.get
    assert store.get("m-proc") == theirs
    store.close()
    code, out = cli(iid, "--decision", "keep")
    assert code == 0, out


def test_a_second_reviewer_who_loses_the_race_is_refused_under_the_lease(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversarial review: two reviewers passed the "already resolved?" check; one kept the
    record, then the other's delete ran and the item said "keep" for a deleted record. The
    item is read again once the run holds the store's lease."""
    import memlife.quarantine as quarantine

    store = SqliteStore(home / "memlife.db")
    v1 = rec("m-proc")
    store.put_many([v1])
    night(store, "night-1", T0, v1)
    iid = item_id("m-proc", "MISSING_OWNER", "u-1", "/users/u-1/procedures")
    real = quarantine.manual_run

    def keeper_wins_first(*args: object, **kw: object) -> object:
        if kw.get("now") == T0 + timedelta(hours=2):  # the deleter, after its checks
            resolve(store, iid, "keep", "keeper@example.com", policy="policies/default.yaml",
                    now=T0 + timedelta(hours=3))  # fmt: skip
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(quarantine, "manual_run", keeper_wins_first)
    with pytest.raises(ReviewError, match="already resolved .keep by keeper@example.com."):
        resolve(store, iid, "delete", "deleter@example.com", policy="policies/default.yaml",
                now=T0 + timedelta(hours=2))  # fmt: skip
    assert store.get("m-proc") == v1
    item = ReviewQueue.for_store(store).get(iid)
    assert item is not None and (item.decision, item.reviewer) == ("keep", "keeper@example.com")
    store.close()


def test_two_items_of_one_record_resolved_at_one_time_are_two_runs(home: Path) -> None:
    """A review UI resolving a batch stamps one time: each item, decision and reviewer is a
    run of its own, with its own receipt (session 22 review: the run id hashed the action,
    the record and the time only, so bob's decision ran as ana's run and no receipt named it)."""
    store = SqliteStore(home / "memlife.db")
    r = rec("m-proc")
    store.put_many([r])
    found = Decision(r.id, r.actor_id, r.namespace, Action.review,
                     [Reason.MISSING_OWNER, Reason.STALE_VERIFICATION], 0.5,
                     content_sha256=r.sha256, priority=1.0, memory_type="procedural")  # fmt: skip
    ReviewQueue.for_store(store).queue([found], budget=10, run_id="night-1", at=T0)
    items = ReviewQueue.for_store(store).list()
    assert len(items) == 2
    at = T0 + timedelta(hours=1)
    done = [resolve(store, i.item_id, "keep", who, now=at, receipts=f"file://{home}/receipts")
            for i, who in zip(items, ("ana@example.com", "bob@example.com"), strict=True)]  # fmt: skip
    store.close()
    assert done[0]["run_id"] != done[1]["run_id"]
    receipts = [json.loads(Path(d["receipt"]).read_text()) for d in done]
    assert [(x["item_id"], x["reviewer"], x["status"]) for x in receipts] == [
        (items[0].item_id, "ana@example.com", "success"),
        (items[1].item_id, "bob@example.com", "success"),
    ]


def test_an_edited_copy_keeping_the_old_hash_is_stored_with_its_contents(home: Path) -> None:
    """memlife's own writers declare ``provenance.content_sha256``; an application that edits
    such a record with ``model_copy`` (no validator runs) keeps the old hash. Stored as
    declared, the review queue took the new text for the reviewed one: a delete approved on
    the old text removed the new (session 22 review). Every store writes the content's hash."""
    from memlife.model import Provenance, content_sha256
    from memlife.stores.agentcore.mapping import encode_metadata

    store = SqliteStore(home / "memlife.db")
    v1 = rec("m-proc").model_copy(
        update={"provenance": Provenance(content_sha256=content_sha256(V1))}
    )
    store.put_many([v1])
    night(store, "night-1", T0, v1)
    edited = v1.model_copy(update={"content": V2})
    assert edited.sha256 == content_sha256(V1)  # the stale declaration, in memory
    store.put_many([edited])
    stored = store.get("m-proc")
    store.close()
    assert stored is not None and stored.sha256 == content_sha256(V2)
    assert stored.provenance.content_sha256 == content_sha256(V2)
    code, out = cli(item_id("m-proc", "MISSING_OWNER", "u-1", "/users/u-1/procedures"),
                    "--decision", "delete")  # fmt: skip
    assert code == 2 and "changed since the item was opened" in out, out
    # AgentCore's metadata carries the content's hash too
    meta, _ = encode_metadata(edited)
    assert meta["content_sha256"]["stringValue"] == content_sha256(V2)
