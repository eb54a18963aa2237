"""Guards left untested by the thirty-seventh audit (session 38): crash consistency swept
over every fault point of a nightly apply run (memlife/fault_points.py), in both modes a
run can die in (an exception that unwinds, ``raise``; SIGKILL with no clean-up, ``kill``).

One small seeded store carries every kind of work at once: expired records, legal holds
(one of them expired, one the target of a deferred erasure), duplicates the extractive
consolidator merges, a contradiction it supersedes, superseded originals past retention,
and an erasure that died after its delete (its operation pending, resumed by the night).
Each case kills the night at one point, reruns it to completion, and compares the result
with an uninterrupted night on the same seed: the same store (ids, statuses, replacements
and their texts), the same receipt counts and operation receipts, every removal
receipted, held records untouched, one replacement per group, and ``receipts verify`` on
the run passes. test_apply.py covers ``raise`` on the 400-record demo; ``kill`` there is
only tried at after_delete, and never with an erasure pending or a deferred one.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import faults
from memlife.erase import erase
from memlife.faults import InjectedFault, inject
from memlife.journal import OpKind, OpState, open_journal
from memlife.model import MemoryRecord, MemoryType, Provenance, RetentionClass, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import NOW, rec, write_cases
from tests.support.lifecycle import check_invariants, operation_receipts, snapshot
from tests.support.replacement_ids import of_receipts, of_snapshot, renamed

REPO = Path(__file__).parents[2]
HELD = ("m-hold", "m-hold2", "m-erase")
RUN_POINTS = tuple(p for p in faults.POINTS if p not in faults.IMPORT_POINTS)
ONCE = ("after_stage", "after_gate", "after_commit_groups")  # once per run: no skip
GROUPED_SUBJECTS = ("beverage", "pet", "home_city")  # the groups a night consolidates


def records() -> list[MemoryRecord]:
    out = [
        rec("m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage",
            age=300),
        rec("m-coffee", "preferences",
            "Switched to black coffee every morning; no longer drinks tea.",
            subject="beverage", age=20),
        rec("m-dog1", "facts", "Has a dog named Rex.", subject="pet", age=60),
        rec("m-dog2", "facts", "Has a dog named Rex.", subject="pet", age=30),
        rec("m-city1", "facts", "Lives in Lisbon, Portugal.", subject="home_city", age=50),
        rec("m-city2", "facts", "Lives in Lisbon, Portugal.", subject="home_city", age=40),
        rec("m-hold", "facts", "Signed the settlement agreement on 3 March.", subject="legal",
            age=200, retention=RetentionClass.legal_hold, expires=NOW - timedelta(days=5)),
        rec("m-hold2", "facts", "Signed the settlement agreement on 3 March.",
            subject="legal", age=100, retention=RetentionClass.legal_hold),
        rec("m-erase", "facts", "Phone number is 555 0100.", subject="phone", age=10,
            retention=RetentionClass.legal_hold),
        rec("m-addr", "facts", "Lives at 12 Elm Street.", subject="address", age=10),
        rec("m-new", "facts", "Works at Acme as an engineer.", subject="job", age=300),
    ]  # fmt: skip
    out += [
        rec(f"m-exp{i}", "episodes", f"Met friend number {i} at the cafe.", subject=f"meet{i}",
            age=40 + i, expires=NOW - timedelta(days=2 + i), mtype=MemoryType.episodic)
        for i in range(5)
    ]  # fmt: skip
    out += [
        rec(f"m-keep{i}", "facts", f"Favourite colour number {i} is blue{i}.",
            subject=f"colour{i}", age=10)
        for i in range(3)
    ]  # fmt: skip
    old = NOW - timedelta(days=200)  # superseded 200 days ago: past the 90 days' retention
    out += [
        rec(f"m-old{i}", "facts", f"Works at Initech, team {i}.", subject="job", age=400,
            status=Status.superseded, status_changed_at=old).model_copy(
            update={"provenance": Provenance(replaced_by="m-new", source_event=f"evt-old{i}")})
        for i in range(3)
    ]  # fmt: skip
    return out


def seed_scenario(home: Path) -> str:
    """The seeded store, a deferred erasure (held record) and an erasure killed after its
    delete (its operation left PLANNED for the night to resume); the cases file."""
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many(records())
        erase(store, "u-1", subject="phone", policy="policies/default.yaml", now=NOW)
        with inject("after_delete"), pytest.raises(InjectedFault):
            erase(store, "u-1", subject="address", policy="policies/default.yaml", now=NOW)
        pending = [o for o in open_journal(store).for_record("m-addr") if o.kind is OpKind.erase]
        assert [o.state for o in pending] == [OpState.PLANNED]
    finally:
        store.close()
    return write_cases(home / "cases.yaml", [
        {"id": "hold", "query": "When was the settlement agreement signed?",
         "actor_id": "u-1", "must_retrieve": ["m-hold2"], "impact": "high"},
    ])  # fmt: skip


def night(cases: str) -> Any:  # the run summary
    return run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))


def journal_state(db: Path) -> Counter[tuple[str, str, str, str | None]]:
    store = SqliteStore(db)
    try:
        rows = store.connection.execute(
            "SELECT kind, record_id, state, outcome FROM operations"
        ).fetchall()
        return Counter(tuple(r) for r in rows)
    finally:
        store.close()


def done_ops(receipts: Path) -> Counter[tuple[str, str, str | None, str]]:
    """What the operation receipts say was done, as a multiset (done twice is not once)."""
    return Counter(
        (o["action"], o["record_id"], o["replacement_id"], o["outcome"])
        for o in operation_receipts(receipts).values()
    )


def outcome(home: Path, summary: Any) -> dict[str, Any]:
    receipt = json.loads(Path(str(summary.receipt).removeprefix("file://")).read_text())
    after = snapshot(home / "memlife.db")
    # a replacement's id is keyed by its store's run secret (the clean store has its own):
    # named by what it supersedes (tests/support/replacement_ids.py); "after" stays as is
    ids = {**of_receipts(operation_receipts(home / "receipts").values()), **of_snapshot(after)}
    return {
        "after": after,
        "named": renamed(after, ids),
        "ops": Counter(renamed(dict(done_ops(home / "receipts")), ids)),
        "journal": Counter(renamed(dict(journal_state(home / "memlife.db")), ids)),
        "counts": receipt["counts"],
        "status": receipt["status"],
        "lifecycle": summary.lifecycle,
    }


def named(home: Path) -> dict[str, Any]:
    """A store's snapshot, its replacements named by what they supersede (as ``outcome``)."""
    after = snapshot(home / "memlife.db")
    return renamed(after, of_snapshot(after))


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The reference: the same seed, one uninterrupted night."""
    home = tmp_path_factory.mktemp("clean38e") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMLIFE_HOME", str(home))
        mp.setenv("MEMLIFE_STORE", f"sqlite:///{home / 'memlife.db'}")
        mp.setenv("MEMLIFE_RECEIPTS", f"file://{home / 'receipts'}")
        mp.chdir(REPO)
        cases = seed_scenario(home)
        summary = night(cases)
        assert summary.status == "success"
        life = summary.lifecycle
        # the seed really carries every kind of work
        assert life["deleted"] >= 8 and life["superseded"] >= 6 and life["consolidated"] >= 3
        assert life["held"] >= 3
        yield outcome(home, summary)


def check_converged(
    home: Path, before: dict[str, dict[str, Any]], summary: Any, clean: dict[str, Any]
) -> None:
    got = outcome(home, summary)
    db = home / "memlife.db"
    check_invariants(before, got["after"], home / "receipts")  # holds, receipts, pointers
    for rid in HELD:
        assert got["after"][rid] == before[rid], f"held record {rid} changed"
    assert got["named"] == clean["named"], "crash + rerun must converge to the clean store"
    active_r = Counter(
        (r["actor_id"], r["namespace"], r["subject"])
        for r in got["after"].values()
        if r["id"].startswith("r-") and r["status"] == Status.active.value
    )
    assert active_r and max(active_r.values()) == 1, "a group replaced twice"
    assert got["status"] == clean["status"] == "success"
    assert got["counts"] == clean["counts"], "the receipt counts the crash differently"
    assert got["lifecycle"] == clean["lifecycle"]
    assert got["ops"] == clean["ops"], "operation receipts differ from the clean night's"
    assert got["journal"] == clean["journal"], "the journal differs from the clean night's"
    vanished = set(before) - set(got["after"])
    receipted = {o[1] for o in got["ops"] if o[0] in ("delete", "purge", "erase")}
    assert vanished <= receipted
    store = SqliteStore(db)
    try:
        assert open_journal(store).due(NOW + timedelta(days=1)) == []
    finally:
        store.close()
    code, out, err = invoke("receipts", "verify", summary.run_id)
    assert code == 0, (out, err)


RAISE_CASES = [(p, s) for p in RUN_POINTS for s in (0, 2) if p not in ONCE or s == 0]


@pytest.mark.parametrize("point,skip", RAISE_CASES)
def test_a_night_that_raises_at_any_point_converges_on_rerun(
    home: Path, clean: dict[str, Any], point: str, skip: int
) -> None:
    """Attacks every ``checkpoint(point)`` boundary (memlife/faults.py) of the apply path:
    idempotent resume in memlife/apply/executor.py, the journal states written before each
    store change, and the counts rebuilt from the journal (memlife/apply/counts.py)."""
    cases = seed_scenario(home)
    before = snapshot(home / "memlife.db")
    with inject(point, skip=skip), pytest.raises(InjectedFault):
        night(cases)
    summary = night(cases)
    check_converged(home, before, summary, clean)


KILL_CASES = [(p, s) for p in RUN_POINTS for s in (0, 2) if p not in ONCE or s == 0]


@pytest.mark.parametrize("point,skip", KILL_CASES)
def test_a_night_killed_at_any_point_converges_on_rerun(
    home: Path, clean: dict[str, Any], point: str, skip: int
) -> None:
    """Attacks the same boundaries under SIGKILL (``MEMLIFE_FAULT_MODE=kill``): no failure
    receipt, no lease release, no ``finally``; the rerun takes the dead holder's lease over
    at once (memlife/lease.py::dead_here) and must finish the night as the clean one."""
    cases = seed_scenario(home)
    before = snapshot(home / "memlife.db")
    cmd = [sys.executable, "-m", "memlife.cli", "run", "--engine", "local", "--now",
           NOW.isoformat(), "--eval-cases", cases, "--json"]  # fmt: skip
    env = {**os.environ, "MEMLIFE_FAULT": f"{point}:{skip}", "MEMLIFE_FAULT_MODE": "kill"}
    proc = subprocess.run(cmd, env=env, capture_output=True, timeout=120, cwd=REPO)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    summary = night(cases)
    check_converged(home, before, summary, clean)


TWICE = random.Random(38).sample(sorted(itertools.product(RUN_POINTS, RUN_POINTS)), 8)


@pytest.mark.parametrize("first,second", TWICE)
def test_a_rerun_that_dies_too_still_converges(
    home: Path, clean: dict[str, Any], first: str, second: str
) -> None:
    """Attacks the resume path resuming its own half-done resume: the night dies at
    ``first``, its rerun dies at ``second`` (the retry queue, memlife/apply/resume.py, may
    be where it dies), and a third attempt must still end as the clean night."""
    cases = seed_scenario(home)
    before = snapshot(home / "memlife.db")
    with inject(first), pytest.raises(InjectedFault):
        night(cases)
    with inject(second):
        try:
            night(cases)
        except InjectedFault:
            pass  # the point may lie behind what the first attempt already finished
    summary = night(cases)
    check_converged(home, before, summary, clean)


@pytest.mark.parametrize("point", RUN_POINTS)
def test_an_erasure_between_a_crash_and_its_rerun_reaches_every_copy(
    home: Path, point: str
) -> None:
    """Attacks the tombstone check of a resumed replacement write
    (memlife/apply/appliers/write.py, memlife/tombstones.py::write_replacement) and the
    resumed supersedes of erased sources (status.py ``removed_by_another``): the night dies
    at ``point``, the duplicates' subject is erased, the rerun must write no copy of the
    erased text back, fail nothing, and seal a run that verifies."""
    cases = seed_scenario(home)
    with inject(point), pytest.raises(InjectedFault):
        night(cases)
    store = SqliteStore(home / "memlife.db")
    try:
        erase(store, "u-1", subject="pet", policy="policies/default.yaml", now=NOW)
    finally:
        store.close()
    summary = night(cases)
    assert summary.status == "success" and summary.lifecycle["failed"] == 0, summary.lifecycle
    after = snapshot(home / "memlife.db")
    assert not [r["id"] for r in after.values() if r["content"] == "Has a dog named Rex."]
    check_invariants(before_erasure_free(after), after, home / "receipts")
    code, out, err = invoke("receipts", "verify", summary.run_id)
    assert code == 0, (out, err)


def before_erasure_free(after: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The seed as the invariants see it (records the erasure took are receipted there)."""
    return {r.id: json.loads(r.to_json()) for r in records() if r.id not in ("m-addr",)}


@pytest.mark.parametrize("point", RUN_POINTS)
def test_a_hold_placed_between_a_crash_and_its_rerun_wins(home: Path, point: str) -> None:
    """Attacks the re-read before each change of a resumed operation
    (memlife/apply/appliers/delete.py::delete_records ``_pinned``, status.py ``_setter``
    set_status_unless_held, write.py ``is_held``): a hold placed after the night died and
    before its rerun pins the records as they were when it was placed."""
    from memlife.holds import place_hold

    cases = seed_scenario(home)
    with inject(point), pytest.raises(InjectedFault):
        night(cases)
    targets = ["m-exp0", "m-exp4", "m-old0"]
    store = SqliteStore(home / "memlife.db")
    try:
        present = [i for i in targets if store.get(i) is not None]
        place_hold(store, ids=present, policy="policies/default.yaml", now=NOW)
        # the duplicates' subject: their replacement too, where the killed night wrote it
        for subject in GROUPED_SUBJECTS:
            place_hold(store, actor="u-1", subject=subject, now=NOW)
    finally:
        store.close()
    present += [i for i in subject_held(home) if i not in present]
    held = {i: r for i, r in snapshot(home / "memlife.db").items() if i in present}
    assert held
    summary = night(cases)
    after = snapshot(home / "memlife.db")
    for rid, rec_ in held.items():
        assert after.get(rid) == rec_, f"{rid}, held after the crash, changed on the rerun"
    assert summary.lifecycle["failed"] == 0, summary.lifecycle
    code, out, err = invoke("receipts", "verify", summary.run_id)
    assert code == 0, (out, err)


def test_an_erasure_killed_mid_delete_is_finished_by_the_night(
    home: Path, clean: dict[str, Any]
) -> None:
    """Attacks the night's retry queue for an erasure killed outright (no failure receipt,
    the lease left to a dead pid): memlife/apply/resume.py resumes the erase operation and
    memlife/apply/appliers/erase.py finishes it (``already_absent``, receipted); the store
    then ends as the clean night's."""
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many(records())
        erase(store, "u-1", subject="phone", policy="policies/default.yaml", now=NOW)
    finally:
        store.close()
    cmd = [sys.executable, "-m", "memlife.cli", "erase", "--actor", "u-1", "--subject",
           "address", "--yes", "--json"]  # fmt: skip
    env = {**os.environ, "MEMLIFE_FAULT": "after_delete", "MEMLIFE_FAULT_MODE": "kill"}
    proc = subprocess.run(cmd, env=env, capture_output=True, timeout=120, cwd=REPO)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    cases = write_cases(home / "cases.yaml", [
        {"id": "hold", "query": "When was the settlement agreement signed?",
         "actor_id": "u-1", "must_retrieve": ["m-hold2"], "impact": "high"},
    ])  # fmt: skip
    before = snapshot(home / "memlife.db")
    summary = night(cases)
    assert summary.status == "success" and summary.lifecycle["failed"] == 0
    after = snapshot(home / "memlife.db")
    assert named(home) == clean["named"]
    check_invariants(before, after, home / "receipts")
    store = SqliteStore(home / "memlife.db")
    try:
        ops = [o for o in open_journal(store).for_record("m-addr") if o.kind is OpKind.erase]
        assert [o.state for o in ops] == [OpState.RECEIPTED]
        assert open_journal(store).due(NOW + timedelta(days=1)) == []
    finally:
        store.close()
    assert "m-addr" in {o[1] for o in done_ops(home / "receipts") if o[0] == "erase"}
    code, out, err = invoke("receipts", "verify", summary.run_id)
    assert code == 0, (out, err)


def subject_held(home: Path) -> list[str]:
    return [
        i
        for i, r in snapshot(home / "memlife.db").items()
        if r["subject"] in GROUPED_SUBJECTS and r["retention_class"] == "legal_hold"
    ]


@pytest.mark.parametrize("rerun", ["erase", "night"])
def test_an_erasure_killed_after_its_delete_is_receipted_as_the_deletion(
    home: Path, rerun: str
) -> None:
    """Attacks memlife/apply/appliers/erase.py::Erase.apply ``res.missing`` ->
    ``already_absent``: a record this erasure's own first attempt deleted (killed before
    its journal knew) is claimed by no ``deleted`` receipt. The nightly delete applier
    (delete.py::delete_records, ``first = o.attempts == 0 and o.state is PLANNED``)
    receipts the same crash ``deleted`` (invariant 2: one deletion, one claim; see
    docs/adversarial-review.md, the rows on "no receipt ever said deleted")."""
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([r for r in records() if r.id in ("m-addr", "m-keep0")])
        with inject("after_delete"), pytest.raises(InjectedFault):
            erase(store, "u-1", subject="address", policy="policies/default.yaml", now=NOW)
        assert store.get("m-addr") is None  # the first attempt deleted it
    finally:
        store.close()
    if rerun == "erase":
        cmd = [sys.executable, "-m", "memlife.cli", "erase", "--actor", "u-1", "--subject",
               "address", "--yes", "--json"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, timeout=120, cwd=REPO)
        assert proc.returncode in (0, 1), proc.stderr.decode()[-2000:]
    else:
        case = {"id": "c", "query": "favourite colour", "actor_id": "u-1",
                "must_retrieve": ["m-keep0"], "impact": "high"}  # fmt: skip
        assert night(write_cases(home / "cases.yaml", [case])).status == "success"
    claims = [o for o in done_ops(home / "receipts") if o[1] == "m-addr"]
    assert [(a, out) for a, _rid, _r, out in claims] == [("erase", "deleted")]


def test_a_group_withdrawn_on_the_rerun_leaves_no_replacement_behind(home: Path) -> None:
    """Attacks memlife/apply/groups.py::resume_group's withdrawal (``_sources_moved``:
    "Withdrawn, nothing written"): the night dies right after its first replacement write
    (after_replacement_write, the Lisbon duplicates' group), a hold is placed on one
    source, and the rerun withdraws the group: its write is receipted ``skipped``, yet
    the replacement the killed attempt wrote stays, active, naming as superseded two
    sources that are not (DESIGN 7/9: a replacement is seen only once committed; invariant
    4: the next night consolidates it again, a replacement of a replacement)."""
    from memlife.holds import place_hold

    cases = seed_scenario(home)
    with inject("after_replacement_write"), pytest.raises(InjectedFault):
        night(cases)
    written = [i for i in snapshot(home / "memlife.db") if i.startswith("r-")]
    assert len(written) == 1  # the killed attempt's one replacement
    store = SqliteStore(home / "memlife.db")
    try:
        source = store.get(written[0])
        assert source is not None
        place_hold(store, ids=[source.provenance.supersedes[0]], now=NOW)
    finally:
        store.close()
    summary = night(cases)
    assert summary.status == "success"
    after = snapshot(home / "memlife.db")
    claimed = {o[1] for o in done_ops(home / "receipts") if o[0] == "write_replacement"
               and o[3] == "written"}  # fmt: skip
    unclaimed = [i for i, r in after.items() if i.startswith("r-") and i not in claimed
                 and r["status"] == Status.active.value]  # fmt: skip
    assert unclaimed == [], "an active replacement no receipt says was written"


def test_a_replacement_held_between_a_crash_and_its_rerun_still_commits(
    home: Path, clean: dict[str, Any]
) -> None:
    """Attacks memlife/apply/appliers/write.py ``written = current.content == ...``: the
    night dies right after a replacement write, a hold is placed on that replacement only,
    and the rerun must take the held record as the write done (same content and sources),
    supersede its sources and end with the clean night's store, the hold aside."""
    from memlife.holds import place_hold

    cases = seed_scenario(home)
    with inject("after_replacement_write"), pytest.raises(InjectedFault):
        night(cases)
    (rid,) = [i for i in snapshot(home / "memlife.db") if i.startswith("r-")]
    store = SqliteStore(home / "memlife.db")
    try:
        place_hold(store, ids=[rid], now=NOW)
    finally:
        store.close()
    summary = night(cases)
    assert summary.status == "success" and summary.lifecycle["failed"] == 0, summary.lifecycle
    after = named(home)
    name = of_snapshot(snapshot(home / "memlife.db"))[rid]  # named by its sources
    assert after[name]["retention_class"] == RetentionClass.legal_hold.value
    unheld = {**after[name], "retention_class": clean["named"][name]["retention_class"]}
    assert {**after, name: unheld} == clean["named"]
