"""Audit 52m: a mutation pass over the decision modules (score, group_plan, policy, holds,
gate, would_change, the delete applier, tombstones, erase).

Each test here kills a hand-made mutant that lived through the nearest unit tests (named in
its docstring: file, the change). They pass on the current code: the code is right, and
these pin the boundary or guard a mutant showed was unchecked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import memlife.group_plan as gp
from memlife.model import (
    FUTURE_SKEW,
    MemoryRecord,
    MemoryType,
    RetentionClass,
    Source,
    plan_view,
)
from memlife.policy import Grouping, Policy, load_policy
from memlife.score import Scorer

POLICY = load_policy("policies/default.yaml")
NOW = datetime(2026, 11, 1, tzinfo=UTC)
T = NOW.timestamp()


def _rec(**kw: object) -> MemoryRecord:
    base: dict[str, object] = dict(
        id="m-1", actor_id="u-1", namespace="/users/u-1/facts", memory_type=MemoryType.semantic,
        content="Lives in Lisbon.", owner="team", source=Source.user_stated,
        created_at=NOW - timedelta(days=10),
    )  # fmt: skip
    base.update(kw)
    return MemoryRecord(**base)  # type: ignore[arg-type]


# -- score.py -------------------------------------------------------------------------------------
def _episodic_verification_weighted() -> Policy:
    """The default policy, with episodic records (no staleness limit) weighting verification."""
    data = POLICY.model_dump(mode="json")
    data["memory_types"]["episodic"]["weights"]["verification"] = 0.4
    return Policy.model_validate(data)


@pytest.mark.parametrize("retention", list(RetentionClass))
@pytest.mark.parametrize("mt", list(MemoryType))
def test_the_hot_path_score_is_the_breakdowns_score(
    mt: MemoryType, retention: RetentionClass
) -> None:
    """Mutants S7 (score.py ``score``: ``total += c.w_verify`` dropped, a type without a
    staleness limit counted as never verified) and S14 (``parts``: the sensitivity penalty
    dropped). The planner selects on ``score``, the dry run's report explains with
    ``parts``: the two must be one number for every type and retention class, including a
    type with no staleness limit whose verification weight is not zero."""
    scorer = Scorer(_episodic_verification_weighted())
    v = plan_view(_rec(memory_type=mt, retention_class=retention, access_count=2,
                       last_accessed_at=NOW - timedelta(days=3),
                       last_verified_at=NOW - timedelta(days=30)))  # fmt: skip
    parts = scorer.parts(v, T)
    assert scorer.score(v, T) == pytest.approx(parts.score, abs=1e-12)
    if mt is MemoryType.episodic:
        assert parts.verification == 1.0  # no staleness limit: always fresh


def test_a_read_stamped_exactly_at_the_clock_skew_is_a_read() -> None:
    """Mutant S1 (score.py ``parts``: ``r.last_accessed <= now + _SKEW`` made ``<``). A read
    stamped at the cutoff plus the allowed skew is within it (as the hot path counts it):
    read at the cutoff, not never read."""
    scorer = Scorer(POLICY)
    v = plan_view(_rec(last_accessed_at=NOW + FUTURE_SKEW, access_count=1))
    parts = scorer.parts(v, T)
    assert parts.access_recency == 1.0
    assert scorer.score(v, T) == pytest.approx(parts.score, abs=1e-12)
    late = plan_view(_rec(last_accessed_at=NOW + FUTURE_SKEW + timedelta(seconds=1)))
    assert scorer.parts(late, T).access_recency == 0.0  # control: past the skew, no read


# -- group_plan.py --------------------------------------------------------------------------------
def _member(rid: str, content: str, day: int, **kw: object) -> gp.Member:
    kw.setdefault("memory_type", MemoryType.semantic)
    kw.setdefault("subject", "home")
    return gp.Member.of(_rec(id=rid, content=content, created_at=NOW + timedelta(days=day), **kw))


def _vectors(rows: dict[str, list[float]], members: list[gp.Member]):  # type: ignore[no-untyped-def]
    by_key = {m.statement: np.asarray(rows[m.id], dtype=np.float32) for m in members}

    def vectors(keys):  # type: ignore[no-untyped-def]
        out = np.stack([by_key[k] for k in keys])
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    return vectors


def test_a_cosine_exactly_at_the_threshold_is_a_near_duplicate() -> None:
    """Mutant G2 (group_plan.py ``cluster_statements``: ``sims[j] >= threshold`` made ``>``).
    The policy's ``near_duplicate_cosine`` is the similarity AT which statements merge: with
    1.0 (the highest it allows), two statements whose vectors are identical are one."""
    ms = [_member("a", "Lives in Lisbon.", 0), _member("b", "Resides in Lisbon.", 1)]
    same = _vectors({"a": [1.0, 0.0], "b": [1.0, 0.0]}, ms)
    plan = gp.plan_group(ms, same, grouping=Grouping(near_duplicate_cosine=1.0),
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.roles == {"b": gp.SURVIVOR, "a": gp.NEAR_DUPLICATE}
    apart = _vectors({"a": [1.0, 0.0], "b": [0.999, 0.0447]}, ms)  # control: just below 1
    plan = gp.plan_group(ms, apart, grouping=Grouping(near_duplicate_cosine=1.0),
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.roles == {"b": gp.SURVIVOR, "a": gp.CONTRADICTION}


def test_the_consolidation_key_separates_actors_and_contents() -> None:
    """Mutants G12 (``consolidation_key`` without ``actor_id``) and G13 (members keyed by
    id only, not ``id:sha``). The key names the replacement a rerun finds: two actors' groups
    in one shared namespace, with ids an actor reused, must not name one replacement; nor
    may a group whose member was rewritten since (new content, same id) find the
    replacement planned from the old text."""
    ms = [_member("a", "Lives in Lisbon.", 0), _member("b", "Lives in Porto.", 1)]
    key = gp.consolidation_key("u-1", "/shared/facts", "home", ms)
    assert key != gp.consolidation_key("u-2", "/shared/facts", "home", ms)
    edited = [ms[0], _member("b", "Lives in Faro.", 1)]
    assert key != gp.consolidation_key("u-1", "/shared/facts", "home", edited)
    # control: deterministic over the same members in any order (a rerun finds it)
    assert key == gp.consolidation_key("u-1", "/shared/facts", "home", ms[::-1])


def test_members_in_any_order_make_the_same_plan() -> None:
    """Mutant G18 (``plan_group``: the oldest-first sort dropped). The store hands members
    over in its own order; the cap must still send the survivor and the NEWEST others, and
    the statement leaders are still the oldest sayings. Every caller happened to pass them
    sorted, so nothing failed; a store paging by id would not."""
    ms = [_member(f"m{i:02d}", "Drinks tea.", i) for i in range(15)]
    cap = Grouping(max_group_size=12)
    plan = gp.plan_group(ms, None, grouping=cap, weights=POLICY.source_weights)
    shuffled = gp.plan_group(ms[::-1], None, grouping=cap, weights=POLICY.source_weights)
    assert plan is not None and shuffled is not None
    assert shuffled.to_model == plan.to_model == [f"m{i:02d}" for i in range(3, 15)]
    assert shuffled.ids == plan.ids and shuffled.over_cap == plan.over_cap == 3


def test_a_conflicting_statement_takes_no_seat_the_model_has() -> None:
    """Mutant G21 (``plan_group``: ``others`` built from every member, not those with a
    role). A newer statement from a weaker source is conflicting: kept for review, neither
    superseded nor shown. It must not take one of the ``max_group_size`` seats either: with
    a cap of 2, the survivor's restatement is what the model sees beside the survivor."""
    ms = [
        _member("d", "Drinks tea.", 1),
        _member("s", "Drinks tea every day.", 5, source=Source.system_of_record),
        _member("x", "Drinks only coffee.", 9, source=Source.agent_inferred),
    ]
    rows = {"d": [1.0, 0.0], "s": [1.0, 0.0], "x": [0.0, 1.0]}
    plan = gp.plan_group(ms, _vectors(rows, ms), grouping=Grouping(max_group_size=2),
                         weights=POLICY.source_weights)  # fmt: skip
    assert plan is not None and plan.survivor_id == "s" and plan.conflicting == ["x"]
    assert plan.to_model == ["d", "s"] and plan.over_cap == 0 and "x" not in plan.ids


# -- tombstones.py --------------------------------------------------------------------------------
def test_reads_between_two_erasures_of_a_reused_id_stay_dropped_once_it_is_reused_again(
    tmp_path: Path,
) -> None:
    """Mutant T5 (tombstones.py ``erased_times``: ``at > erased[pair]`` made ``<``, the FIRST
    erasure of an id taken for its last). 'x' is erased, reused, read, erased again, and
    reused a third time. The read between the erasures was of the second erased record:
    dropped. The read after the last erasure is the third record's: kept. (With 'x' not
    reused again, an older test passes either way: every read of a gone id is dropped.)"""
    from memlife.erase import erase
    from memlife.ledger import AccessLedger
    from memlife.model import utcnow
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_erase import NOW as E_NOW
    from tests.unit.test_erase import rec

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Lives in Lisbon."), rec("y", "Drinks green tea.")])
        assert erase(store, "u-1", ids=["x"], now=E_NOW)["erased"] == ["x"]
        again = rec("x", "Owns a red bicycle.").model_copy(update={"created_at": utcnow()})
        assert store.put_many([again]).succeeded == ["x"]
        between = utcnow()
        later = E_NOW + timedelta(hours=1)
        assert erase(store, "u-1", ids=["x"], now=later)["erased"] == ["x"]
        third = rec("x", "Plays the cello on Sundays.").model_copy(update={"created_at": utcnow()})
        assert store.put_many([third]).succeeded == ["x"]
        after = utcnow() + timedelta(seconds=1)
        ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
        ledger.watch_erasures(store)
        for rid, at in [("x", between), ("x", after), ("y", between)]:
            ledger.append("u-1", "/users/u-1/facts", rid, at=at)
        ledger.flush()
        kept = ledger.read()
        # the third x's read, and y's; never the read of the second (erased) x
        assert sorted(kept.column("record_id").to_pylist()) == ["x", "y"]
    finally:
        store.close()


# -- would_change.py ------------------------------------------------------------------------------
def test_no_merge_is_promised_when_every_group_is_withheld() -> None:
    """Mutant W2 (would_change.py: ``groups_out >= groups`` made ``>``). Without an
    evaluation set an apply run withholds every group in the enforced namespaces: when the
    groups withheld are all the groups proposed, none of their merges or supersedes
    happens, and the dry run must not promise them."""
    from memlife.would_change import would_change

    summary = {
        "counts": {},
        "other_counts": {"consolidation_proposed": 2, "merged_duplicates": 3,
                         "contradictions_resolved": 1},
        "gate": {"configured": False, "withheld_groups": 2, "withheld_deletions": 0},
    }  # fmt: skip
    rows = dict(would_change(summary))
    assert rows["consolidate (groups)"] == 0
    assert rows["merge duplicates"] == rows["supersede contradicted"] == 0
    assert rows["withhold, no eval set: groups"] == 2
    # control: one of the two withheld, the merges are an upper bound and still shown
    summary["gate"]["withheld_groups"] = 1  # type: ignore[index]
    rows = dict(would_change(summary))
    assert rows["consolidate (groups)"] == 1 and rows["merge duplicates"] == 3


def test_withheld_deletions_and_answered_reviews_are_not_promised() -> None:
    """Mutants W9/W10 (would_change.py: the no-evaluation-set figures ``withheld_groups`` /
    ``withheld_deletions`` replaced by the gate's ``held_back``, which such a run does not
    have) and W7 (``review_answered`` not subtracted). A dry run without an evaluation set
    must not promise the deletions an apply run withholds, nor list for review the items a
    reviewer already answered (the apply run closes them, it opens none)."""
    from memlife.would_change import would_change

    summary = {
        "counts": {"delete_expired": 2, "delete_pending": 3, "review": 4},
        "other_counts": {"review_answered": 1},
        "gate": {"configured": False, "withheld_groups": 0, "withheld_deletions": 3},
    }  # fmt: skip
    rows = dict(would_change(summary))
    assert rows["delete"] == 2 and rows["withhold, no eval set: deletions"] == 3
    assert rows["left for review"] == 3
    # control: with a set, what its verdict holds back is taken off the same way
    summary["gate"] = {"configured": True, "held_back": {"deletions": 1, "groups": 0}}
    rows = dict(would_change(summary))
    assert rows["delete"] == 4 and rows["hold back, gate: deletions"] == 1


# -- erase.py -------------------------------------------------------------------------------------
def test_a_source_past_the_chain_bound_is_erased_not_brought_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mutant E10 (erase.py ``_source_of``: ``return True`` past ``MAX_CHAIN`` made
    ``False``). A subject consolidated again night after night hands its sources on to each
    newer replacement (``status._repoint``), so its chain of ``supersedes`` grows a level a
    night. Past the bound the walk cannot tell whose claims a superseded source holds: it
    must go with the erased replacement, never come back active with the erased text.
    The bound is lowered to 1 here so a two-level chain is past it."""
    import memlife.erase as erase_mod
    from memlife.model import Status
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_erase import NOW as E_NOW
    from tests.unit.test_erase import rec

    monkeypatch.setattr(erase_mod, "MAX_CHAIN", 1)
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        sup = Status.superseded
        store.put_many([
            rec("s1", "Works at Acme as a welder.", status=sup, replaced_by="Y"),
            rec("X", "Welder at Acme.", status=sup, replaced_by="Y", supersedes=("s1",)),
            rec("z", "Lives near the Acme plant.", status=sup, replaced_by="Y"),
            rec("Y", "Acme welder living near the plant.", supersedes=("X", "z")),
            rec("k", "Drinks green tea."),
        ])  # fmt: skip
        result = erase_mod.erase(store, "u-1", ids=["Y"], now=E_NOW)
        assert {"Y", "X", "z"} <= set(result["erased"])
        assert store.get("s1") is None, result  # not reactivated with Y's claims
        assert store.get("k") is not None  # control: an unrelated record stays
    finally:
        store.close()


def test_a_withdrawn_replacement_a_hold_pins_keeps_its_other_sources_superseded(
    tmp_path: Path,
) -> None:
    """Mutant E21 (erase.py ``_split_held``: ``r.provenance.replaced_by not in pinned``
    dropped from the reactivation filter). W was written by a model from e, h and k; e is
    erased, so W is withdrawn and its kept sources would come back active. But h is under
    legal hold and points to W: W is deferred with it (it stays, active). Its other source
    k must stay superseded by W: brought back active beside the very replacement that
    still states its claims, the actor's recall serves both, and W ``supersedes`` an active
    record. Once the hold is lifted the deferred withdrawal reactivates k then."""
    from memlife.erase import erase
    from memlife.model import RetentionClass, Status
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_erase import NOW as E_NOW
    from tests.unit.test_erase import rec

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        sup = Status.superseded
        store.put_many([
            rec("e", "Was treated for asthma in 2019.", status=sup, replaced_by="W"),
            rec("h", "Works night shifts at the depot.", status=sup, replaced_by="W",
                retention=RetentionClass.legal_hold),
            rec("k", "Cycles to work every day.", status=sup, replaced_by="W"),
            rec("W", "An asthmatic night-shift worker who cycles to the depot.",
                supersedes=("e", "h", "k")),
        ])  # fmt: skip
        result = erase(store, "u-1", ids=["e"], now=E_NOW)
        assert "e" in result["erased"] and store.get("e") is None
        w, k = store.get("W"), store.get("k")
        assert w is not None and w.status is Status.active  # deferred with its held source
        assert k is not None and k.status is Status.superseded, result
        assert k.provenance.replaced_by == "W"
    finally:
        store.close()


def test_a_request_for_a_record_already_deferred_is_deferred_again_and_receipted(
    tmp_path: Path,
) -> None:
    """Mutant E29 (erase.py ``_erase``: ``or why[r.id] == "ERASURE_REQUEST"`` dropped from
    ``fresh``). A held record whose erasure is pending is asked for again (a second data
    subject request): that request is deferred too, with its own run, operation and
    deferral receipt, not silently folded into the first. A pass over the pending rows
    alone (no request) defers nothing again (control)."""
    from memlife.erase import erase
    from memlife.model import RetentionClass
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_erase import NOW as E_NOW
    from tests.unit.test_erase import rec

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Was treated for asthma.", retention=RetentionClass.legal_hold)])
        assert erase(store, "u-1", ids=["x"], now=E_NOW)["deferred"] == ["x"]
        again = erase(store, "u-1", ids=["x"], now=E_NOW + timedelta(days=1))
        assert again["deferred"] == ["x"] and again["counts"]["deferred"] == 1, again
        sweep = erase(store, None, now=E_NOW + timedelta(days=2))
        assert sweep["deferred"] == [] and store.get("x") is not None
    finally:
        store.close()


def test_a_pending_erasure_never_takes_a_record_of_another_namespace_under_its_id(
    tmp_path: Path,
) -> None:
    """Mutant E24 (erase.py ``_is_its_record``: the namespace left out of the match). x's
    erasure was deferred by a hold in one namespace; x then went by other means (its hold
    lifted and the record removed outside memlife's erase), and the actor's new record in
    ANOTHER namespace took the id. The pending row is not that record's: a pending pass
    must leave it, and forget the row."""
    from memlife.erase import erase, pending_erasures
    from memlife.model import RetentionClass
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_erase import NOW as E_NOW
    from tests.unit.test_erase import rec

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Was treated for asthma.", retention=RetentionClass.legal_hold)])
        assert erase(store, "u-1", ids=["x"], now=E_NOW)["deferred"] == ["x"]
        store.put_many([rec("x", "Was treated for asthma.")])  # the hold lifted by hand
        assert store.delete_many(["x"]).succeeded == ["x"]  # removed by other means
        store.put_many([rec("x", "Plays the cello on Sundays.", ns="hobbies")])
        erase(store, None, now=E_NOW + timedelta(days=1))
        other = store.get("x")
        assert other is not None and other.namespace == "/users/u-1/hobbies"
        assert pending_erasures(store, "u-1") == []  # the row is forgotten
    finally:
        store.close()


def test_releasing_a_hold_to_legal_hold_is_refused_before_any_run(tmp_path: Path) -> None:
    """Mutant E34 (erase.py ``release_hold``: the ``legal_hold`` target class no longer
    refused). "Releasing" to legal_hold would journal and receipt a hold_release that
    releases nothing: a receipt an operator could cite for a hold that still stands."""
    from memlife.erase import EraseError, release_hold
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_erase import rec

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Was treated for asthma.", retention=RetentionClass.legal_hold)])
        with pytest.raises(EraseError, match="not a release"):
            release_hold(store, ["x"], retention_class=RetentionClass.legal_hold)
        x = store.get("x")
        assert x is not None and x.retention_class is RetentionClass.legal_hold
    finally:
        store.close()


# -- gate.py --------------------------------------------------------------------------------------
def _report(unchecked: list[str]) -> dict[str, object]:
    from memlife.gate import GATES

    good = {"must_retain_recall": 1.0, "aggregate_score": 1.0}
    return {
        "gates": {n: {"value": good.get(n, 0.0), "threshold": 0.0, "passed": True}
                  for n in GATES},  # fmt: skip
        "cases": 1, "replicas": 1, "failed_cases": [], "high_impact_failed": [],
        "flaky_cases": [], "answers_unchecked": unchecked,
        "results": [{"id": "c1", "passed": True, "score": 1.0, "contradiction": False}],
    }  # fmt: skip


def test_a_verdict_with_answers_the_model_never_checked_is_no_pass() -> None:
    """Mutant GA14 (gate.py ``verdict``: ``or unchecked`` dropped from the status). A case
    whose answer check did not run (the model was down) was not checked: the verdict is
    ``warn`` and names it, never ``pass`` (audit 49iii's promise, held by no test of the
    status itself). It blocks nothing (control: without it, ``pass``)."""
    from memlife.gate import verdict

    out = verdict(_report(["c1"]), _report([]), 0)
    assert out["status"] == "warn" and not out["blocked"] and out["answers_unchecked"] == ["c1"]
    assert verdict(_report([]), _report([]), 0)["status"] == "pass"


def test_only_actors_owning_a_deletion_are_named_as_blocking() -> None:
    """Mutant GA18 (gate.py ``blocking_actors``: ``& {owners of the deletions}`` dropped).
    Recall is scoped to the case's actor: a case of u-2, who owns no deletion, cannot have
    been made worse by the deletions, and naming u-2 puts an actor in the receipt's
    ``blocking_actors`` whose deletions were never held. u-1's worse case names u-1."""
    from types import SimpleNamespace

    from memlife.gate import blocking_actors

    def res(cid: str, passed: bool) -> dict[str, object]:
        return {"id": cid, "passed": passed, "score": 1.0 if passed else 0.0,
                "contradiction": False}  # fmt: skip

    before = {"results": [res("c1", True), res("c2", True)]}
    after = {"results": [res("c1", False), res("c2", False)]}
    cases = [SimpleNamespace(id="c1", actor_id="u-1"), SimpleNamespace(id="c2", actor_id="u-2")]
    got = blocking_actors(before, after, cases, {"d1": "u-1"}, ["d1"])  # type: ignore[arg-type]
    assert got == ["u-1"]
