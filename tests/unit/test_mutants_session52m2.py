"""Audit 52m2: a mutation pass over the delete applier (``apply/appliers/delete.py``) and
this session's fixes (``lifecycle._rounds``, ``group.about_other_people``, ``restate``'s
wordless rule, ``embed_cache.refuse_unusable``, ``orphans._gone_or_foreign``,
``export_files.Staged``, ``dynamodb_items.refuse_too_large``,
``receipts_history._finished_later``, ``model``'s digit limit).

Each test kills a hand-made mutant that lived through the nearest unit tests (named in its
docstring: file, the change). They pass on the current code. Real SQLite stores, journals
and receipt folders, operations driven through ``run_lifecycle`` as a night (or its retry
queue) drives them.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.apply import Tally
from memlife.apply.lifecycle import run_lifecycle
from memlife.journal import OpKind, OpState, Outcome
from tests.e2e.test_agentcore_nightly import ac, harness, home  # noqa: F401 - fixtures
from tests.unit.test_guards_session33 import NS, T0, rec
from tests.unit.test_guards_session36e import (
    Env,
    env,
    executor,
    plan,
    run_one,
    stored,
    superseded_by,
)

__all__ = ["env"]  # the SQLite store, journal and receipts fixture

PAST = T0 - timedelta(days=1)


# -- apply/appliers/delete.py ---------------------------------------------------------------------
def test_a_source_ahead_of_its_replacement_in_one_batch_goes_with_it(env: Env) -> None:
    """Mutant D4 (delete.py line 38, ``sorted(..., key=REPLACEMENT_DELETED last)`` replaced
    by ``by_record.items()``). The retry queue hands the applier a shard's due deletes in
    journal order, not the planner's (``deletions.delete`` sorts its own items, so a night's
    first pass never shows it): S (superseded by R, to go with R) ahead of R. Without the
    sort S is decided while R still stands and is kept; R is deleted: S points at nothing
    (invariant 3) until another night finds it."""
    store = env[0]
    r = rec("R", "Likes green tea.", expires_at=PAST, provenance={"supersedes": ["S"]})
    s = superseded_by(rec("S"), "R")
    store.put_many([r, s])
    ex = executor(env)
    ops = ex.journal.plan([
        ex.new_op(OpKind.delete, "u-1", NS, "S", ["ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"],
                  s.sha256),
        ex.new_op(OpKind.delete, "u-1", NS, "R", ["HARD_EXPIRED"], r.sha256),
    ])  # fmt: skip
    done = run_lifecycle(ex, ops, Tally())
    assert [(o.record_id, o.outcome) for o in done] == [
        ("S", Outcome.deleted),
        ("R", Outcome.deleted),
    ]
    assert store.get("S") is None and store.get("R") is None


def test_a_record_rewritten_since_its_delete_was_planned_is_not_deleted(env: Env) -> None:
    """Mutant D5 (delete.py line 40, ``refused = stale(o, r) ...`` replaced by ``None``).
    m-1 was planned for deletion as it was read ("Likes coffee.", expired); before the
    delete ran it was rewritten ("Likes tea.", still past its deadline). The delete passes
    the record as read *now* to the store's conditional delete, so only ``stale`` sees the
    changed content: without it the rewritten record is deleted under a plan made for
    other content (invariant 10: every change re-checks its precondition)."""
    store = env[0]
    r = rec("m-1", "Likes coffee.", expires_at=PAST)
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.delete, r, ["HARD_EXPIRED"])
    store.put_many([r.model_copy(update={"content": "Likes tea."})])
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "STALE_PRECONDITION")
    assert stored(store, "m-1").content == "Likes tea."


def test_another_tenants_record_under_a_planned_id_is_not_deleted(env: Env) -> None:
    """Mutant D5 too, the scope half of ``stale``: u-1's expired m-1 was planned for
    deletion, then removed by other means and the id taken by u-2's record (expired as
    well). Without ``stale`` the delete removes u-2's record under u-1's plan (invariant
    8); with it the operation fails SCOPE_CHANGED and u-2's record stays."""
    store = env[0]
    r = rec("m-1", "Likes coffee.", expires_at=PAST)
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.delete, r, ["HARD_EXPIRED"])
    store.delete_many(["m-1"])
    theirs = rec("m-1", "Likes coffee.", actor_id="u-2", namespace="/users/u-2/facts",
                 expires_at=PAST)  # fmt: skip
    store.put_many([theirs])
    done = run_one(ex, op)
    assert (done.state, done.last_error) == (OpState.FAILED, "SCOPE_CHANGED")
    assert stored(store, "m-1").actor_id == "u-2"


def test_a_delete_killed_after_the_store_removed_the_record_is_receipted_deleted(
    env: Env,
) -> None:
    """Mutant D9 (delete.py line 58, ``gone_outcome(..., rid in current)`` with ``True``).
    The night was killed right after the store deleted m-1 (``after_delete``), before the
    journal said so. The rerun finds m-1 gone before it read it: its own killed attempt
    removed it, so its receipt must say ``deleted``; read as "gone when read" it said
    ``already_absent`` and no receipt says the record was deleted (invariant 2)."""
    from memlife import faults

    store = env[0]
    r = rec("m-1", expires_at=PAST)
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.delete, r, ["HARD_EXPIRED"])
    with faults.inject("after_delete"), pytest.raises(faults.InjectedFault):
        run_one(ex, op)
    assert store.get("m-1") is None
    again = ex.journal.get(op.operation_id)
    assert again is not None and again.state is OpState.PLANNED
    done = run_one(executor(env), again)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.deleted)


def test_a_record_another_writer_removes_after_the_read_is_not_claimed_deleted(
    env: Env,
) -> None:
    """Mutant D10 (delete.py line 58, ``gone_outcome(..., rid in current)`` with
    ``False``). m-1 is read by the delete, then removed by another writer (another
    connection to the same store file) before the delete reaches it. The delete removed
    nothing: ``already_absent``; read as "our own killed attempt" it claimed ``deleted``
    for a deletion it did not do (invariant 2: no receipt claims a delete that did not
    happen)."""
    from memlife.journal import open_journal
    from memlife.stores.sqlite import SqliteStore

    store, _, sink = env
    path = store.path
    other = SqliteStore(path)

    class Raced(SqliteStore):
        def delete_many(self, ids, **kw):  # type: ignore[no-untyped-def]
            other.delete_many(list(ids))  # another writer got there first
            return super().delete_many(ids, **kw)

    raced = Raced(path)
    try:
        r = rec("m-1", expires_at=PAST)
        store.put_many([r])
        ex = executor((raced, open_journal(raced), sink))
        op = plan(ex, OpKind.delete, r, ["HARD_EXPIRED"])
        done = run_one(ex, op)
        assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.already_absent)
        assert store.get("m-1") is None
    finally:
        raced.close()
        other.close()


def test_an_expired_record_written_again_with_a_later_deadline_is_kept(env: Env) -> None:
    """Mutant D18 (delete.py lines 93-94, the ``past_lifetime`` re-check of a
    HARD_EXPIRED/TTL_EXPIRED delete dropped). m-1 was planned for deletion past its
    deadline; before the delete ran an agent wrote the same text again with a deadline a
    month on (a LangGraph ``put`` of the same key and value): same content, so ``stale``
    passes it. Without the re-check the record is deleted under a deadline it no longer
    has (invariant 10)."""
    store = env[0]
    r = rec("m-1", expires_at=PAST)
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.delete, r, ["HARD_EXPIRED"])
    store.put_many([r.model_copy(update={"expires_at": T0 + timedelta(days=30)})])
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.skipped)
    assert store.get("m-1") is not None


def test_a_forgotten_record_written_active_again_is_not_deleted_at_its_grace(env: Env) -> None:
    """Mutant D17 (delete.py lines 90-91, the GRACE_ELAPSED status re-check dropped). m-1
    was pending deletion past its grace and planned for deletion; before the delete ran it
    was written active again with the same text. Without the re-check the active record is
    deleted for a grace it no longer has."""
    from memlife.model import Status

    store = env[0]
    r = rec("m-1", status=Status.pending_delete)
    store.put_many([r])
    ex = executor(env)
    op = plan(ex, OpKind.delete, r, ["GRACE_ELAPSED"])
    store.put_many([r.model_copy(update={"status": Status.active})])
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.skipped)
    assert stored(store, "m-1").status is Status.active


def test_a_superseded_record_made_active_again_is_kept_past_its_retention(env: Env) -> None:
    """Mutant D21 (delete.py lines 97-98, ``if r.status is not Status.superseded: return
    False`` dropped). S, superseded, was planned for deletion at the end of its superseded
    retention (ALREADY_SUPERSEDED, SUPERSEDED_RETENTION); before the delete ran an erasure
    of its replacement made it active again (same text). Without the re-check the record
    recall serves again is deleted as if still superseded."""
    from memlife.model import Status

    store = env[0]
    s = superseded_by(rec("S"), "R")
    store.put_many([rec("R", "Likes green tea."), s])
    ex = executor(env)
    op = plan(ex, OpKind.delete, s, ["ALREADY_SUPERSEDED", "SUPERSEDED_RETENTION"])
    active = s.model_copy(update={"status": Status.active,
                                  "provenance": s.provenance.model_copy(update={"replaced_by": None})})  # fmt: skip
    store.put_many([active])
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.skipped)
    assert stored(store, "S").status is Status.active


def test_a_source_whose_replacement_is_in_another_namespace_goes(env: Env) -> None:
    """Mutant D25 (delete.py line 105, the scope comparison reduced to the actor:
    ``other.actor_id != r.actor_id``). S's ``replaced_by`` names R, a record of the same
    actor in another namespace (an import's REPLACEMENT_OUT_OF_SCOPE line): R serves none
    of S's recall, so the night plans S's delete as REPLACEMENT_DELETED (audit 52h) and
    the delete must carry it out. Comparing actors only, R "stands" and S is kept, a
    superseded record no active replacement of its own stands behind (invariant 3)."""
    store = env[0]
    r = rec("R", "Likes green tea.", namespace="/users/u-1/other")
    s = superseded_by(rec("S"), "R")
    store.put_many([r, s])
    ex = executor(env)
    op = plan(ex, OpKind.delete, s, ["ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"])
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.deleted)
    assert store.get("S") is None and store.get("R") is not None


# -- policy.py: the bounds no test held ---------------------------------------------------------
@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        # P5: ``ge=0`` off pending_delete_grace_days: a negative grace deleted a forgotten
        # record the night it was forgotten, before any grace
        ((), "pending_delete_grace_days", -1),
        # P6: ``gt=0`` as ``ge=0`` on default_ttl_days: a TTL of 0 hard-expires every
        # record of the type at its creation (an obligation: no gate holds it back)
        (("memory_types", "episodic"), "default_ttl_days", 0),
        # P7: ``ge=2`` off max_group_size: a "group" of one record
        (("grouping",), "max_group_size", 1),
        # P8: the 16 MiB bound off content_max_bytes: a 1 GiB remember or import line
        (("limits",), "content_max_bytes", 2**30),
        # P9: ``le=MAX_DAYS`` off keep_answers_days (session 27's overflow)
        (("review",), "keep_answers_days", 1_000_000),
        # P10: ``le=50_000`` off waiting_listed (session 32: ~700 MB a process)
        (("review",), "waiting_listed", 1_000_000),
        # P11: ``ge=MIN_HALF_LIFE_DAYS`` as ``gt=0`` on a half-life
        (("memory_types", "semantic", "half_life_days"), "creation", 0.001),
    ],
    ids=[
        "negative grace",
        "ttl 0",
        "group of one",
        "content 1 GiB",
        "answers kept 1e6 days",
        "waiting list 1e6",
        "half-life under its floor",
    ],  # fmt: skip
)
def test_a_policy_value_past_its_bound_is_refused_by_name(
    tmp_path: Path, section: tuple[str, ...], key: str, value: object
) -> None:
    """Policy bounds (policy.py), each held against a mutant that lifted it (P5-P11): the
    policy is refused, naming the dotted key, as ``test_policy``'s own cases are."""
    from memlife.policy import PolicyError, load_policy
    from tests.unit.test_policy import _default, _write

    data = _default()
    at = data
    for part in section:
        at = at.setdefault(part, {})
    at[key] = value
    p = _write(tmp_path, data)
    with pytest.raises(PolicyError) as info:
        load_policy(p)
    assert f"key '{'.'.join((*section, key))}'" in str(info.value)


def test_a_source_whose_replacement_is_another_actors_in_the_same_namespace_goes(
    env: Env,
) -> None:
    """Mutant D26 (delete.py line 105, the scope comparison reduced to the namespace:
    ``other.namespace != r.namespace``). A namespace path need not name its actor
    (``/shared/facts``): R, taken by u-2 under the same path, serves none of u-1's recall,
    so u-1's S goes as REPLACEMENT_DELETED. Comparing namespaces only, S is kept."""
    store = env[0]
    r = rec("R", "Likes green tea.", actor_id="u-2")
    s = superseded_by(rec("S"), "R")
    store.put_many([r, s])
    ex = executor(env)
    op = plan(ex, OpKind.delete, s, ["ALREADY_SUPERSEDED", "REPLACEMENT_DELETED"])
    done = run_one(ex, op)
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.deleted)
    assert store.get("S") is None and store.get("R") is not None


# -- group.py: about_other_people / opening_names -----------------------------------------------
def test_a_text_naming_its_person_still_updates_one_that_names_none() -> None:
    """Mutant G1 (group.py line 166, ``a and b`` as ``(a or b)``): only two texts that
    BOTH open with names and share none are two people's facts. "Caroline moved to
    Berlin." after "Lives in Paris." names one side only: still a possible update."""
    from memlife.group import about_other_people

    names = frozenset({"caroline", "melanie"})
    assert not about_other_people("Caroline moved to Berlin.", "Lives in Paris.", names)
    assert not about_other_people("Moved to Berlin.", "Caroline lives in Paris.", names)
    assert about_other_people("Caroline moved to Berlin.", "Melanie lives in Paris.", names)


def test_a_lowercase_word_spelled_as_a_name_opens_no_name() -> None:
    """Mutant G4 (group.py line 156, ``word[:1].isupper() and`` dropped): a name is a word
    the shard writes capitalised; "bill paid ..." opens with no name even where "Bill" is
    one of the shard's names, so it is not read as Bill's fact against Mark's."""
    from memlife.group import about_other_people, opening_names

    names = frozenset({"bill", "mark"})
    assert opening_names("bill paid for the trip.", names) == frozenset()
    assert opening_names("Bill paid for the trip.", names) == frozenset({"bill"})
    assert not about_other_people("bill was paid by card.", "Mark pays in cash.", names)


# -- receipts_history._finished_later ---------------------------------------------------------------
def test_a_receipt_saying_failed_is_never_read_as_finished_after_the_seal(
    ac: dict,  # noqa: F811
) -> None:
    """Mutant H1 (receipts_history.py line 166, ``doc.get("outcome") in (None, "failed")``
    dropped). Night 1's delete failed retryably; night 2's retry queue deleted the record
    and wrote the operation's receipt. That receipt edited to say ``failed`` must not be
    read as the operation finished after its run's seal (a RECEIPTED row): it is a gap,
    RECEIPT_FIELD_MISMATCH, and the history shows the sealed row only."""
    import json

    from memlife.audit import open_sink
    from memlife.receipts import operation_key
    from memlife.receipts_history import record_history
    from tests.support.lifecycle import CUTOFF
    from tests.unit.test_history_retry_session52f import _nights

    rid = _nights(ac)
    sink = open_sink(ac["sink"])
    (row,) = record_history(sink, rid, since=CUTOFF.date(), until=CUTOFF.date())[:1]
    path = ac["receipts"] / operation_key(row["operation_id"])
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "outcome": "failed"}))
    gaps: list[dict[str, str]] = []
    rows = record_history(sink, rid, problems=gaps)
    assert [(r["outcome"], r["state"]) for r in rows] == [("failed", row["state"])]
    assert not any(r.get("after_seal") for r in rows)
    assert [g["code"] for g in gaps] == ["RECEIPT_FIELD_MISMATCH"]


# -- holds.py -------------------------------------------------------------------------------------
def test_a_hold_by_subject_takes_a_given_subject_whatever_its_case_and_spaces(
    home: Path,  # noqa: F811
) -> None:
    """Mutant H_3 (holds.py line 48, ``r.subject.strip().lower() == want`` as
    ``r.subject == want``). A record saved with subject "Allergy " (an agent's spelling)
    is under a legal hold placed on "allergy": compared as written, the hold took nothing
    of it and the record stayed deletable (invariant 1: a hold covers what was asked)."""
    from memlife.holds import place_hold
    from memlife.model import RetentionClass
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_guards_session37j import NOW
    from tests.unit.test_guards_session37j import rec as rec37

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec37("m-1", "Is allergic to peanuts.", subject="Allergy "),
                        rec37("m-2", "Plays the cello.", subject="music")])  # fmt: skip
        out = place_hold(store, actor="u-1", subject="allergy", now=NOW)
        assert out["held"] == ["m-1"]
        got = store.get("m-1")
        assert got is not None and got.retention_class is RetentionClass.legal_hold
