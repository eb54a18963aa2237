"""Guards left untested by the twenty-second audit (session 37): inferred subjects (a
namespace taking a reused id over, the "misc" key, a blank subject), the inference digest's
length-prefixed ids, and the derived cache's read-ahead after an erasure sweep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.derived import derived_for
from memlife.embed_cache import EmbeddingCache
from memlife.inferred import InferredSubjects, needs_inference
from memlife.inferred.cached import inference_digest
from memlife.inferred.dynamodb import DynamoSubjects
from memlife.model import (
    MemoryRecord,
    MemoryType,
    PlanView,
    Provenance,
    RetentionClass,
    Status,
    plan_view,
)
from memlife.pinned import hold_pinned, pinned_by_a_hold, read_links
from memlife.plan import Action, Decision, Reason
from memlife.policy import load_policy
from memlife.stores.sqlite import SqliteStore
from tests.e2e.test_dry_run_fast_paths import WordHashEmbedder
from tests.support.aws_state import aws_state

T0 = datetime(2026, 5, 1, tzinfo=UTC)
SHARD = ("u-1", "/users/u-1/notes")


def rec(rid: str, content: str, hours: float = 0.0, subject: str | None = None) -> MemoryRecord:
    return MemoryRecord(id=rid, actor_id=SHARD[0], namespace=SHARD[1], content=content,
                        memory_type=MemoryType.semantic, subject=subject,
                        created_at=T0 + timedelta(hours=hours))  # fmt: skip


@pytest.fixture
def table(tmp_path: Path) -> InferredSubjects:
    return InferredSubjects.for_store(SqliteStore(tmp_path / "m.db"))


def test_a_reused_id_in_another_namespace_of_the_same_actor_takes_the_row_over(
    table: InferredSubjects,
) -> None:
    """Attacks ``OR inferred_subjects.namespace != excluded.namespace`` (and the namespace
    scope of ``forget``) in
    ``memlife/inferred/sqlite.py::SqliteSubjects.put``: the same actor's record in another
    namespace takes over a reused id's old row, and gets a key of its own words."""
    table.put("u-1", "/old", {"m-1": "maria adopted grey ~9ccd23"}, "nightly")
    table.put("u-1", "/new", {"m-1": "bob plays bass ~77aa01"}, "remember")
    assert table.get(("u-1", "/new"), ["m-1"]) == {"m-1": "bob plays bass ~77aa01"}
    assert table.get(("u-1", "/old"), ["m-1"]) == {}  # the old row's words are gone
    table.put("u-1", "/new", {"m-1": "another ~000000"}, "nightly")  # and it never moves
    assert table.get(("u-1", "/new"), ["m-1"]) == {"m-1": "bob plays bass ~77aa01"}
    # the old record's removal, finishing late, leaves the new namespace's key alone
    assert table.forget(["m-1"], ("u-1", "/old")) == 0
    assert table.get(("u-1", "/new"), ["m-1"]) == {"m-1": "bob plays bass ~77aa01"}


def test_removing_a_record_without_content_words_moves_no_misc_key(
    table: InferredSubjects,
) -> None:
    """Attacks ``words != "misc"`` in ``memlife/inferred/__init__.py::_made_from``: a text
    without content words makes the key "misc ~tag", which holds no words of it; its
    removal must not take the key off the other records grouped under it."""
    table.put(*SHARD, {"m-1": "misc ~ab12cd", "m-2": "misc ~ab12cd", "m-3": "misc ~ab12cd"},
              "nightly")  # fmt: skip
    assert table.forget_removed(SHARD, {"m-1": "ok, and so on"}) == (1, 0)
    assert table.get(SHARD, ["m-1", "m-2", "m-3"]) == {"m-2": "misc ~ab12cd",
                                                       "m-3": "misc ~ab12cd"}  # fmt: skip


def test_a_members_removal_moves_nothing_but_the_makers_moves_the_key(
    table: InferredSubjects,
) -> None:
    """Holds ``_made_from`` both ways (``memlife/inferred/__init__.py::forget_removed``):
    a member whose words did not make the key leaves the others theirs; the record whose
    words made it takes it off every other record of the shard, and only of that shard."""
    key = "coffee beans roast ~0a0b0c"
    table.put(*SHARD, {"m-1": key, "m-2": key, "m-3": key}, "nightly")
    table.put("u-1", "/other", {"m-9": key}, "nightly")
    assert table.forget_removed(SHARD, {"m-2": "Grinds the beans daily."}) == (1, 0)
    assert table.get(SHARD, ["m-1", "m-3"]) == {"m-1": key, "m-3": key}
    assert table.forget_removed(SHARD, {"m-1": "Coffee beans: roast them dark."}) == (1, 1)
    assert table.get(SHARD, ["m-1", "m-2", "m-3"]) == {}
    assert table.get(("u-1", "/other"), ["m-9"]) == {"m-9": key}


def test_a_blank_subject_is_no_subject() -> None:
    """Attacks ``v.subject.strip()`` in ``memlife/inferred/__init__.py::needs_inference``:
    a record whose subject is only spaces carries none and gets an inferred key."""
    views = [plan_view(rec("m-1", "Likes green tea.", subject="   ")),
             plan_view(rec("m-2", "Plays the bass.", subject="music")),
             plan_view(rec("m-3", "Walks the dog daily."))]  # fmt: skip
    assert needs_inference(views) == ["m-1", "m-3"]


def test_ids_that_hold_separators_never_make_two_shard_states_read_alike() -> None:
    """Attacks the ``len(id):`` prefix in ``memlife/inferred/cached.py::inference_digest``:
    ids are free text (\\x1e and \\x1f pass the record's validation). Without the prefix,
    {a, "b<fields>\\x1ec"} and {"a<fields>\\x1eb", c} join to the same text and one
    shard's kept subjects would be served, under the wrong ids, for the other."""
    policy = load_policy(None)
    h1, h2, h3 = "1" * 64, "2" * 64, "3" * 64
    n1, n2, n3 = "a" * 64, "b" * 64, "c" * 64
    base = plan_view(rec("x", "Likes green tea."))

    def view(rid: str, sha: str, norm: str, created: float) -> PlanView:
        return base._replace(id=rid, content_sha256=sha, norm_sha256=norm, negated=False,
                             created=created)  # fmt: skip

    first = [view("a", h1, n1, 1.0), view(f"b\x1f{h2}\x1f{n2}\x1f0\x1f-\x1ec", h3, n3, 2.0)]
    second = [view(f"a\x1f{h1}\x1f{n1}\x1f0\x1f-\x1eb", h2, n2, 1.0), view("c", h3, n3, 2.0)]
    assert inference_digest(first, {}, policy, "m") != inference_digest(second, {}, policy, "m")


def test_an_erasure_sweep_leaves_no_row_of_the_actor_served(tmp_path: Path) -> None:
    """Attacks ``memlife/derived.py::DerivedCache.forget_actors`` (erase_sweep's drop):
    unlike ``forget_shards`` it reset (until session 37) ``self._last``, which nothing reads, not the
    read-ahead ``_ahead``/``_span``: the same object still serves the dropped row, whose
    inferred subject key holds the erased record's words. Fails on the old code."""
    cache = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")
    derived = derived_for(cache)
    assert derived is not None
    value = {"subjects": {"m-1": "maria adopted grey ~9ccd23"}, "new": [], "statements": {},
             "updates": {}}  # fmt: skip
    derived.put(SHARD, "inference", "d1", value)
    derived.flush()
    assert derived.get(SHARD, "inference", "d1") == value  # read ahead
    assert derived.forget_actors({SHARD[0]}) == 1
    assert len(derived) == 0  # gone from the file
    assert derived.get(SHARD, "inference", "d1") is None  # and from what it serves


def test_forget_shards_leaves_no_row_served_from_the_read_ahead(tmp_path: Path) -> None:
    """Attacks ``self._ahead, self._span = {}, None`` in
    ``memlife/derived.py::DerivedCache.forget_shards``: after erasure drops a shard, the
    same object (a long-lived online process) serves none of its rows, while another
    shard's row stays."""
    cache = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")
    derived = derived_for(cache)
    assert derived is not None
    other = (SHARD[0], "/users/u-1/zz")
    derived.put(SHARD, "inference", "d1", {"subjects": {"m-1": "maria adopted ~1"}})
    derived.put(other, "inference", "d2", {"subjects": {"m-2": "bob bass ~2"}})
    derived.flush()
    assert derived.get(SHARD, "inference", "d1") is not None
    assert derived.forget_shards([SHARD]) == 1
    assert derived.get(SHARD, "inference", "d1") is None
    assert derived.get(other, "inference", "d2") == {"subjects": {"m-2": "bob bass ~2"}}


def test_a_row_kept_under_the_same_digest_with_new_entries_is_written(tmp_path: Path) -> None:
    """Attacks ``old == (digest, text)`` in ``memlife/derived.py::DerivedCache.put``: a
    staging row keeps many groups' values under one digest (policy, model, version; read
    with ``entries``); a put of the same digest with a new group's entry must be written,
    not skipped as unchanged, or every later night misses that group again."""
    cache = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")
    derived = derived_for(cache)
    assert derived is not None
    derived.put(SHARD, "staging", "ctx", {"g-1": {"n": 1}})
    derived.flush()
    assert derived.entries(SHARD, "staging", "ctx") == {"g-1": {"n": 1}}
    derived.put(SHARD, "staging", "ctx", {"g-1": {"n": 1}, "g-2": {"n": 2}})
    derived.flush()
    cache.__dict__.pop("_derived")  # the next night: a new object reads the file
    again = derived_for(cache)
    assert again is not None and again is not derived
    assert again.entries(SHARD, "staging", "ctx") == {"g-1": {"n": 1}, "g-2": {"n": 2}}


def test_entries_kept_under_another_policy_or_model_are_never_served(tmp_path: Path) -> None:
    """Attacks ``found[0] != digest`` in ``memlife/derived.py::DerivedCache.entries``: the
    row's digest is what all its groups share (policy, model, code version); under another
    one none of its entries is an answer, pending or written."""
    cache = EmbeddingCache(WordHashEmbedder(), path=tmp_path / "embeddings.db")
    derived = derived_for(cache)
    assert derived is not None
    derived.put(SHARD, "staging", "policy-1", {"g-1": {"n": 1}})
    assert derived.entries(SHARD, "staging", "policy-2") == {}  # pending
    derived.flush()
    assert derived.entries(SHARD, "staging", "policy-2") == {}  # written
    assert derived.entries(SHARD, "staging", "policy-1") == {"g-1": {"n": 1}}


def test_a_hold_two_links_up_pins_without_being_listed_as_held(tmp_path: Path) -> None:
    """Attacks ``up.append(sid)`` (``if not source.held and source.supersedes``) in
    ``memlife/pinned.py::pinned_by_a_hold``: with no held record given to walk down from
    (a store without ``held_superseded_ids`` pages only the candidate's shard; the held
    source sits in another namespace), the walk up from R2 through R1 to the held H
    must still pin R2."""
    store = SqliteStore(tmp_path / "m.db")
    held = rec("h", "Owes the landlord rent.").model_copy(update={
        "namespace": "/users/u-1/other", "retention_class": RetentionClass.legal_hold,
        "status": Status.superseded, "provenance": Provenance(replaced_by="r1")})  # fmt: skip
    r1 = rec("r1", "Owes the landlord two months of rent.", 1).model_copy(update={
        "status": Status.superseded,
        "provenance": Provenance(replaced_by="r2", supersedes=["h"])})  # fmt: skip
    r2 = rec("r2", "Owes the landlord three months of rent.", 2).model_copy(update={
        "provenance": Provenance(supersedes=["r1"])})  # fmt: skip
    store.put_many([held, r1, r2])
    assert pinned_by_a_hold(store, read_links(store, ["r2"]), ()) == {"r2"}
    r1_free = r1.model_copy(update={"provenance": Provenance(replaced_by="r9", supersedes=["h"])})
    store.put_many([r1_free])  # R1 now names another replacement: nothing pins R2
    assert pinned_by_a_hold(store, read_links(store, ["r2"]), ()) == set()


def test_a_hold_pins_down_a_chain_whose_replacements_list_no_source(tmp_path: Path) -> None:
    """Attacks ``nxt.append(by)`` in ``memlife/pinned.py::pinned_by_a_hold``: replacements
    set online (or imported) list no source, so only the walk down from the held record
    finds them; it must go past the first link, H -> R1 -> R2 pins R2."""
    store = SqliteStore(tmp_path / "m.db")
    held = rec("h", "Owes the landlord rent.").model_copy(update={
        "retention_class": RetentionClass.legal_hold, "status": Status.superseded,
        "provenance": Provenance(replaced_by="r1")})  # fmt: skip
    r1 = rec("r1", "Owes the landlord two months of rent.", 1).model_copy(update={
        "status": Status.superseded, "provenance": Provenance(replaced_by="r2")})  # fmt: skip
    r2 = rec("r2", "Owes the landlord three months of rent.", 2)
    store.put_many([held, r1, r2])
    assert pinned_by_a_hold(store, read_links(store, ["r2"]), ["h"]) == {"r2"}
    assert pinned_by_a_hold(store, read_links(store, ["r2"]), ()) == set()


class LinksByRecords:
    """A store without the SQLite fast paths (AgentCore-like): records read whole."""

    def __init__(self, inner: SqliteStore) -> None:
        self.inner = inner

    def get_many(self, ids: list[str]) -> dict[str, MemoryRecord]:
        return self.inner.get_many(ids)


def test_the_planner_walks_down_from_the_held_records_of_its_views(tmp_path: Path) -> None:
    """Attacks ``held.append(v.id)`` in ``memlife/pinned.py::hold_pinned``: on a store
    without ``held_superseded_ids`` the shard's held, superseded views are the only place
    to walk down from; R (set online, listing no source) replaces held H: its planned
    delete becomes a hold, as the delete applier would do (a dry run says what apply does)."""
    inner = SqliteStore(tmp_path / "m.db")
    held = rec("h", "Owes the landlord rent.").model_copy(update={
        "retention_class": RetentionClass.legal_hold, "status": Status.superseded,
        "provenance": Provenance(replaced_by="r")})  # fmt: skip
    r = rec("r", "Owes the landlord two months of rent.", 1)
    inner.put_many([held, r])
    views = [plan_view(held), plan_view(r)]
    planned = [Decision("r", *SHARD, Action.delete_expired, [Reason.TTL_EXPIRED])]
    out = hold_pinned(LinksByRecords(inner), views, planned)  # type: ignore[arg-type]
    assert [(d.action, d.reasons[-1]) for d in out] == [(Action.hold, Reason.HELD_SOURCE)]


def test_dynamodb_a_reused_id_in_another_namespace_of_the_same_actor_takes_the_item_over() -> None:
    """Attacks ``OR #n <> :n`` in ``memlife/inferred/dynamodb.py::DynamoSubjects.put``'s
    insert condition: the same actor's record in another namespace takes over the item a
    removed record left under a reused id, and gets a key of its own words."""
    with aws_state("inprocess") as (_, state):
        table = InferredSubjects(DynamoSubjects(state))
        table.put("u-1", "/old", {"m-1": "maria adopted grey ~9ccd23"}, "nightly")
        table.put("u-1", "/new", {"m-1": "bob plays bass ~77aa01"}, "remember")
        assert table.get(("u-1", "/new"), ["m-1"]) == {"m-1": "bob plays bass ~77aa01"}
        assert table.get(("u-1", "/old"), ["m-1"]) == {}


def test_a_superseded_record_past_its_own_expiry_is_not_kept_by_a_recent_supersede(
    tmp_path: Path,
) -> None:
    """Attacks ``Reason.SUPERSEDED_RETENTION in d.reasons`` in
    ``memlife/superseded_since.py::count_from_supersede``: only a deletion for superseded
    retention counts from the supersede; a superseded record whose own ``expires_at``
    passed is deleted tonight even though the journal superseded it yesterday."""
    from memlife.journal import Operation, OpKind, OpState, Outcome, open_journal
    from memlife.superseded_since import count_from_supersede

    policy = load_policy(None)
    cutoff = T0 + timedelta(days=30)
    store = SqliteStore(tmp_path / "m.db")
    old = rec("a", "Lives in Lisbon.").model_copy(update={
        "status": Status.superseded, "expires_at": T0 + timedelta(days=1),
        "status_changed_at": cutoff - timedelta(days=1),
        "provenance": Provenance(replaced_by="n")})  # fmt: skip
    store.put_many([rec("n", "Lives in Porto.", 1), old])
    journal = open_journal(store)
    journal.plan([Operation(operation_id="o-a", run_id="run-1", kind=OpKind.supersede,
                            actor_id=SHARD[0], namespace=SHARD[1], record_id="a", reasons=[],
                            policy_version=policy.version, replacement_id="n")])  # fmt: skip
    journal.transition("o-a", OpState.APPLIED, outcome=Outcome.superseded,
                       at=cutoff - timedelta(days=1))  # fmt: skip
    expired = Decision("a", *SHARD, Action.delete_expired, [Reason.HARD_EXPIRED])
    retention = Decision("a", *SHARD, Action.delete_expired, [Reason.SUPERSEDED_RETENTION])
    views = [plan_view(old)]
    assert count_from_supersede(store, policy, cutoff, views, [retention])[0].action is (
        Action.retain
    )  # the control: superseded retention does count from yesterday
    assert count_from_supersede(store, policy, cutoff, views, [expired])[0].action is (
        Action.delete_expired
    )


def test_dynamodb_forget_leaves_no_member_entry_of_the_erased_key() -> None:
    """Attacks the member-list deletes in ``memlife/inferred/dynamodb.py::
    DynamoSubjects.forget``: the entry's partition is a hash of the shard and the key's
    content words (three words: easily guessed back); erasure leaves none of it."""
    with aws_state("inprocess") as (_, state):
        subjects = DynamoSubjects(state)
        subjects.put(*SHARD, {"m-1": "maria adopted grey ~9ccd23"}, "nightly")
        assert subjects.forget(["m-1"], SHARD) == 1
        items = state.ddb.scan(TableName=state.table)["Items"]
        assert [i["pk"]["S"] for i in items if i["pk"]["S"].startswith(("infk#", "infs#"))] == []


def test_dynamodb_member_lists_are_per_shard_so_each_tenants_erasure_finds_its_own() -> None:
    """Attacks the shard in ``memlife/inferred/dynamodb.py::_members`` (the audit left it
    untested): two actors whose records hold the same words share a subject key. Without
    the shard in the member list's partition, u-1's erasure of the key found u-2's record
    in the list, deleted its entry (the record held the key in another shard), and u-2's
    own erasure of the key then found nothing: u-2's inferred subject, content words of the
    erased text, stayed."""
    subject = "maria adopted grey ~9ccd23"
    with aws_state("inprocess") as (_, state):
        subjects = DynamoSubjects(state)
        subjects.put("u-1", "/users/u-1/facts", {"m-1": subject}, "nightly")
        subjects.put("u-2", "/users/u-2/facts", {"m-2": subject}, "nightly")
        assert subjects.forget_keys(("u-1", "/users/u-1/facts"), {subject}) == 1
        assert subjects.get(("u-2", "/users/u-2/facts"), ["m-2"]) == {"m-2": subject}
        assert subjects.forget_keys(("u-2", "/users/u-2/facts"), {subject}) == 1
        assert subjects.get(("u-2", "/users/u-2/facts"), ["m-2"]) == {}
