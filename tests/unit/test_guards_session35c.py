"""Guards attacked by the session 35c mutation audit (CLI and LangGraph adapter): each test
fails when the guard it names is loosened. Real components: the SQLite store, the AgentCore
store against its fake service, the online library, the CLI through typer's runner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import InvalidNamespaceError, PutOp  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, actor_label, record_id  # noqa: E402
from memlife.model import MemoryRecord, RetentionClass, Status, utcnow  # noqa: E402
from memlife.stores.sqlite import SqliteStore  # noqa: E402
from tests.support.cli import invoke

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)


def rec(
    rid: str, actor: str, namespace: str, content: str = "Lives in Lisbon.", **kw: Any
) -> MemoryRecord:
    base = dict(id=rid, actor_id=actor, namespace=namespace, memory_type="semantic",
                content=content, created_at=T0 - timedelta(days=3))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


@pytest.fixture()
def lg(tmp_path: Path) -> Iterator[MemlifeStore]:
    """The adapter over a real SQLite store."""
    m = Memory(f"sqlite:///{tmp_path / 'lg.db'}", ledger=tmp_path / "ledger")
    yield MemlifeStore(m)
    m.close()


# -- LangGraph adapter -------------------------------------------------------------------
def test_get_never_serves_another_actors_record_addressed_by_its_id(lg: MemlifeStore) -> None:
    """``_locate``'s actor check: a record memlife wrote itself is addressed by its id, but
    u-2's record stored under u-1's namespace path (an import, a mis-set namespace) is not
    u-1's item: get returns None and a delete through u-1's namespace leaves it."""
    ns = ("users", "u-1", "facts")
    lg.store.put_many([rec("native-1", "u-2", "/users/u-1/facts", "u-2's secret.")])
    assert lg.get(ns, "native-1") is None
    lg.delete(ns, "native-1")
    kept = lg.store.get("native-1")
    assert kept is not None and kept.status is Status.active


def test_actor_label_refuses_a_namespace_exactly_one_label_too_short() -> None:
    """``actor_label``'s bound: ``("memories",)`` has no label at position 1; refused as an
    invalid namespace (what LangGraph callers catch), not an IndexError."""
    with pytest.raises(InvalidNamespaceError):
        actor_label(1)(("memories",))


def test_search_under_the_bare_users_prefix_spans_every_actor(lg: MemlifeStore) -> None:
    """``_actor_fixed``: ``("users",)`` names no actor; a search under it lists every
    user's items (as InMemoryStore), it is not refused as an unmappable namespace."""
    lg.put(("users", "u1", "facts"), "a", {"content": "likes tea"})
    lg.put(("users", "u2", "facts"), "b", {"content": "likes coffee"})
    got = lg.search(("users",))
    assert [(i.namespace, i.key) for i in got] == [
        (("users", "u1", "facts"), "a"),
        (("users", "u2", "facts"), "b"),
    ]


def test_a_ttl_put_op_gives_the_record_a_deadline(lg: MemlifeStore) -> None:
    """TTL handling: a ``PutOp`` carrying ``ttl`` (minutes) stores ``expires_at`` that far
    ahead; once past, get serves it no more. A negative ttl is a deadline already gone."""
    ns = ("users", "u1", "facts")
    before = utcnow()
    lg.batch([PutOp(ns, "short", {"content": "parked on level 3"}, ttl=30)])
    after = utcnow()
    stored = lg.store.get(record_id("u1", "/users/u1/facts", "short"))
    assert stored is not None and stored.expires_at is not None
    expires = (
        stored.expires_at if stored.expires_at.tzinfo else stored.expires_at.replace(tzinfo=UTC)
    )
    assert before + timedelta(minutes=30) <= expires <= after + timedelta(minutes=30)
    lg.batch([PutOp(ns, "gone", {"content": "the gate code is 4512"}, ttl=-1)])
    assert lg.get(ns, "gone") is None
    assert lg.get(ns, "short") is not None


def test_a_put_never_rewrites_a_held_record_on_agentcore(tmp_path: Path) -> None:
    """The read-side hold check of ``_put``: on a store with no conditional write
    (AgentCore) it is the only guard; a held item's value stays as it was."""
    from tests.fakes.agentcore import agentcore_store

    ns = ("users", "u1", "facts")
    with agentcore_store() as (ac, _fake):
        lg = MemlifeStore(Memory(ac, ledger=tmp_path / "ledger"))
        lg.put(ns, "k", {"content": "Account number 1234."})
        rid = record_id("u1", "/users/u1/facts", "k")
        held = ac.get(rid)
        assert held is not None
        ac.put_many([held.model_copy(update={"retention_class": RetentionClass.legal_hold})])
        with pytest.raises(PermissionError):
            lg.put(ns, "k", {"content": "Account number 9999."})
        after = ac.get(rid)
        assert after is not None and after.content == "Account number 1234."


def test_actor_label_refuses_a_negative_index() -> None:
    """``actor_label``'s index check: ``-1`` would take the last label (a namespace's leaf,
    "prefs") as the actor, making every user's prefs one tenant; refused at construction."""
    with pytest.raises(ValueError, match="index"):
        actor_label(-1)


def test_list_namespaces_leaves_out_a_namespace_whose_items_were_all_deleted(
    lg: MemlifeStore,
) -> None:
    """``_has_active``: a deleted item is gone for reads at once; a namespace left with no
    active item is not listed (as InMemoryStore), though its record waits for the night."""
    lg.put(("users", "u1", "kept"), "a", {"content": "likes tea"})
    lg.put(("users", "u1", "gone"), "b", {"content": "likes coffee"})
    lg.delete(("users", "u1", "gone"), "b")
    assert lg.list_namespaces() == [("users", "u1", "kept")]


def test_a_put_op_with_an_empty_namespace_is_refused_whatever_the_actor_mapping(
    tmp_path: Path,
) -> None:
    """``_put``'s empty-namespace check: a ``PutOp`` sent to ``batch`` directly skips
    BaseStore.put's validation; with an ``actor_of`` that names an actor for any namespace
    it would store an item under the path "/". Refused, and nothing written."""
    m = Memory(f"sqlite:///{tmp_path / 'lg.db'}", ledger=tmp_path / "ledger")
    try:
        lg = MemlifeStore(m, actor_of=lambda ns: "u1")
        with pytest.raises(InvalidNamespaceError):
            lg.batch([PutOp((), "k", {"content": "no namespace"})])
        assert list(m.store.list_actors()) == []
    finally:
        m.close()


# -- CLI: erase ------------------------------------------------------------------------------


def remembered(actor: str, subject: str, fact: str) -> str:
    code, out, err = invoke("remember", "--actor", actor, "--subject", subject, fact, "--json")
    assert code == 0, err
    return str(json.loads(out)["id"])


def test_erase_naming_nothing_is_bad_usage(home: Path) -> None:
    """``erase --no-pending`` selects nothing at all: exit 2 with the options to name, not a
    preview of 0 records read as success (exit 0)."""
    remembered("u1", "beverage", "I only drink green tea.")
    code, _, err = invoke("erase", "--no-pending", "--yes")
    assert code == 2 and "name --subject or --id" in err, err


def test_erase_by_subject_without_an_actor_is_bad_usage(home: Path) -> None:
    """``--actor`` is required with ``--subject``: exit 2 saying so (not exit 1 "nothing
    matched", which reads as a valid request that found nothing), and nothing erased."""
    rid = remembered("u1", "beverage", "I only drink green tea.")
    code, _, err = invoke("erase", "--subject", "beverage", "--yes")
    assert code == 2 and "--actor is required" in err, err
    with SqliteStore(home / "memlife.db") as store:
        assert store.get(rid) is not None


def test_erase_preview_never_names_another_actors_unfinished_erasure(home: Path) -> None:
    """Tenant scoping of ``_unfinished_erasures``: u-2's erasure killed before its receipt
    is u-2's to finish. u-1's erase matching nothing still exits 1 (nothing matched), and
    u-1's preview lists only u-1's records, never u-2's id."""
    from memlife import faults
    from memlife.erase import erase
    from memlife.faults import InjectedFault

    mine = remembered("u-1", "cats", "My cat is called Tom.")
    theirs = remembered("u-2", "cats", "My cat is called Felix.")
    with SqliteStore(home / "memlife.db") as store:
        with faults.inject("before_receipt"), pytest.raises(InjectedFault):
            erase(store, "u-2", subject="cats", policy="policies/default.yaml")
        assert store.get(theirs) is None  # deleted; its receipt never written
    code, out, err = invoke("erase", "--actor", "u-1", "--subject", "dogs", "--json")
    assert code == 1 and "nothing matched" in err, (code, out, err)
    code, out, err = invoke("erase", "--actor", "u-1", "--subject", "cats", "--json")
    assert code == 0, err
    assert json.loads(out)["ids"] == [mine]


def test_erase_preview_never_calls_a_still_held_deferral_released(home: Path) -> None:
    """``_erase_preview``'s hold check on pending erasures: an erasure deferred by a hold
    that is still in place is not "HOLD_RELEASED". An erase of another subject matches
    nothing (exit 1), not a preview offering to erase the held record."""
    rid = remembered("u1", "case", "Signed the settlement on May 3.")
    code, _, err = invoke("hold", "place", "--id", rid)
    assert code == 0, err
    code, out, err = invoke("erase", "--actor", "u1", "--subject", "case", "--yes", "--json")
    assert code == 0 and json.loads(out)["deferred"] == [rid], (out, err)
    code, out, err = invoke("erase", "--actor", "u1", "--subject", "other", "--json")
    assert code == 1 and json.loads(out)["ids"] == [], (code, out, err)
    code, out, err = invoke("erase", "--actor", "u1", "--json")  # the pending pass alone
    assert code == 0 and json.loads(out)["ids"] == [], (out, err)


# -- CLI: review -----------------------------------------------------------------------------
def _open_item(iid: str, rid: str, actor: str) -> Any:
    from memlife.review_queue import ReviewItem

    at = T0.isoformat()
    return ReviewItem(iid, rid, "STALE_VERIFICATION", None, actor, f"/users/{actor}/facts",
                      "semantic", "team-a", 1.0, "open", None, None, 1, "night-0", at,
                      "night-0", at, None, None, "h-" + rid)  # fmt: skip


def test_review_list_by_actor_lists_only_that_actors_items(home: Path) -> None:
    """``review list --actor``: u-1's reviewer asks for u-1's items; u-2's item (same
    reason, same owner) is another tenant's and is not listed."""
    from memlife.review_queue import ReviewQueue

    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        queue = ReviewQueue.for_store(store)
        items = [_open_item("rv-mine", "m-1", "u-1"), _open_item("rv-theirs", "m-2", "u-2")]
        queue.backend.write_night([], items, "night-0", T0.isoformat())
    code, out, err = invoke("review", "list", "--actor", "u-1", "--json")
    assert code == 0, err
    assert [i["item_id"] for i in json.loads(out)] == ["rv-mine"]
    code, out, err = invoke("review", "list", "--json")  # the control: both are open
    assert sorted(i["item_id"] for i in json.loads(out)) == ["rv-mine", "rv-theirs"]


def test_review_resolve_with_an_unknown_decision_is_bad_usage(home: Path) -> None:
    """``resolve --decision`` is checked first: an unknown one is exit 2 naming the
    choices, never an uncaught ValueError (a traceback, exit 1) from the resolver."""
    remembered("u1", "beverage", "I only drink green tea.")  # the store exists
    code, _, err = invoke("review", "resolve", "rv-x", "--decision", "approve",
                          "--reviewer", "ana@example.com")  # fmt: skip
    assert code == 2 and "--decision 'approve'" in err, err


# -- CLI: import, remember -------------------------------------------------------------------
def test_import_allow_held_without_update_is_refused_before_anything_is_written(
    home: Path, tmp_path: Path
) -> None:
    """``--allow-held`` only means something with ``--update``: alone it is bad usage
    (exit 2, naming it) and the file's records are not imported."""
    src = tmp_path / "in.jsonl"
    src.write_text(rec("m-1", "u1", "/users/u1/facts").to_json() + "\n", encoding="utf-8")
    code, _, err = invoke("import", str(src), "--allow-held")
    assert code == 2 and "--allow-held" in err, err
    db = home / "memlife.db"
    if db.exists():
        with SqliteStore(db) as store:
            assert store.get("m-1") is None


def test_remember_a_blank_fact_is_refused_before_a_store_is_created(home: Path) -> None:
    """``remember`` refuses a blank fact (exit 2, "blank") before it opens the store: a
    mistaken call writes nothing, not even an empty database."""
    code, _, err = invoke("remember", "--actor", "u1", "   ")
    assert code == 2 and "blank" in err, err
    assert not (home / "memlife.db").exists()
