"""Guards left untested by the thirty-ninth audit (session 39b): tenants never mixed where an
actor id and a namespace (or a record id) are joined into one string key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewItem, ReviewQueue
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_guards_session37d import _rec, _RemoteStore, aws  # noqa: F401 (fixture)

DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
NIGHT1 = DAY1 + timedelta(days=2)
NIGHT2 = NIGHT1 + timedelta(days=1)


def rec(rid: str, actor: str, namespace: str, text: str, **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": actor, "namespace": namespace, "memory_type": "semantic",
        "content": text, "created_at": DAY1, "source": "agent_inferred", "confidence": 0.6, **kw,
    })  # fmt: skip


def _items(home: Path, rid: str) -> list[ReviewItem]:
    store = SqliteStore(home / "memlife.db")
    try:
        found = ReviewQueue.for_store(store).list(states=("open", "waiting", "resolved"))
        return [i for i in found if i.record_id == rid and i.reason == "MISSING_OWNER"]
    finally:
        store.close()


# -- review_sweep.py: failed shards named by "actor:namespace" text -------------------------
def _sweep_after_neighbour_fails(home: Path, actor_a: str, ns_a: str) -> ReviewItem:
    """Tenant B (actor 'a:/x', namespace '/y') has an open MISSING_OWNER item whose record
    was removed outside any run; tenant A's shard fails to plan on night 2 (a stored row
    that does not decode). Returns B's item after night 2."""
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([
            rec("b-1", "a:/x", "/y", "The deploy key rotates every quarter."),
            rec("a-1", actor_a, ns_a, "The printer is on the third floor."),
        ])  # fmt: skip
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    (item,) = _items(home, "b-1")
    assert item.state == "open"
    store = SqliteStore(home / "memlife.db")
    try:
        store.delete_many(["b-1"])  # removed outside any run: nothing closed its item
        store.connection.execute("UPDATE records SET memory_type='bogus' WHERE id='a-1'")
    finally:
        store.close()
    summary = run_local(RunConfig(dry_run=False, now=NIGHT2))
    assert [s["record_id"] for s in summary.failed_shards] == ["a-1"]
    (after,) = _items(home, "b-1")
    return after


def test_a_neighbour_shards_failure_leaves_another_actors_item_to_the_sweep(
    offline_home: Path,
) -> None:
    """Control for the bug below: when the failed shard's text is not B's, B's item whose
    record is gone is closed as ``record_gone`` by night 2's sweep."""
    after = _sweep_after_neighbour_fails(offline_home, "a", "/x/y")
    assert (after.state, after.decision) == ("resolved", "record_gone")


def test_another_tenants_failed_shard_does_not_hold_this_tenants_items_open(
    offline_home: Path,
) -> None:
    """Attacks ``f"{i.actor_id}:{i.namespace}" not in skip_shards`` in
    ``memlife/review_sweep.py::close_unfound`` (and ``Shard.__str__`` in run_types.py):
    tenant A (actor 'a', namespace '/x:/y', both accepted by the importer) fails to plan;
    its shard is named "a:/x:/y", which is also how B (actor 'a:/x', namespace '/y') is
    named. B's item about a record that is gone must be closed as for the control above;
    it is left open, skipped as if B's own planning had failed."""
    after = _sweep_after_neighbour_fails(offline_home, "a", "/x:/y")
    assert (after.state, after.decision) == ("resolved", "record_gone")


# -- review_queue/base.py: item_id joins actor, namespace, record and reason ---------------
# pairs of scopes the importer accepts (model.parse_record: ':' and '/' may be in an actor)
# that a careless join reads alike: another namespace, another actor, a separator shifted
SCOPES = [
    (("u-1", "/a"), ("u-1", "/b")),
    (("u-1", "/a"), ("u-2", "/a")),
    (("a:/x", "/y"), ("a", "/x:/y")),
    (("a/x", "/y"), ("a", "/x/y")),
]


@pytest.mark.parametrize(("mine", "theirs"), SCOPES)
def test_a_record_id_reused_in_another_scope_opens_its_own_item(
    tmp_path: Path, mine: tuple[str, str], theirs: tuple[str, str]
) -> None:
    """Attacks the key of ``memlife/review_queue/base.py::item_id`` (the namespace or the
    actor dropped, its \\x1f separators made ':' or ''): u-1's m-1 has an open item, a
    reviewer answers it 'keep'; the id is then another scope's record (erased and taken
    again) with the same finding. That scope's finding opens its own item: a decision made
    for one tenant's record never answers (nor is it carried onto) another's."""
    from memlife.plan import Action, Decision, Reason
    from memlife.review_queue import item_id

    assert item_id("m-1", "MISSING_OWNER", *mine) != item_id("m-1", "MISSING_OWNER", *theirs)
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        queue = ReviewQueue.for_store(store)

        def finding(actor: str, ns: str, sha: str) -> Decision:
            d = Decision("m-1", actor, ns, Action.review, [Reason.MISSING_OWNER], 0.5,
                         priority=1.0, memory_type="semantic")  # fmt: skip
            d.content_sha256 = sha
            return d

        queue.queue([finding(*mine, "v1")], budget=5, run_id="n1", at=NIGHT1)
        (first,) = queue.list(states=("open",))
        queue.close(first.item_id, state="resolved", decision="keep", reviewer="r", at=NIGHT1,
                    operation_id="op")  # fmt: skip
        counts = queue.queue([finding(*theirs, "w1")], budget=5, run_id="n2", at=NIGHT2)
        assert counts["review_opened"] == 1, counts
        (opened,) = queue.list(states=("open",))
        assert (opened.actor_id, opened.namespace) == theirs
        kept = queue.get(first.item_id)
        assert kept is not None and (kept.actor_id, kept.namespace, kept.state) == (
            *mine, "resolved",
        )  # fmt: skip
    finally:
        store.close()


# -- erase.py: an erased record's id, taken again, is kept apart as f"{id}#erased" -----------
def test_a_live_record_named_like_an_erased_ghost_is_not_erased(tmp_path: Path) -> None:
    """Attacks ``gid = ghost if ghost not in by_id else f"{ghost}#erased"`` in
    ``memlife/erase.py::plan_erasure``: u-1 asks to erase 'x' and the held 'h' ('h' is
    deferred); u-1 then writes a new 'x' (other text, allowed) and a record 'x#erased' (an
    id the importer accepts) about something else. Releasing the hold applies the pending
    erasure, planned from the records erased before: 'h' goes, and neither the new 'x'
    nor 'x#erased' (their texts are not an erased one) may go with it."""
    from memlife.erase import erase, release_hold

    ns = "/users/u-1/facts"
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([
            rec("x", "u-1", ns, "Lives in Lisbon."),
            rec("h", "u-1", ns, "Has a grey dog.", retention_class="legal_hold"),
        ])  # fmt: skip
        assert erase(store, "u-1", ids=["x", "h"], now=NIGHT1)["deferred"] == ["h"]
        store.put_many([
            rec("x", "u-1", ns, "Owns a red bicycle."),
            rec("x#erased", "u-1", ns, "Plays the cello on Sundays."),
        ])  # fmt: skip
        out = release_hold(store, ["h"], now=NIGHT1)
        assert [e["erased"] for e in out["erasures"]] == [["h"]]
        assert store.get("x#erased") is not None and store.get("x") is not None
    finally:
        store.close()


# -- stores/sqlite.py: tombstones keyed (actor_id, record_id), INSERT OR IGNORE -------------
def test_an_id_erased_twice_keeps_both_erased_texts_out(tmp_path: Path) -> None:
    """Attacks the tombstone key ``PRIMARY KEY (actor_id, record_id)`` and ``INSERT OR
    IGNORE`` in ``memlife/stores/sqlite.py::add_tombstones``: u-1's 'x' is erased; u-1
    uses the id again (other text, allowed) and erases it again. Both erased texts must be
    refused from then on (erased content never returns); the second is not."""
    from memlife.erase import erase

    ns = "/users/u-1/facts"
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "u-1", ns, "Lives in Lisbon.")])
        assert erase(store, "u-1", ids=["x"], now=NIGHT1)["erased"] == ["x"]
        assert store.put_many([rec("x", "u-1", ns, "Owns a red bicycle.")]).succeeded == ["x"]
        assert erase(store, "u-1", ids=["x"], now=NIGHT2)["erased"] == ["x"]
        for text in ("Lives in Lisbon.", "Owns a red bicycle."):  # what every writer asks
            assert store.tombstone_refusal(rec("y", "u-1", ns, text)) == "ERASED_CONTENT", text
    finally:
        store.close()


# -- review_sweep.py::_same_shard: a record id taken in another scope -----------------------
@pytest.mark.parametrize(("actor", "namespace"), [("u-1", "/team/other"), ("u-2", "/team/facts")])
def test_an_id_taken_in_another_scope_closes_the_item_as_gone_not_cleared(
    offline_home: Path, actor: str, namespace: str
) -> None:
    """Attacks ``_same_shard`` in ``memlife/review_sweep.py`` (the actor or the namespace
    left out of the comparison): u-1's m-1 in /team/facts has a MISSING_OWNER item;
    m-1 is removed and the id taken in another namespace of u-1's (or by u-2 in the same
    namespace) with an owner. That record is no evidence about the item's finding: the
    item is closed as ``record_gone``, never ``cleared`` by another scope's owner."""
    ns = "/team/facts"
    store = SqliteStore(offline_home / "memlife.db")
    try:
        store.put_many([rec("m-1", "u-1", ns, "The deploy key rotates every quarter.")])
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=NIGHT1))
    (item,) = _items(offline_home, "m-1")
    assert (item.actor_id, item.namespace, item.state) == ("u-1", ns, "open")
    store = SqliteStore(offline_home / "memlife.db")
    try:
        store.delete_many(["m-1"])
        store.put_many([rec("m-1", actor, namespace, "The office closes at noon.", owner="ops")])
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=NIGHT2))
    after = [i for i in _items(offline_home, "m-1") if i.item_id == item.item_id]
    assert [(i.state, i.decision) for i in after] == [("resolved", "record_gone")]


# -- inferred/dynamodb.py::_members: one key's member list per shard ----------------------
def test_forgetting_a_key_in_one_shard_leaves_a_lookalike_shards_member_list() -> None:
    """Attacks ``"\\x1f".join((*shard, subject))`` in ``memlife/inferred/dynamodb.py::
    _members`` (the separator made ':'): shard A ('a', '/x:/y') and shard B ('a:/x', '/y')
    each hold key k for a record. A forgets k; B's record still holds k and stays listed,
    so B forgetting k later removes it (a key no partition lists is never forgotten)."""
    from memlife.inferred.dynamodb import DynamoSubjects
    from tests.support.aws_state import aws_state

    shard_a, shard_b = ("a", "/x:/y"), ("a:/x", "/y")
    with aws_state("inprocess") as (_, state):
        subjects = DynamoSubjects(state)
        subjects.put(*shard_b, {"b-1": "k"}, "inferred")
        subjects.put(*shard_a, {"a-1": "k"}, "inferred")
        assert subjects.forget_keys(shard_a, {"k"}) == 1
        assert subjects.get(shard_b, ["b-1"]) == {"b-1": "k"}
        assert subjects.forget_keys(shard_b, {"k"}) == 1
        assert subjects.get(shard_b, ["b-1"]) == {}


# -- online/inputs.py::actor_arg: no '/' in an actor the online library takes ---------------
def test_an_actor_holding_a_slash_is_refused_online_and_writes_nothing(tmp_path: Path) -> None:
    """Attacks ``if "/" in text`` in ``memlife/online/inputs.py::actor_arg``: a namespace is
    built from the actor (``/users/{actor}/facts``), so 'u1/facts' would write under
    ``/users/u1/facts/facts``, inside u1's tree. ``remember`` and ``recall`` refuse such an
    actor by name and nothing is stored."""
    from memlife.errors import InputError
    from memlife.ledger import AccessLedger
    from memlife.online.memory import LongTermMemory

    store = SqliteStore(tmp_path / "memlife.db")
    mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
    try:
        with pytest.raises(InputError, match="^actor has a '/'"):
            mem.remember("u1/facts", "/users/u1/facts/facts", None, "Drinks only green tea.")
        with pytest.raises(InputError, match="^actor has a '/'"):
            mem.recall("u1/facts", "tea")
        assert list(store.iter_all()) == []
    finally:
        mem.close()
        store.close()


# -- integrations/langgraph.py::record_id: actor, path and key joined by \x00 ----------------
def test_two_langgraph_items_whose_path_and_key_read_alike_stay_two_records(
    tmp_path: Path,
) -> None:
    """Attacks ``f"{actor}\\x00{path}\\x00{key}"`` in ``memlife/integrations/langgraph.py::
    record_id`` (the separators dropped): item 'b' in ('users', 'u1', 'a') and item '/ab'
    in ('users', 'u1') would both be 'u1/users/u1/ab'. Each is its own record: the second
    put never overwrites the first (moving it to another namespace)."""
    pytest.importorskip("langgraph.store.base")
    from memlife import Memory
    from memlife.integrations.langgraph import MemlifeStore

    lg = MemlifeStore(Memory(f"sqlite:///{tmp_path / 'lg.db'}", ledger=tmp_path / "ledger"))
    lg.put(("users", "u1", "a"), "b", {"content": "Likes green tea."})
    lg.put(("users", "u1"), "/ab", {"content": "Likes black coffee."})
    first = lg.get(("users", "u1", "a"), "b")
    second = lg.get(("users", "u1"), "/ab")
    assert first is not None and first.value == {"content": "Likes green tea."}
    assert second is not None and second.value == {"content": "Likes black coffee."}


# -- the same, on the DynamoDB state's tombstones (stores without a SQLite file) ------------
@pytest.mark.usefixtures("aws")
def test_an_id_erased_twice_is_listed_with_both_texts_on_dynamodb() -> None:
    """Attacks the second name (``erased_again``) in ``memlife/state/side.py::
    DynamoTombstones.add_tombstones``: the conditional put of ``id#x`` refused the second
    text, so the listing (what the erasures export and a later erasure's sweep read) kept
    only the first; the same tombstone added again stays one row."""
    from memlife import tombstones
    from memlife.erase import _erased_keys
    from memlife.model import content_sha256

    store: Any = _RemoteStore()
    assert tombstones.add(store, [_rec("x", "Lives in Lisbon.")]) == 1
    assert tombstones.add(store, [_rec("x", "Owns a red bicycle.")]) == 1
    assert tombstones.add(store, [_rec("x", "Owns a red bicycle.")]) == 0  # idempotent
    rows = tombstones.listing(store, "u-1")
    assert sorted(r["content_sha256"] for r in rows) == sorted(
        content_sha256(t) for t in ("Lives in Lisbon.", "Owns a red bicycle.")
    )
    assert list(_erased_keys(store, "u-1")) == ["x"]
    assert tombstones.refusal(store, _rec("y", "Owns a red bicycle.")) == "ERASED_CONTENT"
