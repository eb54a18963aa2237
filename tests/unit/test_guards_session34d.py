"""Guards a mutation audit found unattacked (session 34, round d: the start of a run, the
nightly score and the planner's decisions, the commit's gate and a dry run's "an apply run
would"): the run key's store and behaviour, a dry run's lease, policy record and CloudTrail
preview, the sealing of a misplaced run folder, the planner's thresholds at their
boundaries, the score's clock skew and what the gate holds back. Each test holds one
guarantee that a named guard in memlife/ alone keeps, and fails when that guard is removed
or loosened. Real components: the SQLite store, the default policy, the real planner and
scorer, the file sink, the local engine."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlife.audit import FileSink
from memlife.journal import open_journal
from memlife.lease import NAME as LEASE
from memlife.model import FUTURE_SKEW, MemoryRecord, MemoryType, RetentionClass, plan_view
from memlife.plan import Action, Decision, Planner, Reason, ShardHints
from memlife.policy import load_policy
from memlife.run_start import start_run
from memlife.run_types import RunConfig
from memlife.score import Scorer
from memlife.stores.sqlite import SqliteStore

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
POLICY = load_policy("policies/default.yaml")
NS = "/users/u-1/facts"
DAY = timedelta(days=1)


def rec(rid: str, content: str = "Lives in Lisbon.", **kw: Any) -> MemoryRecord:
    """A healthy record (retained with SCORE_OK) unless overridden."""
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                owner="team-a", source="user_stated", created_at=T0 - 10 * DAY,
                last_accessed_at=T0 - DAY, access_count=8,
                last_verified_at=T0 - 5 * DAY)  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def plan(*records: MemoryRecord, now: datetime = T0) -> dict[str, Decision]:
    views = [plan_view(r) for r in records]
    return {d.id: d for d in Planner(POLICY, now).plan_shard([views])}


# -- 1. plan.py: a type's TTL expires at its boundary, on every path ------------------------
def test_a_record_exactly_its_types_ttl_old_is_deleted_as_expired() -> None:
    """Attacks ``r.created + ttl <= self._now`` in Planner.expired and the two fast paths
    (plan_shard's ``r[7] + t > now``, _early's ``r.created + ttl > self._now``): hard
    expiry is inclusive (`expires_at <= cutoff`, DESIGN step 3) and a type's default TTL
    is the same deadline for records without one. An episodic record created exactly
    ``default_ttl_days`` before the cutoff is deleted that night, not a night later."""
    ttl = POLICY.memory_types[MemoryType.episodic].default_ttl_days
    assert ttl
    at = rec("at", memory_type="episodic", namespace="/users/u-1/episodes",
             created_at=T0 - timedelta(days=ttl))  # fmt: skip
    inside = rec("in", memory_type="episodic", namespace="/users/u-1/episodes",
                 created_at=T0 - timedelta(days=ttl) + timedelta(seconds=1))  # fmt: skip
    ds = plan(at, inside)
    assert ds["at"].action is Action.delete_expired and ds["at"].reasons == [Reason.TTL_EXPIRED]
    assert ds["at"].score is None  # no score computed for an expired record
    assert ds["in"].action is Action.retain


# -- 2. plan.py: a pending delete's grace ends at its boundary ---------------------------------
def test_a_pending_delete_is_deleted_when_its_grace_has_exactly_elapsed() -> None:
    """Attacks ``changed + self._grace <= self._now``: a record marked pending_delete
    exactly ``pending_delete_grace_days`` before the cutoff has had its grace; one marked a
    second later still has it."""
    grace = timedelta(days=POLICY.pending_delete_grace_days)
    ds = plan(
        rec("due", status="pending_delete", status_changed_at=T0 - grace),
        rec("wait", status="pending_delete", status_changed_at=T0 - grace + timedelta(seconds=1)),
    )
    assert ds["due"].action is Action.delete_pending
    assert ds["due"].reasons == [Reason.GRACE_ELAPSED]
    assert ds["wait"].action is Action.retain and ds["wait"].reasons == [Reason.PENDING_GRACE]


# -- 3. plan.py: "frequently recalled" starts at frequent_access_count --------------------------
def _fading(rid: str, count: int) -> MemoryRecord:
    """A semantic, standard record that scores under low_score and was never verified."""
    return rec(rid, created_at=T0 - 3000 * DAY, last_accessed_at=T0 - 3000 * DAY,
               access_count=count, last_verified_at=None, source="agent_inferred",
               confidence=0.0)  # fmt: skip


def test_a_record_recalled_exactly_frequent_access_count_times_is_a_review_item() -> None:
    """Attacks ``r[9] >= frequent`` in _decide_live and ``r.access_count >=
    frequent_access_count`` in Planner._matters (the review sweep's question): acting on a
    stale or low-scoring record matters once the agent has recalled it
    ``review.frequent_access_count`` times. At that count the finding is a review item, and
    the sweep agrees it holds; one recall fewer, it is only noted."""
    n = POLICY.review.frequent_access_count
    planner = Planner(POLICY, T0)
    ds = plan(_fading("at", n), _fading("below", n - 1))
    at, below = ds["at"], ds["below"]
    assert at.score is not None and at.score < POLICY.memory_types[MemoryType.semantic].low_score
    assert at.action is Action.review
    assert {Reason.LOW_SCORE, Reason.STALE_VERIFICATION} <= set(at.reasons)
    assert planner.low_score_finding(plan_view(_fading("at", n)))
    assert below.action is Action.retain and Reason.LOW_SCORE in below.reasons
    assert not planner.low_score_finding(plan_view(_fading("below", n - 1)))


# -- 4. plan.py: verification goes stale after verification_stale_days, not at it --------------
def test_a_record_verified_exactly_the_stale_limit_ago_is_not_yet_stale() -> None:
    """Attacks ``r[10] < limit`` (verified before cutoff - verification_stale_days =
    stale): the score's verification part reaches 0 at the limit, and the planner's
    "stale" starts after it. A procedural record (staleness matters) verified exactly 180
    days ago is retained; one second earlier it is a STALE_VERIFICATION review item."""
    days = POLICY.memory_types[MemoryType.procedural].verification_stale_days
    assert days
    kw = dict(memory_type="procedural", created_at=T0 - 400 * DAY, source="system_of_record")
    ds = plan(
        rec("at", "Deploy after staging.", last_verified_at=T0 - timedelta(days=days), **kw),
        rec("past", "Roll back on alarm.",
            last_verified_at=T0 - timedelta(days=days, seconds=1), **kw),
    )  # fmt: skip
    assert Reason.STALE_VERIFICATION not in ds["at"].reasons, ds["at"]
    assert ds["past"].action is Action.review
    assert Reason.STALE_VERIFICATION in ds["past"].reasons


# -- 5. plan.py: a score equal to the type's low_score is not low ------------------------------
def test_a_record_scoring_exactly_the_low_score_is_not_a_low_score_finding() -> None:
    """Attacks ``score < low[mt]`` in _decide_live and ``< self._low[...]`` in
    Planner.low_score_finding: ``low_score`` is the lowest score a record may keep without
    a finding. A frequently recalled record (so a finding would be a review item) scoring
    exactly the threshold is retained, and the review sweep agrees; a hair under it is a
    LOW_SCORE review item."""
    r = rec("a", created_at=T0 - 900 * DAY, last_accessed_at=T0 - 400 * DAY, access_count=6)
    score = Scorer(POLICY).score(plan_view(r), T0.timestamp())
    semantic = POLICY.memory_types[MemoryType.semantic]

    def planner(low: float) -> Planner:
        moved = semantic.model_copy(update={"low_score": low})
        types = {**POLICY.memory_types, MemoryType.semantic: moved}
        return Planner(POLICY.model_copy(update={"memory_types": types}), T0)

    (at,) = planner(score).plan_shard([[plan_view(r)]])
    assert at.score == score and at.action is Action.retain, at
    assert Reason.LOW_SCORE not in at.reasons
    assert not planner(score).low_score_finding(plan_view(r))
    (above,) = planner(score + 1e-9).plan_shard([[plan_view(r)]])
    assert above.action is Action.review and Reason.LOW_SCORE in above.reasons


# -- 6. plan.py: a reason only noted never rides on a review decision ---------------------------
def test_staleness_that_does_not_matter_opens_no_item_on_a_conflicting_source_review() -> None:
    """Attacks ``extra = review if g.action is review_action else review + noted``: every
    review reason on a review decision opens a review item; a stale verification of a
    record where it does not matter (semantic, standard, rarely recalled) only lowers its
    score. On a CONFLICTING_SOURCE pair the stale record's decision names the conflict, not
    STALE_VERIFICATION."""
    ds = plan(
        rec("old", "Prefers a window seat.", subject="seat", created_at=T0 - 500 * DAY,
            source="user_confirmed", last_verified_at=None, access_count=1),
        rec("new", "Prefers an aisle seat.", subject="seat", source="agent_inferred"),
    )  # fmt: skip
    old = ds["old"]
    assert old.action is Action.review and Reason.CONFLICTING_SOURCE in old.reasons
    assert Reason.STALE_VERIFICATION not in old.reasons, old
    # alone, the same record is retained with the staleness noted: the reason is real
    (alone,) = Planner(POLICY, T0).plan_shard([[plan_view(rec(
        "old", subject="seat", created_at=T0 - 500 * DAY, source="user_confirmed",
        last_verified_at=None, access_count=1))]])  # fmt: skip
    assert alone.action is Action.retain and Reason.STALE_VERIFICATION in alone.reasons


# -- 7. plan.py: a statement dated after the cutoff never wins its group ------------------------
def test_a_statement_dated_after_the_cutoff_never_supersedes_a_genuine_one() -> None:
    """Attacks ``r.created <= future`` in _group's rank: a record whose created_at lies
    past the cutoff (+ FUTURE_SKEW: a skewed clock, a forged import) ranks below every
    genuine statement. It never becomes the survivor that supersedes what the user said
    before the cutoff."""
    ds = plan(
        rec("genuine", "Lives in Porto.", subject="home", created_at=T0 - 20 * DAY),
        rec("future", "Lives in Lisbon.", subject="home", created_at=T0 + 30 * DAY),
    )
    assert ds["genuine"].action is not Action.supersede_candidate, ds["genuine"]
    assert ds["future"].survivor != "future"
    assert ds["future"].action is Action.supersede_candidate
    assert ds["future"].survivor == "genuine"


# -- 8. plan.py: an inferred subject merges procedures only when they are identical ------------
def test_near_duplicate_procedures_under_an_inferred_subject_are_not_merged() -> None:
    """Attacks ``if not exact and c[0].memory_type == MemoryType.procedural: continue`` in
    _inferred: "roll back after step 4" and "roll back after step 5" embed alike and may
    share a statement key, but a procedure is the strictest type: merging them would
    drop a step. Only identical procedures merge under a subject nobody named."""
    kw = dict(memory_type="procedural", subject=None, source="system_of_record")
    hints = ShardHints(subjects={"a": "rollback ~1", "b": "rollback ~1"},
                       statements={"a": "s1", "b": "s1"})  # fmt: skip
    views = [plan_view(rec("a", "Roll back after step 4 fails.", created_at=T0 - 30 * DAY, **kw)),
             plan_view(rec("b", "Roll back after step 5 fails.", **kw))]  # fmt: skip
    ds = {d.id: d for d in Planner(POLICY, T0).plan_shard([views], hints)}
    assert all(d.action is not Action.consolidate_candidate for d in ds.values()), ds
    assert all(d.group is None for d in ds.values())
    # the same procedure said twice does merge: the hints reach the planner
    same = [plan_view(rec("a", "Roll back after step 4 fails.", created_at=T0 - 30 * DAY, **kw)),
            plan_view(rec("b", "Roll back after step 4 fails.", **kw))]  # fmt: skip
    merged = Planner(POLICY, T0).plan_shard([same], hints)
    assert {d.action for d in merged} == {Action.consolidate_candidate}


# -- 9. run_start.py run_key: two stores never share a run -----------------------------------
def test_two_stores_run_at_one_cutoff_get_two_run_ids(home: Path, tmp_path: Path) -> None:
    """Attacks ``"store": store`` in run_key: one receipts location may serve several
    stores. Two stores run with the same policy, cutoff and scope must be two runs: the
    same id would make the second resume the first's journal, manifest and receipt."""
    ids = set()
    for name in ("a", "b"):
        ctx = start_run(RunConfig(dry_run=True, now=T0, store=f"sqlite:///{tmp_path / name}.db"))
        ids.add(ctx.run_id)
    assert len(ids) == 2, ids
    again = start_run(RunConfig(dry_run=True, now=T0, store=f"sqlite:///{tmp_path / 'a'}.db"))
    assert again.run_id in ids  # the same store at the same cutoff: the same run (a rerun)


# -- 10. run_start.py run_key: the run's behaviour is part of its key ---------------------------
def test_a_run_that_consolidates_or_is_gated_otherwise_is_not_a_rerun(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``**({"behaviour": behaviour} ...)`` in run_key: a run with the consolidator
    off, then one with it on (or with another evaluation set) at the same cutoff, changes
    other records: resumed as the first, its receipt would never be sealed (the first's
    stands) and its changes would be counted under another run's settings."""
    cases = tmp_path / "cases.yaml"
    cases.write_text("[]\n")
    configs = [RunConfig(dry_run=True, now=T0, consolidate=False),
               RunConfig(dry_run=True, now=T0, consolidate=True),
               RunConfig(dry_run=True, now=T0, eval_cases=str(cases))]  # fmt: skip
    ids = [start_run(c).run_id for c in configs]
    assert len(set(ids)) == 3, ids


# -- 11. plan.py: distinct events are never "updates" of each other ------------------------------
def test_an_episode_is_never_a_possible_update_of_an_earlier_one() -> None:
    """Attacks ``if o.memory_type == MemoryType.episodic: continue`` in _inferred: two
    episodes that embed alike ("asked about order 1", "asked about order 2") are two
    events, both true. Neither becomes a POSSIBLE_UPDATE review item, and with a model
    configured neither is handed to it as a pair to supersede."""
    kw = dict(memory_type="episodic", namespace="/users/u-1/episodes", subject=None)
    views = [plan_view(rec("a", "Asked about order 1.", created_at=T0 - 30 * DAY, **kw)),
             plan_view(rec("b", "Asked about order 2.", **kw))]  # fmt: skip
    hints = ShardHints(subjects={"a": "orders ~1", "b": "orders ~1"}, updates={"a": "b"})
    for model in (False, True):
        ds = Planner(POLICY, T0, model_decides=model).plan_shard([views], hints)
        assert {d.action for d in ds} == {Action.retain}, ds
        assert not any(Reason.POSSIBLE_UPDATE in d.reasons for d in ds)


# -- 12. run_start.py _cloudtrail_preview: a dry run counts reads up to its cutoff only -----------
def test_a_dry_runs_cloudtrail_preview_counts_no_read_after_the_cutoff(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``if a.accessed_at <= cutoff`` in _cloudtrail_preview: a dry run reads the
    CloudTrail files in memory; it must score the same accesses the apply run will (the
    ledger's stats stop at the cutoff: a replay stays stable). A read logged the morning
    after the cutoff is no access yet."""
    from memlife.run_start import load_access_stats
    from tests.unit.test_ledger import _log_files

    trail = tmp_path / "trail"
    trail.mkdir()
    for name, data in _log_files().items():
        (trail / name).write_bytes(data)
    cutoff = datetime(2025, 5, 2, tzinfo=UTC)  # after the first file's read, before the rest
    dry = load_access_stats(cutoff, None, str(trail), dry_run=True)
    by_id = {rid: got.count for (_, rid), got in dry.items()}
    assert by_id == {"mr-1": 1, "mr-2": 1}, by_id
    assert not (home / "ledger").exists()
    assert load_access_stats(cutoff, None, str(trail)) == dry  # what the apply run scores


# -- 13. plan.py: a weaker newer source is never handed to the model as an update -----------------
def test_an_update_from_a_weaker_source_stays_a_review_item_even_with_a_model() -> None:
    """Attacks ``w[n.source] >= w[o.source]`` in _inferred's ``can_decide``: with a model
    configured, a probable update goes to the model as a pair, which supersedes the older
    record. An agent's inference never replaces what the user confirmed that way: the pair
    stays a POSSIBLE_UPDATE review item, as CONFLICTING_SOURCE does for named subjects."""
    views = [plan_view(rec("a", "Drinks coffee every morning.", created_at=T0 - 40 * DAY,
                           source="user_confirmed")),
             plan_view(rec("b", "Gave up coffee; green tea now.",
                           source="agent_inferred"))]  # fmt: skip
    hints = ShardHints(subjects={"a": "coffee ~1", "b": "coffee ~1"}, updates={"a": "b"})
    ds = {d.id: d for d in Planner(POLICY, T0, model_decides=True).plan_shard([views], hints)}
    assert ds["a"].action is Action.review and Reason.POSSIBLE_UPDATE in ds["a"].reasons, ds
    assert ds["a"].pair == "b" and ds["b"].action is not Action.consolidate_candidate


# -- 14. plan.py: a record is in one model pair at most ------------------------------------------
def test_a_record_already_paired_for_the_model_is_not_paired_again() -> None:
    """Attacks ``older in out`` in _inferred: with a model configured, a (older) -> b and
    b -> c are both probable updates. a and b go to the model as one pair; b is not then
    re-paired with c, which would leave a alone in a group of one naming b as survivor (a
    supersede whose survivor is consolidated elsewhere the same night)."""
    views = [plan_view(rec("a", "Drinks coffee every morning.", created_at=T0 - 40 * DAY)),
             plan_view(rec("b", "Gave up coffee; green tea now.", created_at=T0 - 20 * DAY)),
             plan_view(rec("c", "Now drinks only water."))]  # fmt: skip
    subjects = {k: "drinks ~1" for k in "abc"}
    hints = ShardHints(subjects=subjects, updates={"a": "b", "b": "c"})
    ds = {d.id: d for d in Planner(POLICY, T0, model_decides=True).plan_shard([views], hints)}
    assert ds["a"].action is ds["b"].action is Action.consolidate_candidate, ds
    assert ds["a"].group is not None and ds["a"].group == ds["b"].group
    assert ds["a"].survivor == ds["b"].survivor == "b"
    assert ds["c"].action is Action.retain and ds["c"].group is None


# -- 15. run_abandoned.py: a run folder filed under another day than its id's is not sealed ------
def test_a_run_folder_under_the_wrong_day_is_not_sealed_as_abandoned(tmp_path: Path) -> None:
    """Attacks ``not in_place(prefix)`` in seal_abandoned: a run's folder is the day its id
    names (runs/2026/11/01/20261101T...). A folder with a manifest filed under another day
    is no run (a copy, a forged or misfiled folder: ``receipts verify`` names it); sealing
    it would write a failure/ABANDONED receipt, with a Parquet, where no run ever was. The
    dead run in its own folder is sealed (the control)."""
    from memlife.run_abandoned import seal_abandoned
    from memlife.stores import store_identity

    db = tmp_path / "memlife.db"
    url = f"sqlite:///{db}"
    sink = FileSink(tmp_path / "receipts")
    dead, misfiled = "20261101T090000Z-apply-0000000001", "20261101T080000Z-apply-0000000002"
    for day, rid in (("2026/11/01", dead), ("2026/10/31", misfiled)):
        manifest = {"run_id": rid, "mode": "apply", "store_identity": store_identity(url),
                    "cutoff": T0.isoformat(), "started_at": T0.isoformat()}  # fmt: skip
        assert sink.put_new(f"runs/{day}/{rid}/manifest.json", json.dumps(manifest).encode())
    store = SqliteStore(db)
    try:
        sealed = seal_abandoned(sink, open_journal(store), store_url=url, cutoff=T0, now=T0,
                                run_id="20261101T110000Z-apply-0000000003")  # fmt: skip
    finally:
        store.close()
    assert sealed == [dead]
    assert not [k for k in sink.list("runs/2026/10/31/") if not k.endswith("/manifest.json")]


# -- 16. score.py: a read or a check dated after the cutoff counts as age zero ---------------------
def test_a_read_or_a_verification_dated_after_the_cutoff_scores_as_at_the_cutoff() -> None:
    """Attacks ``max(0.0, ...)`` around the access and verification ages in Scorer.score and
    Scorer.parts: ages are never negative (clock skew, a ledger written by a host whose
    clock runs ahead). A read or a check stamped after the cutoff must not lift a record's
    score above one read or checked at the cutoff: that would hide a low-score finding."""
    scorer, now = Scorer(POLICY), T0.timestamp()

    def view(at: datetime) -> Any:
        return plan_view(rec("a", created_at=T0 - 900 * DAY, last_accessed_at=at,
                             last_verified_at=at, access_count=1))  # fmt: skip

    at_cutoff = view(T0)
    for skew in (timedelta(minutes=1), timedelta(hours=6), timedelta(days=200)):
        ahead = view(T0 + skew)
        parts = scorer.parts(ahead, now)
        assert parts.verification == 1.0
        if skew <= FUTURE_SKEW:  # clock skew: read at the cutoff
            assert scorer.score(ahead, now) == scorer.score(at_cutoff, now)
            assert parts.access_recency == 1.0
            assert parts.score == scorer.score(at_cutoff, now)
        else:  # no read by the cutoff (audit 50h: a stamp in 9999 pinned the record)
            assert scorer.score(ahead, now) < scorer.score(at_cutoff, now)
            assert parts.access_recency == 0.0
            assert parts.score == scorer.score(ahead, now)


# -- 17. score.py: frequency keeps rising with every access -----------------------------------
def test_more_accesses_always_score_higher_until_saturation() -> None:
    """Attacks ``r[9]`` (access_count) in Scorer.score's frequency term: the access ledger's
    count is the frequency signal, ``1 - exp(-count / frequency_scale)``: a record recalled
    30 times outranks one recalled 6 times (the hot path agrees with the breakdown)."""
    scorer, now = Scorer(POLICY), T0.timestamp()
    scores = [scorer.score(plan_view(rec("a", access_count=n)), now) for n in (6, 12, 30)]
    assert scores[0] < scores[1] < scores[2]
    for n in (6, 12, 30):
        v = plan_view(rec("a", access_count=n))
        assert scorer.score(v, now) == scorer.parts(v, now).score


# -- 18. score.py: verification bottoms out at zero, it never goes negative ------------------------
def test_a_long_stale_verification_scores_as_never_verified_not_below() -> None:
    """Attacks ``min(1.0, since / stale_days)`` in Scorer.score: verification is
    ``1 - min(1, age / verification_stale_days)``: a check three limits ago is worth
    nothing, like no check at all, and never less (the record would drop under
    low_score for how long ago it was checked, not for what it earns)."""
    scorer, now = Scorer(POLICY), T0.timestamp()
    stale = POLICY.memory_types[MemoryType.semantic].verification_stale_days
    assert stale
    old = dict(created_at=T0 - 3000 * DAY)
    never = scorer.score(plan_view(rec("a", last_verified_at=None, **old)), now)
    verified = [T0 - timedelta(days=stale), T0 - timedelta(days=3 * stale)]
    at_limit, long_ago = (scorer.score(plan_view(rec("a", last_verified_at=v, **old)), now)
                          for v in verified)  # fmt: skip
    assert never == at_limit == long_ago


# -- 19. run_start.py take_lease: a dry run takes no lease --------------------------------------
def test_a_dry_run_goes_ahead_while_another_writer_holds_the_lease(home: Path) -> None:
    """Attacks ``if config.dry_run: return None`` in take_lease: one lifecycle writer per
    store (invariant 9), but a dry run writes nothing: it previews the store while the
    nightly apply run holds the lease (another host's), and leaves that lease as it was."""
    from memlife.pipeline import run_local

    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([rec("a"), rec("gone", expires_at=T0 - DAY)])
        journal = open_journal(store)
        now = datetime.now(UTC)
        ok, _ = journal.lease_acquire(LEASE, "elsewhere:2:y", "run-nightly", "nightly", now,
                                      now + timedelta(hours=1))  # fmt: skip
        assert ok
    finally:
        store.close()
    summary = run_local(RunConfig(dry_run=True, now=T0))
    assert summary.counts["delete_expired"] == 1
    store = SqliteStore(home / "memlife.db")
    try:
        row = store.connection.execute("SELECT owner, run_id FROM leases").fetchone()
        assert tuple(row) == ("elsewhere:2:y", "run-nightly")
        assert store.get("gone") is not None  # and it changed nothing
    finally:
        store.close()


# -- 20. run_start.py: a dry run keeps no policy record -----------------------------------------
def test_a_dry_run_keeps_no_policy_under_its_version(home: Path, tmp_path: Path) -> None:
    """Attacks ``record=not config.dry_run`` in start_run: the first run that changes records
    under a version keeps that version's rules beside the receipts (memlife/policy_record.py).
    A dry run changes nothing: previewing a draft under a new version must not pin that
    version to the draft, or the apply run of the corrected policy would be refused."""
    import yaml

    from memlife.errors import PolicyError
    from memlife.pipeline import run_local

    SqliteStore(home / "memlife.db").close()
    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    data["version"] = "draft-34d"
    draft = tmp_path / "draft.yaml"
    data["pending_delete_grace_days"] = 1  # a draft being previewed
    draft.write_text(yaml.safe_dump(data))
    start_run(RunConfig(dry_run=True, now=T0, policy=str(draft)))
    sink = FileSink(home / "receipts")
    assert not [k for k in sink.list("policies/")], "a dry run kept the draft's rules"
    data["pending_delete_grace_days"] = 7  # corrected, same version: the first apply run
    final = tmp_path / "final.yaml"
    final.write_text(yaml.safe_dump(data))
    try:
        run_local(RunConfig(dry_run=False, now=T0, policy=str(final)))
    except PolicyError as exc:  # pragma: no cover - the failure this test is about
        raise AssertionError(f"the previewed draft pinned its version: {exc}") from exc
    assert [k for k in sink.list("policies/")] == ["policies/draft-34d.yaml"]


# -- 21. plan.py: a sensitive superseded original goes after its class's retention ----------------
def test_a_superseded_sensitive_record_is_kept_only_its_own_classes_retention() -> None:
    """Attacks ``self._kept_superseded.get(r.retention_class)``: superseded originals are
    kept ``superseded_retention_days`` by retention class; sensitive ones go sooner (30
    days against 90 for standard). A sensitive original superseded 31 days ago is deleted
    with SUPERSEDED_RETENTION; a standard one superseded as long ago is still kept."""
    days = POLICY.superseded_retention_days
    assert days[RetentionClass.sensitive] < 31 <= days[RetentionClass.standard]
    kw = dict(status="superseded", provenance={"replaced_by": "r-new"},
              status_changed_at=T0 - 31 * DAY)  # fmt: skip
    ds = plan(rec("sens", retention_class="sensitive", **kw), rec("std", **kw))
    assert ds["sens"].action is Action.delete_expired
    assert ds["sens"].reasons == [Reason.ALREADY_SUPERSEDED, Reason.SUPERSEDED_RETENTION]
    assert ds["std"].action is Action.retain and ds["std"].reasons == [Reason.ALREADY_SUPERSEDED]


# -- 22. plan.py: the strongest source of an older statement decides, not its weakest echo -------
def test_an_older_statement_confirmed_by_the_user_is_not_superseded_by_a_weaker_one() -> None:
    """Attacks ``strongest = max(w[r.source] for r in c)`` in _group: an older statement
    said twice, once confirmed by the user and once echoed by the agent, holds the user's
    authority. A newer statement the user merely stated (weaker than confirmed) does not
    supersede it: both go to review as CONFLICTING_SOURCE."""
    ds = plan(
        rec("conf", "Prefers a window seat.", subject="seat", created_at=T0 - 40 * DAY,
            source="user_confirmed"),
        rec("echo", "prefers a window seat", subject="seat", created_at=T0 - 30 * DAY,
            source="agent_inferred"),
        rec("new", "Prefers an aisle seat.", subject="seat", created_at=T0 - 2 * DAY,
            source="user_stated"),
    )  # fmt: skip
    assert ds["conf"].action is Action.review, ds["conf"]
    assert Reason.CONFLICTING_SOURCE in ds["conf"].reasons
    assert not any(d.action is Action.supersede_candidate for d in ds.values())


# -- 23. would_change.py: no merges or supersedes of groups the gate withholds --------------------
def test_a_dry_run_promises_no_supersede_of_a_group_the_apply_run_withholds(home: Path) -> None:
    """Attacks ``if groups_out and groups_out >= groups: merges = 0, 0`` in would_change:
    without an evaluation set an apply run withholds every consolidation in an enforced
    namespace. When that is every group, the dry run's "an apply run would" column must
    not promise the contradiction those groups resolve: the apply run supersedes nothing."""
    from memlife.pipeline import run_local
    from memlife.would_change import would_change
    from tests.support.gate import NOW
    from tests.unit.test_gate_staged import seed

    seed(home)  # tea then coffee in /users/*/preferences (enforced): one contradiction group
    dry = run_local(RunConfig(dry_run=True, now=NOW)).as_json()
    assert dry["other_counts"]["contradictions_resolved"] == 1  # the case this test is about
    would = dict(would_change(dry))
    assert would["withhold, no eval set: groups"] == 1
    done = run_local(RunConfig(dry_run=False, now=NOW)).as_json()["lifecycle"]
    assert (would["supersede contradicted"], would["merge duplicates"]) == (done["superseded"], 0)
    assert would["consolidate (groups)"] == done["consolidated"] == 0


# -- 24. plan.py: a disputed record is not deleted when its grace ends either ---------------------
def test_a_disputed_record_past_its_pending_delete_grace_is_not_deleted() -> None:
    """Attacks ``early.action in DELETE_ACTIONS`` (the disputed check) in plan_shard: a
    record a reviewer disputed is never deleted while the dispute is open, whichever delete
    the night plans: an elapsed pending-delete grace as well as an expiry."""
    grace = timedelta(days=POLICY.pending_delete_grace_days)
    views = [plan_view(rec("pending", status="pending_delete", status_changed_at=T0 - grace - DAY)),
             plan_view(rec("expired", expires_at=T0 - DAY))]  # fmt: skip
    hints = ShardHints(disputed=frozenset({"pending", "expired"}))
    ds = {d.id: d for d in Planner(POLICY, T0).plan_shard([views], hints)}
    for rid in ("pending", "expired"):
        assert ds[rid].action is Action.retain, ds[rid]
        assert Reason.DISPUTED in ds[rid].reasons


# -- 25. run_commit.py run_gate: a dry run whose gate blocks deletions snapshots nothing ----------
def test_a_dry_run_whose_gate_blocks_a_deletion_writes_no_quarantine_snapshot(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``and not ctx.config.dry_run`` before the quarantine snapshot in run_gate: a
    blocking verdict snapshots the records it will quarantine, so a restore is exact. A dry
    run changes nothing in the store (invariant 7): its verdict says the deletion would be
    held back, and no snapshot is written."""
    from memlife.pipeline import run_local
    from memlife.quarantine import snapshots
    from tests.support.gate import ACTOR, NOW
    from tests.unit.test_gate_staged import seed, write_cases

    seed(home)  # m-trip: an expired episode the case below must still retrieve
    case = {"id": "trip-kept", "query": "Where did the user plan a trip?", "actor_id": ACTOR,
            "must_retrieve": ["m-trip"], "impact": "high", "k": 3}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [case])
    dry = run_local(RunConfig(dry_run=True, now=NOW, eval_cases=cases))
    assert dry.gate is not None and dry.gate["deletions_blocked"] is True
    store = SqliteStore(home / "memlife.db")
    try:
        assert snapshots(store, ["m-trip"]) == {}
        trip = store.get("m-trip")
        assert trip is not None and trip.status == "active"
    finally:
        store.close()


# -- 26. run_commit.py uncovered: one case that checks nothing does not hold back the whole run ---
def test_one_case_that_checks_nothing_holds_back_only_its_own_actor(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``{u["case"] for u in unchecked} != {c.id for c in cases}`` in uncovered:
    only a set whose EVERY case checks nothing is no set (GATE_UNCOVERED for the whole run).
    Beside a case that does check, one typo case holds back only its own actor's
    judgements (unseen_by); the other actor's consolidation, which the gate did evaluate,
    is committed."""
    from memlife.pipeline import run_local
    from tests.support.gate import NOW
    from tests.support.gate import rec as grec
    from tests.unit.test_gate_staged import seed, write_cases

    records = []
    for actor in ("u-1", "u-2"):
        records += [
            grec(f"tea-{actor}", "preferences", "Drinks only green tea, never coffee.",
                 subject="beverage", age=300, actor=actor),
            grec(f"coffee-{actor}", "preferences",
                 "Switched to black coffee every morning; no longer drinks tea.",
                 subject="beverage", age=20, actor=actor),
        ]  # fmt: skip
    records.append(grec("dog-u-1", "facts", "Has a dog named Rex.", subject="pet", age=30))
    seed(home, records)
    good = {"id": "dog", "query": "What is the dog called?", "actor_id": "u-1",
            "must_retrieve": ["dog-u-1"]}  # fmt: skip
    typo = {"id": "tea-u-2", "query": "Which kind of tea does the user drink?",
            "actor_id": "u-2", "namespace": "/user/u-2/preferences",
            "must_retrieve": [{"fact": "green tea"}]}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [good, typo])
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    g = summary.gate or {}
    assert [u["case"] for u in g["uncovered_cases"]] == ["tea-u-2"]
    assert summary.other["gate_withheld_groups"] == 1
    store = SqliteStore(home / "memlife.db")
    try:
        got = dict(store.connection.execute("SELECT id, status FROM records").fetchall())
    finally:
        store.close()
    assert got["tea-u-2"] == "active" and got["coffee-u-2"] == "active"
    assert got["tea-u-1"] == "superseded", got


# -- 27. run_commit.py held_back: a dry run's "would delete" is net of GATE_UNCOVERED ------------
def test_a_dry_runs_would_delete_is_net_of_what_a_set_that_checks_nothing_withholds(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``| set(uncovered.get("deletions", ()))`` in held_back: with a set whose
    every case checks nothing (a namespace typo), the apply run withholds every judgement
    deletion (GATE_UNCOVERED) as without a set. The dry run's "an apply run would delete"
    must say what the apply run then deletes, not count the withheld TTL expiry."""
    from memlife.model import MemoryType
    from memlife.pipeline import run_local
    from memlife.would_change import would_change
    from tests.support.gate import NOW
    from tests.support.gate import rec as grec
    from tests.unit.test_gate_staged import seed, write_cases

    ttl = POLICY.memory_types[MemoryType.episodic].default_ttl_days or 0
    old = grec("old-ep", "episodes", "Asked about the weather in Porto.",
               mtype=MemoryType.episodic, age=ttl + 10)  # fmt: skip
    dog = grec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
    seed(home, [old, dog])
    typo = {"id": "dog", "query": "What is the dog called?", "actor_id": "u-1",
            "namespace": "/user/u-1/facts", "must_retrieve": ["m-dog"]}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [typo])
    dry = run_local(RunConfig(dry_run=True, now=NOW, eval_cases=cases)).as_json()
    assert dry["counts"]["delete_expired"] == 1  # the TTL expiry: a judgement, not an obligation
    assert dry["gate"]["uncovered"]["deletions"] == ["old-ep"]
    would = dict(would_change(dry))
    done = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases)).as_json()["lifecycle"]
    assert would["delete"] == done["deleted"] == 0, would
    assert would["hold back, gate: deletions"] == 1


# -- 28. run_commit.py uncovered: obligations and unenforced namespaces go ahead -----------------
def test_a_set_that_checks_nothing_still_lets_obligations_and_unenforced_changes_go_ahead(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``if not _obligation(i)`` and ``if enforced(g.shard[1])`` in uncovered: a set
    whose every case checks nothing is treated as no set, and no set withholds only the
    judgements in enforced namespaces. Another tenant's hard expiry is an obligation (DESIGN
    step 8: it goes ahead), and its consolidation in a namespace where deletion is not
    enforced is not withheld either. (The typo case's own actor waits whole: unseen_by.)"""
    from memlife.model import MemoryType
    from memlife.pipeline import run_local
    from tests.support.gate import NOW
    from tests.support.gate import rec as grec
    from tests.unit.test_gate_staged import seed, write_cases

    trip = grec("m-trip", "episodes", "Planned a trip to Osaka in May.", actor="u-2",
                mtype=MemoryType.episodic, age=40, expires=NOW - 2 * DAY)  # fmt: skip
    milk = grec("m-milk", "notes", "Drinks oat milk only.", subject="milk", age=300, actor="u-2")
    milk2 = grec("m-milk2", "notes", "Switched to soy milk; no more oat milk.",
                 subject="milk", age=10, actor="u-2")  # fmt: skip
    dog = grec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
    seed(home, [trip, milk, milk2, dog])
    typo = {"id": "dog", "query": "What is the dog called?", "actor_id": "u-1",
            "namespace": "/user/u-1/facts", "must_retrieve": ["m-dog"]}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [typo])
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    g = summary.gate or {}
    assert [u["case"] for u in g["uncovered_cases"]] == ["dog"]  # the set checks nothing
    assert g["uncovered"] == {"deletions": [], "groups": []}
    store = SqliteStore(home / "memlife.db")
    try:
        assert store.get("m-trip") is None  # the hard expiry went ahead
        milk_now = store.get("m-milk")
        assert milk_now is not None and milk_now.status == "superseded"
    finally:
        store.close()


# -- 29. run_commit.py went_ungated: a policy that does not require the gate counts it all --------
def test_without_a_required_gate_every_consolidation_is_counted_as_ungated(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``required and`` in went_ungated: a policy with ``gate.required: false`` lets
    a run without a set consolidate in enforced namespaces too. The receipt's gate figures
    must then say that every such change went ahead unevaluated, not only those outside
    the enforced namespaces."""
    from memlife.pipeline import run_local
    from tests.support.gate import NOW
    from tests.unit.test_gate_staged import policy_with, seed

    seed(home)  # tea then coffee in /users/*/preferences (enforced), a hard-expired trip
    summary = run_local(
        RunConfig(dry_run=False, now=NOW, policy=policy_with(tmp_path, required=False))
    )
    g = summary.gate or {}
    assert g["required"] is False and summary.lifecycle["consolidated"] == 1
    assert (g["ungated_deletions"], g["ungated_groups"]) == (1, 1)


# -- 30. run_commit.py unseen_by: a case that checks nothing holds its actor's judgements ---------
def test_a_judgement_deletion_of_an_unchecked_cases_actor_waits(home: Path, tmp_path: Path) -> None:
    """Attacks the ``deletions`` of unseen_by: beside a case that checks another tenant, a
    case that checks nothing (a namespace typo) leaves its actor unevaluated; that actor's
    judgement deletions (a TTL expiry) wait, GATE_UNCOVERED, instead of going ahead
    unevaluated. The other tenant's are judged by its case and go ahead."""
    from memlife.model import MemoryType
    from memlife.pipeline import run_local
    from tests.support.gate import NOW
    from tests.support.gate import rec as grec
    from tests.unit.test_gate_staged import seed, write_cases

    ttl = POLICY.memory_types[MemoryType.episodic].default_ttl_days or 0
    records = []
    for actor in ("u-1", "u-2"):
        records += [
            grec(f"old-{actor}", "episodes", "Asked about the weather in Porto.", actor=actor,
                 mtype=MemoryType.episodic, age=ttl + 10),
            grec(f"dog-{actor}", "facts", "Has a dog named Rex.", subject="pet", age=30,
                 actor=actor),
        ]  # fmt: skip
    seed(home, records)
    typo = {"id": "dog-1", "query": "What is the dog called?", "actor_id": "u-1",
            "namespace": "/user/u-1/facts", "must_retrieve": ["dog-u-1"]}  # fmt: skip
    good = {"id": "dog-2", "query": "What is the dog called?", "actor_id": "u-2",
            "must_retrieve": ["dog-u-2"]}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [typo, good])
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    g = summary.gate or {}
    assert [u["case"] for u in g["uncovered_cases"]] == ["dog-1"]
    assert "old-u-1" in g["uncovered"]["deletions"]
    store = SqliteStore(home / "memlife.db")
    try:
        assert store.get("old-u-1") is not None  # waits: nothing judged it
        assert store.get("old-u-2") is None  # judged by its tenant's case: deleted
    finally:
        store.close()


# -- 30b. run_commit.py unseen_by: an unchecked case's actor still meets its obligations ------
def test_a_case_that_checks_nothing_never_holds_back_its_actors_hard_expiry(
    home: Path, tmp_path: Path
) -> None:
    """The bug this audit found: ``unseen_by`` added every deletion of an unchecked case's
    actor to what waits, obligations included, so a namespace typo in one case kept its
    actor's hard-expired record night after night (GATE_UNCOVERED), where a run without a
    set deletes it (DESIGN step 8: hard expiry is an obligation and goes ahead). Only
    judgements wait; the same actor's TTL expiry (a judgement) still does."""
    from memlife.model import MemoryType
    from memlife.pipeline import run_local
    from tests.support.gate import NOW
    from tests.support.gate import rec as grec
    from tests.unit.test_gate_staged import seed, write_cases

    ttl = POLICY.memory_types[MemoryType.episodic].default_ttl_days or 0
    trip = grec("m-trip", "episodes", "Planned a trip to Osaka in May.",
                mtype=MemoryType.episodic, age=40, expires=NOW - timedelta(days=2))  # fmt: skip
    old = grec("m-old", "episodes", "Asked about the weather in Porto.",
               mtype=MemoryType.episodic, age=ttl + 10)  # fmt: skip
    dog = grec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
    seed(home, [trip, old, dog])
    typo = {"id": "dog", "query": "What is the dog called?", "actor_id": "u-1",
            "namespace": "/user/u-1/facts", "must_retrieve": ["m-dog"]}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [typo])
    for night in (0, 1):
        summary = run_local(RunConfig(dry_run=False, now=NOW + night * DAY, eval_cases=cases))
        g = summary.gate or {}
        assert "m-trip" not in g["uncovered"]["deletions"]
        assert "m-old" in g["uncovered"]["deletions"]  # a judgement: it waits
    store = SqliteStore(home / "memlife.db")
    try:
        assert store.get("m-trip") is None  # the obligation went ahead on the first night
        assert store.get("m-old") is not None and store.get("m-dog") is not None
    finally:
        store.close()


# -- 31. would_change.py: a finding a reviewer answered is not left for review -------------------
def test_a_dry_run_does_not_count_an_answered_finding_as_left_for_review(home: Path) -> None:
    """Attacks ``- other.get("review_answered", 0)`` in would_change: a record whose every
    finding a reviewer answered (keep) for the content it holds is still planned ``review``
    but waits on nobody. The dry run's "left for review" must match what the apply run then
    reports as reviewed."""
    from memlife.pipeline import run_local
    from memlife.review_queue import ReviewQueue
    from memlife.would_change import would_change

    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("unowned", owner=None, namespace="/orgs/o-1/facts")])
    store.close()
    first = run_local(RunConfig(dry_run=False, now=T0))
    assert first.lifecycle["reviewed"] == 1
    store = SqliteStore(home / "memlife.db")
    try:
        queue = ReviewQueue.for_store(store)
        (item,) = queue.list()
        assert queue.close(item.item_id, state="resolved", decision="keep", reviewer="r",
                           at=T0, operation_id="op-keep")  # fmt: skip
    finally:
        store.close()
    later = T0 + DAY
    dry = run_local(RunConfig(dry_run=True, now=later)).as_json()
    assert dry["counts"]["review"] == 1  # still planned review: the case this test is about
    would = dict(would_change(dry))
    done = run_local(RunConfig(dry_run=False, now=later)).as_json()["lifecycle"]
    assert would["left for review"] == done["reviewed"] == 0, would


# -- 32. would_change.py: an elapsed pending-delete grace is a delete an apply run makes ----------
def test_a_dry_runs_would_delete_counts_pending_deletes_past_their_grace(home: Path) -> None:
    """Attacks ``+ counts.get("delete_pending", 0)`` in would_change: a pending_delete past
    its grace is an obligation the apply run deletes, gate or no gate. The dry run's "an
    apply run would delete" counts it."""
    from memlife.pipeline import run_local
    from memlife.would_change import would_change

    grace = timedelta(days=POLICY.pending_delete_grace_days)
    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("pending", status="pending_delete", status_changed_at=T0 - grace - DAY),
                    rec("kept", "Has a dog named Rex.")])  # fmt: skip
    store.close()
    dry = run_local(RunConfig(dry_run=True, now=T0)).as_json()
    assert (dry["counts"]["delete_pending"], dry["counts"]["delete_expired"]) == (1, 0)
    would = dict(would_change(dry))
    done = run_local(RunConfig(dry_run=False, now=T0)).as_json()["lifecycle"]
    assert would["delete"] == done["deleted"] == 1, would


# -- 33. run_commit.py counted_judgements: nothing is withheld where the gate is not required -----
def test_a_dry_run_under_a_policy_without_a_required_gate_withholds_no_deletion(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``or not ctx.policy.gate.required`` in counted_judgements: a dry run without
    a set only counts its judgement deletions; under a policy with ``gate.required: false``
    the apply run withholds none of them, and the dry run must not say it would (its "an
    apply run would delete" then equals what the apply run deletes)."""
    from memlife.model import MemoryType
    from memlife.pipeline import run_local
    from memlife.would_change import would_change
    from tests.support.gate import NOW
    from tests.support.gate import rec as grec
    from tests.unit.test_gate_staged import policy_with, seed

    ttl = POLICY.memory_types[MemoryType.episodic].default_ttl_days or 0
    seed(home, [grec("old-ep", "episodes", "Asked about the weather in Porto.",
                     mtype=MemoryType.episodic, age=ttl + 10)])  # fmt: skip
    policy = policy_with(tmp_path, required=False)
    dry = run_local(RunConfig(dry_run=True, now=NOW, policy=policy)).as_json()
    assert dry["gate"]["withheld_deletions"] == 0
    would = dict(would_change(dry))
    done = run_local(RunConfig(dry_run=False, now=NOW, policy=policy)).as_json()["lifecycle"]
    assert would["delete"] == done["deleted"] == 1, would


# -- 34. run_commit.py groups_blocked: a verdict that only says "blocked" blocks the groups -------
def test_a_gate_verdict_that_only_says_blocked_holds_back_every_change(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``verdict.get("blocked") and "supersedes_blocked" not in verdict`` in
    groups_blocked: run_local takes any gate function (``GateFn``); a verdict of before the
    split into deletions_blocked / supersedes_blocked says only ``blocked``. It blocks the
    whole commit: no supersede, the deletions quarantined, none deleted."""
    from memlife.pipeline import run_local
    from tests.support.gate import NOW
    from tests.unit.test_gate_staged import policy_with, seed, statuses

    seed(home)  # tea then coffee (one group), and a hard-expired trip
    # a policy without a required gate: the group is staged for the gate function to judge
    config = RunConfig(dry_run=False, now=NOW, policy=policy_with(tmp_path, required=False))
    summary = run_local(config, gate=lambda *a: {"blocked": True})
    assert summary.lifecycle["superseded"] == 0 and summary.lifecycle["deleted"] == 0
    assert summary.lifecycle["quarantined"] == 1
    st = statuses(home)
    assert st["m-tea"] == "active" and st["m-coffee"] == "active", st
