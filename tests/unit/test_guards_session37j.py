"""Guards left untested by the thirty-first audit (session 37): placing and releasing legal
holds (memlife/holds.py, memlife/erase.py::release_hold and their appliers), namespace rules
and globs (memlife/namespaces.py), a run's scope (memlife/run_scope.py).

Races are forced deterministically: a SqliteStore subclass lets another connection (what
another process does) write right before the next ``get_many`` (an applier's re-read).
Real components: the SQLite store, the hold and release runs, the policy model. Two tests
failed on the code before session 37: a release and a hold landing on another actor's record
that took the id over."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import release_hold
from memlife.holds import place_hold
from memlife.model import MemoryRecord, RetentionClass
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NS = "/users/u-1/facts"
NS2 = "/users/u-2/facts"


def rec(rid: str, content: str, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                subject="city", owner="team-a", created_at=NOW - timedelta(days=50))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


class RaceStore(SqliteStore):
    """Runs ``before_read`` (another writer, its own connection) once, right before the
    ``at``-th next ``get_many`` that names ``rid``: after every check the caller made."""

    before_read: Callable[[], None] | None = None
    rid: str = ""

    def get_many(self, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        if self.before_read is not None and self.rid in ids:
            fn, self.before_read = self.before_read, None
            fn()
        return super().get_many(ids)


def swapper(db: Path, rid: str, theirs: MemoryRecord) -> Callable[[], None]:
    """Another writer deletes ``rid`` and writes another actor's record under the id (an
    import with its own ids)."""

    def run() -> None:
        with SqliteStore(db) as other:
            other.delete_many([rid])
            other.put_many([theirs])

    return run


# -- 1. REAL BUG: the hold_release applier lifts another actor's hold ------------------------
def test_a_release_never_lifts_the_hold_of_another_actors_record_that_took_the_id(
    home: Path,
) -> None:
    """Attacks the missing scope check in ``memlife/apply/appliers/hold_release.py::
    HoldRelease.apply`` (every other applier calls ``stale``: SCOPE_CHANGED). The release
    of u-1's held ``h`` is planned; another writer replaces ``h`` with u-2's HELD record
    before the applier re-reads it. u-2's legal hold must stay (invariant 1): nobody asked
    to lift it, and the receipt names u-1."""
    db = home / "memlife.db"
    store = RaceStore(db)
    with store:
        store.put_many([rec("h", "Owes 500 EUR to Bob.", retention_class="legal_hold")])
        theirs = rec("h", "Bob's case file.", actor_id="u-2", namespace=NS2,
                     retention_class="legal_hold")  # fmt: skip
        store.rid, store.before_read = "h", swapper(db, "h", theirs)
        release_hold(store, ["h"], now=NOW)
        after = store.get("h")
        assert after is not None and after.actor_id == "u-2"
        assert after.retention_class is RetentionClass.legal_hold


# -- 2. REAL BUG: the hold applier holds another actor's record --------------------------------
def test_a_hold_for_one_actor_never_lands_on_another_actors_record_that_took_the_id(
    home: Path,
) -> None:
    """Attacks the missing scope check in ``memlife/apply/appliers/hold.py::Hold.apply``:
    ``place_hold(actor="u-1")`` refuses ids of another actor, then plans; another writer
    replaces ``m`` with u-2's record before the applier re-reads it. The hold must not land
    on u-2's record (tenants never mixed: the receipt says u-1's record was held, and u-2's
    erasure would be deferred by a hold placed for another tenant)."""
    db = home / "memlife.db"
    store = RaceStore(db)
    with store:
        store.put_many([rec("m", "Lives in Lisbon.")])
        theirs = rec("m", "Bob lives in Porto.", actor_id="u-2", namespace=NS2)
        store.rid, store.before_read = "m", swapper(db, "m", theirs)
        out = place_hold(store, ids=["m"], actor="u-1", now=NOW)
        after = store.get("m")
        assert after is not None and after.actor_id == "u-2"
        assert after.retention_class is RetentionClass.standard, out


# -- 3. holds.py place_hold: a subject is always someone's -------------------------------------
def test_a_hold_by_subject_without_an_actor_is_refused_and_holds_nothing(home: Path) -> None:
    """Attacks ``if not actor`` (``--subject needs --actor``) in ``memlife/holds.py::
    place_hold``: without it a hold on "allergy" with no actor would take (or look for)
    every tenant's records on the subject, not one person's."""
    from memlife.holds import HoldError

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a", "Is allergic to peanuts.", subject="allergy"),
                        rec("b", "Is allergic to cats.", subject="allergy", actor_id="u-2",
                            namespace=NS2)])  # fmt: skip
        with pytest.raises(HoldError, match="needs --actor"):
            place_hold(store, subject="allergy", now=NOW)
        for rid in ("a", "b"):
            r = store.get(rid)
            assert r is not None and r.retention_class is RetentionClass.standard


# -- 4. holds.py subject_ids: an inferred subject is folded as a given one -----------------
def test_a_hold_by_subject_takes_a_record_whose_inferred_subject_differs_in_case(
    home: Path,
) -> None:
    """Attacks ``s.strip().lower() == want`` (the inferred subjects) in
    ``memlife/holds.py::subject_ids``: the nightly inferred " Allergy" for a record with no
    subject of its own; a hold on "allergy" must hold it (a record left out of a hold is
    left to an erasure of the same subject: invariant 1)."""
    from memlife.inferred import InferredSubjects

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-1", "Is allergic to peanuts.", subject="allergy"),
                        rec("m-2", "Carries an EpiPen.", subject=None)])  # fmt: skip
        InferredSubjects.for_store(store).put("u-1", NS, {"m-2": " Allergy "}, "remember")
        out = place_hold(store, actor="u-1", subject="allergy", now=NOW)
        assert sorted(out["held"]) == ["m-1", "m-2"]
        r = store.get("m-2")
        assert r is not None and r.retention_class is RetentionClass.legal_hold


# -- 5. holds.py place_hold: ids given beside a subject are held too -------------------------
def test_ids_named_beside_a_subject_are_held_too(home: Path) -> None:
    """Attacks ``ids = [*ids, *subject_ids(...)]`` in ``memlife/holds.py::place_hold``: an
    operator naming ``--id x`` and ``--subject allergy`` asked for both; dropping the ids
    leaves x unheld while the receipt reads as the hold asked for."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-1", "Is allergic to peanuts.", subject="allergy"),
                        rec("x", "Plays the cello.", subject="music")])  # fmt: skip
        out = place_hold(store, ids=["x"], actor="u-1", subject="allergy", now=NOW)
        assert sorted(out["held"]) == ["m-1", "x"]
        r = store.get("x")
        assert r is not None and r.retention_class is RetentionClass.legal_hold


# -- 6. holds.py place_hold: an id named twice is one hold ------------------------------------
def test_an_id_named_twice_is_held_and_listed_once(home: Path) -> None:
    """Attacks ``list(dict.fromkeys(ids))`` in ``memlife/holds.py::place_hold``: an id given
    twice (or by --id and by --subject) must be one operation and one line of the receipt."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a", "Is allergic to peanuts.", subject="allergy")])
        out = place_hold(store, ids=["a", "a"], actor="u-1", subject="allergy", now=NOW)
        assert out["held"] == ["a"]
        assert [o["record_id"] for o in out["operations"]] == ["a"]


# -- 7. holds.py place_hold: "held" lists only what the applier held ------------------------
def test_a_record_gone_before_the_hold_applies_is_not_listed_held(home: Path) -> None:
    """Attacks ``o.outcome.value == "held"`` in ``memlife/holds.py::place_hold``: another
    writer deletes the record between planning and the applier's read; the summary must not
    name it held (a reviewer would cite a hold on a record that no longer exists)."""
    db = home / "memlife.db"
    store = RaceStore(db)
    with store:
        store.put_many([rec("m", "Lives in Lisbon."), rec("k", "Likes tea.")])

        def gone() -> None:
            with SqliteStore(db) as other:
                other.delete_many(["m"])

        store.rid, store.before_read = "m", gone
        out = place_hold(store, ids=["m", "k"], now=NOW)
        assert out["held"] == ["k"]


# -- 8. holds.py place_hold: a record already held is receipted again ------------------------
def test_a_hold_on_a_record_already_held_is_receipted_and_named(home: Path) -> None:
    """Attacks the operation planned for an already-held record in ``memlife/holds.py::
    place_hold``: the second request for the same hold is receipted (``held``) and named
    ``already_held``; skipping it would leave the request with no receipt naming it."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a", "Owes 500 EUR to Bob.")])
        assert place_hold(store, ids=["a"], now=NOW)["held"] == ["a"]
        out = place_hold(store, ids=["a"], now=NOW + timedelta(hours=1))
        assert out["held"] == ["a"] and out["already_held"] == ["a"]
        assert [o["record_id"] for o in out["operations"]] == ["a"]


# -- 9. erase.py release_hold: a release to another class gives the record that class --------
def test_a_release_to_sensitive_leaves_the_record_sensitive(home: Path) -> None:
    """Attacks ``release_payload(retention_class)`` in ``memlife/erase.py::_release``: a
    record released to ``sensitive`` (shorter retention, redaction) must not come out
    ``standard``, kept longer than its class allows with a receipt saying "sensitive"."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("h", "Diagnosed in 2024.", retention_class="legal_hold")])
        out = release_hold(store, ["h"], retention_class=RetentionClass.sensitive, now=NOW)
        assert out["released"] == ["h"] and out["retention_class"] == "sensitive"
        r = store.get("h")
        assert r is not None and r.retention_class is RetentionClass.sensitive


# -- 10. erase.py _release: an id named twice is one release ---------------------------------
def test_an_id_named_twice_is_released_and_listed_once(home: Path) -> None:
    """Attacks ``dict.fromkeys(ids)`` in ``memlife/erase.py::_release``: ``--id h --id h``
    must be one hold_release operation, and the receipt must name the release once."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("h", "Owes 500 EUR to Bob.", retention_class="legal_hold")])
        out = release_hold(store, ["h", "h"], now=NOW)
        assert out["released"] == ["h"]
        assert [o["record_id"] for o in out["operations"]] == ["h"]


# -- 11. policy owners: the shadowing check (namespaces.glob_covers) -------------------------
def _policy_with_owners(owners: list[dict[str, Any]]) -> Any:
    import yaml

    from memlife.policy import Policy

    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    return Policy.model_validate({**data, "owners": owners})


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("/users/*/**", "/users/u-1/facts"),
        ("/users/**", "/users/u-1/facts/x"),  # '**' over more than one segment
        ("/users/u-*/facts", "/users/u-*/facts"),  # the same pattern twice
    ],
)
def test_an_owner_rule_under_an_earlier_wider_rule_is_refused(
    home: Path, earlier: str, later: str
) -> None:
    """Attacks ``Policy._every_owner_rule_can_apply`` and ``memlife/namespaces.py::_covers``
    (``**`` taking any number of segments, a pattern covering itself): the first matching
    rule wins, so a later rule under an earlier one never applies; an edit meant to give
    those records another owner would silently do nothing."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="never applies"):
        _policy_with_owners([
            {"namespace": earlier, "owner": "{actor}"},
            {"namespace": later, "owner": "team-b"},
        ])  # fmt: skip


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("/users/*/facts", "/users/*/facts/archive"),  # deeper: not covered
        ("/users/u-?", "/users/u-*"),  # '?' never covers '*'
        ("/users/*", "/users/**"),  # one segment never covers any number
        ("/users/**/x", "/users/**"),
    ],
)
def test_an_owner_rule_an_earlier_rule_does_not_cover_is_accepted(
    home: Path, earlier: str, later: str
) -> None:
    """Attacks ``if not wide: return not narrow``, ``plain``, ``narrow[0] == "**"`` in
    ``memlife/namespaces.py::_covers``: a later rule matching namespaces the earlier one
    does not is live; refusing it refuses a valid policy (the nightly run cannot start)."""
    policy = _policy_with_owners([
        {"namespace": earlier, "owner": "team-a"},
        {"namespace": later, "owner": "team-b"},
    ])  # fmt: skip
    assert [o.namespace for o in policy.owners] == [earlier, later]


def test_glob_covers_never_mixes_rooted_and_unrooted_paths() -> None:
    """Attacks the leading-'/' check in ``memlife/namespaces.py::glob_covers``: an unrooted
    pattern (a namespace stored before the rule) names other namespaces than a rooted one."""
    from memlife.namespaces import glob_covers

    assert not glob_covers("users/*", "/users/u-1")
    assert not glob_covers("/users/*", "users/u-1")
    assert glob_covers("/users/*", "/users/u-1")


# -- 12. run_scope.py check_namespaces: a glob with a control character is refused ------------
def test_a_namespace_glob_holding_a_control_character_is_refused_though_it_matches(
    home: Path,
) -> None:
    """Attacks ``stored_namespace_problem(glob) is None`` in ``memlife/run_scope.py::
    check_namespaces``: only an unrooted glob may be let through for matching a stored
    namespace; "/users/[\\t-z]*/facts" (a tab in a class) matches u-1's facts, yet a control
    character is refused in any namespace (it would reach logs, receipts, reports)."""
    from memlife.errors import InputError
    from memlife.namespaces import glob_match
    from memlife.run_scope import check_namespaces

    assert glob_match("/users/[\t-z]*/facts", NS)  # it would select u-1's shard
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m", "Lives in Lisbon.")])
        check_namespaces(store, ["/users/*/facts"])  # a rooted glob is fine
        with pytest.raises(InputError, match="control character"):
            check_namespaces(store, ["/users/[\t-z]*/facts"])


# -- 13. run_scope.py unmatched_scope: the early stop waits for every actor too ---------------
def test_a_scope_whose_glob_matched_early_still_reads_every_actor_named(home: Path) -> None:
    """Attacks ``seen_actors == ids`` in the early stop of ``memlife/run_scope.py::
    unmatched_scope``: the glob matches u-1's shard, the first read; stopping there names
    ``--actor u-2`` unmatched though u-2's facts are in scope (an operator told a tenant has
    nothing, or a script that stops on scope_unmatched skipping a real run)."""
    from memlife.run_scope import unmatched_scope

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a", "Lives in Lisbon."),
                        rec("b", "Lives in Porto.", actor_id="u-2", namespace=NS2)])  # fmt: skip
        assert unmatched_scope(store, ["/users/*/facts"], ["u-1", "u-2"]) == []
        assert unmatched_scope(store, ["/users/*/facts"], ["u-1", "u-3"]) == [("--actor", "u-3")]


# -- 14. namespaces.py: a doubled leading '/' is an empty segment ---------------------------
def test_a_namespace_with_a_doubled_leading_slash_is_refused_and_matched_by_no_glob() -> None:
    """Attacks ``path[1:]`` (one leading '/' only) in ``memlife/namespaces.py::_segments``:
    "//users/u-1/facts" names another row than "/users/u-1/facts" yet reads alike; stored,
    it would be a second shard of u-1's facts that no exact lookup of the first finds."""
    from memlife.namespaces import glob_match, namespace_problem

    assert namespace_problem("//users/u-1/facts") == "has an empty segment ('//' or a trailing '/')"
    assert not glob_match("/users/*/facts", "//users/u-1/facts")


# -- 15. holds.py place_hold: with an actor, an id not found is named, the rest held ----------
def test_a_hold_with_an_actor_names_an_id_not_found_and_holds_the_rest(home: Path) -> None:
    """Attacks ``is not None`` in the foreign-id check of ``memlife/holds.py::place_hold``:
    an id no record has is "not found" (named, exit 3), not another actor's record; refusing
    the whole hold for it leaves the actor's own records unheld."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a", "Owes 500 EUR to Bob.")])
        out = place_hold(store, ids=["a", "zz"], actor="u-1", now=NOW)
        assert out["held"] == ["a"] and out["not_found"] == ["zz"]


# -- 16. holds.py subject_ids: a given subject wins over an inferred one ---------------------
def test_a_hold_by_subject_never_takes_a_record_whose_own_subject_is_another(
    home: Path,
) -> None:
    """Attacks ``elif not r.subject`` in ``memlife/holds.py::subject_ids``: only a record
    with no subject of its own is looked up among the inferred ones; a stale inference for
    "x" (subject "music") must not put it under a hold on "allergy" (a hold is scoped to
    what was asked: x's erasure would be deferred by a hold nobody placed on it)."""
    from memlife.inferred import InferredSubjects

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("m-1", "Is allergic to peanuts.", subject="allergy"),
                        rec("x", "Plays the cello.", subject="music")])  # fmt: skip
        InferredSubjects.for_store(store).put("u-1", NS, {"x": "allergy"}, "remember")
        out = place_hold(store, actor="u-1", subject="allergy", now=NOW)
        assert out["held"] == ["m-1"]
