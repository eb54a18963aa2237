"""The gate in force on everything a run changes (issue 15): staged supersedes, the gate
required where deletion is enforced, the ``blocked`` status, warnings, crash safety."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from memlife.cli import app
from memlife.faults import InjectedFault, inject
from memlife.journal import open_journal
from memlife.model import MemoryRecord, MemoryType, Status
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import ACTOR, NOW, rec

NOW_ARG = NOW.isoformat()

TEA = rec(
    "m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage", age=300
)
COFFEE = rec(
    "m-coffee",
    "preferences",
    "Switched to black coffee every morning; no longer drinks tea.",
    subject="beverage",
    age=20,
)
DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
TRIP = rec(
    "m-trip",
    "episodes",
    "Planned a trip to Osaka in May.",
    mtype=MemoryType.episodic,
    age=40,
    expires=NOW - timedelta(days=2),
)
RECORDS = [TEA, COFFEE, DOG, TRIP]


def seed(home: Path, records: list[MemoryRecord] = RECORDS) -> None:
    store = SqliteStore(home / "memlife.db")
    store.put_many(records)
    store.close()


def write_cases(path: Path, cases: list[dict]) -> str:
    path.write_text(yaml.safe_dump({"cases": cases}, sort_keys=False))
    return str(path)


def tea_case(impact: str = "high") -> dict:
    """A high-impact fact that the supersede (newest statement wins) would lose."""
    return {
        "id": "tea-kept",
        "kind": "procedure",
        "query": "Which kind of tea does the user drink?",
        "actor_id": ACTOR,
        "must_retrieve": [{"fact": "green tea"}],
        "impact": impact,
        "k": 3,
    }


def statuses(home: Path) -> dict[str, Any]:
    store = SqliteStore(home / "memlife.db")
    try:
        rows = store.connection.execute("SELECT id, status FROM records").fetchall()
        return {r[0]: r[1] for r in rows}
    finally:
        store.close()


def policy_with(tmp_path: Path, **gate: Any) -> str:
    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    data["version"] = "test-gate-" + "-".join(f"{k}{v}" for k, v in sorted(gate.items()))
    data["gate"].update(gate)
    p = tmp_path / "policy.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


# -- a supersede that would lose a high-impact fact ---------------------------------------------
def test_supersede_losing_a_high_impact_fact_is_blocked(home: Path, tmp_path: Path) -> None:
    seed(home)
    cases = write_cases(tmp_path / "cases.yaml", [tea_case()])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    gate = summary.gate
    assert gate is not None and gate["blocked"] is True and summary.status == "blocked"
    assert gate["reasons"] == [
        "HIGH_IMPACT_CASE_FAILED",
        "CASE_REGRESSED",
        "GATE_REGRESSED:must_retain_recall",
        "GATE_REGRESSED:aggregate_score",
    ]
    assert gate["high_impact_failed"] == ["tea-kept"]
    assert gate["proposed_supersedes"] == 2 and gate["staged_replacements"] == 1
    # "before" is the store as found (the tea statement still there), not after consolidation
    assert gate["before"]["failed_cases"] == [] and gate["after"]["failed_cases"] == ["tea-kept"]
    # the supersede is the culprit; the unrelated hard-expired deletion is innocent and goes ahead
    assert gate["supersedes_blocked"] is True and gate["deletions_blocked"] is False
    assert summary.lifecycle["superseded"] == 0 and summary.lifecycle["consolidated"] == 0
    assert summary.lifecycle["deleted"] == 1 and summary.lifecycle["quarantined"] == 0
    assert summary.other["gate_blocked_groups"] == 1
    st = statuses(home)
    assert st == {"m-tea": "active", "m-coffee": "active", "m-dog": "active"}  # trip deleted
    # the replacement was never written: recall cannot see it
    store = SqliteStore(home / "memlife.db")
    hits = LongTermMemory(store).recall(ACTOR, "What does the user drink?", k=5, threshold=-1.0)
    assert {h.record.id for h in hits} <= {"m-tea", "m-coffee", "m-dog"}
    assert {o.kind.value for o in open_journal(store).by_run(summary.run_id)} == {"delete"}
    store.close()
    # the receipt says blocked, names the case, holds no content
    raw = Path(summary.receipt or "").read_bytes()
    receipt = json.loads(raw)
    assert receipt["status"] == "blocked" and receipt["gate"]["high_impact_failed"] == ["tea-kept"]
    assert b"green tea" not in raw and b"Which kind" not in raw
    # the event: memlife.run.blocked, content-free, with the one-line summary
    from flows import events

    name, resource, payload = events.run_event(summary)  # type: ignore[misc]
    assert name == "memlife.run.blocked" == events.EVENT_BLOCKED
    assert (
        payload["gate"]["high_impact_failed"] == ["tea-kept"] and "tea-kept" in payload["summary"]
    )
    assert b"green tea" not in json.dumps(payload).encode()


def test_blocked_run_cli_exit_code_and_line(home: Path, tmp_path: Path) -> None:
    seed(home)
    cases = write_cases(tmp_path / "cases.yaml", [tea_case()])
    res = CliRunner().invoke(
        app, ["run", "--engine", "local", "--now", NOW_ARG, "--eval-cases", cases]
    )
    assert res.exit_code == 5, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("gate:"))
    assert "BLOCKED" in line and "HIGH_IMPACT_CASE_FAILED" in line and "tea-kept" in line
    assert "must_retain_recall 0.000 < 1.000 (before 1.000, regressed)" in line
    assert "held: supersedes" in line and "0 records quarantined" in line
    assert "status: blocked" in res.output
    assert statuses(home)["m-tea"] == "active"


def test_blocked_flow_emits_the_event(
    home: Path, tmp_path: Path, prefect_harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.events
    import flows.nightly as nightly_mod

    seed(home)
    cases = write_cases(tmp_path / "cases.yaml", [tea_case()])
    emitted: list[tuple[str, dict]] = []
    monkeypatch.setattr(
        flows.events,
        "emit_event",
        lambda event, resource, payload: emitted.append((event, payload)),
    )
    state = nightly_mod.nightly(
        RunConfig(dry_run=False, now=NOW, eval_cases=cases), return_state=True
    )
    # Completed under its own name: visible to automations, never Failed (Prefect would retry)
    assert state.is_completed() and state.name == "Blocked"
    result = state.result()
    assert result["status"] == "blocked"
    assert [e for e, _ in emitted] == ["memlife.run.blocked"]
    assert emitted[0][1]["gate"]["high_impact_failed"] == ["tea-kept"]
    assert statuses(home)["m-tea"] == "active"


def test_when_the_deletion_is_the_culprit_it_is_quarantined_and_supersedes_go_ahead(
    home: Path, tmp_path: Path
) -> None:
    seed(home)
    cases = write_cases(
        tmp_path / "cases.yaml",
        [
            {
                "id": "trip-kept",
                "query": "Where did the user plan a trip?",
                "actor_id": ACTOR,
                "must_retrieve": ["m-trip"],
                "impact": "high",
                "k": 3,
            },
        ],
    )
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    gate = summary.gate or {}
    assert summary.status == "blocked" and gate["high_impact_failed"] == ["trip-kept"]
    assert gate["deletions_blocked"] is True and gate["supersedes_blocked"] is False
    assert summary.lifecycle["quarantined"] == 1 and summary.lifecycle["deleted"] == 0
    assert summary.lifecycle["superseded"] == 2 and summary.lifecycle["consolidated"] == 1
    st = statuses(home)
    assert st["m-trip"] == "quarantined" and st["m-tea"] == st["m-coffee"] == "superseded"


# -- the gate is required where deletion is enforced ---------------------------------------------
def test_apply_without_eval_set_withholds_judgements_and_says_why(
    home: Path, tmp_path: Path
) -> None:
    ttl = rec("m-ttl", "facts", "Prefers window seats on flights.", subject="seat", age=900)
    seed(home, [*RECORDS, ttl])
    policy = yaml.safe_load(Path("policies/default.yaml").read_text())
    policy["memory_types"]["semantic"]["default_ttl_days"] = 365  # m-ttl: a TTL judgement
    policy["version"] = "test-ttl"
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))

    res = CliRunner().invoke(
        app,
        [
            "run",
            "--engine",
            "local",
            "--now",
            NOW_ARG,
            "--policy",
            str(tmp_path / "p.yaml"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["gate"]["reasons"] == ["GATE_NOT_CONFIGURED"] and out["gate"]["configured"] is False
    assert out["gate"]["withheld_deletions"] == 1 and out["gate"]["withheld_groups"] == 1
    # the hard-expired trip is an obligation: deleted; the TTL judgement and the supersede wait
    assert out["lifecycle"]["deleted"] == 1 and out["lifecycle"]["superseded"] == 0
    assert out["lifecycle"]["consolidated"] == 0
    assert statuses(home) == {
        "m-tea": "active",
        "m-coffee": "active",
        "m-dog": "active",
        "m-ttl": "active",
    }
    receipt = json.loads(Path(out["receipt"]).read_text())
    assert receipt["gate"]["reasons"] == ["GATE_NOT_CONFIGURED"]
    assert {"id": "m-ttl", "reason": "GATE_NOT_CONFIGURED"} in receipt["ids_not_deleted"]
    # the human summary says so in one line
    res = CliRunner().invoke(
        app, ["run", "--engine", "local", "--now", NOW_ARG, "--policy", str(tmp_path / "p.yaml")]
    )
    assert (
        "gate: not configured (GATE_NOT_CONFIGURED): 1 deletion and 1 consolidation withheld"
        in res.output
    )


def test_gate_not_required_by_policy_lets_an_ungated_run_apply(home: Path, tmp_path: Path) -> None:
    seed(home)
    summary = run_local(
        RunConfig(dry_run=False, now=NOW, policy=policy_with(tmp_path, required=False))
    )
    assert summary.gate is not None and summary.gate["required"] is False
    assert summary.lifecycle["superseded"] == 2 and summary.lifecycle["deleted"] == 1


# -- absolute failures are visible --------------------------------------------------------------
def _contradicting_cases(tmp_path: Path) -> str:
    # The dog case fails before and after alike (the expected fact is not in the store):
    # below threshold, not made worse by the run.
    return write_cases(
        tmp_path / "cases.yaml",
        [
            {
                "id": "cat-name",
                "query": "What is the name of the user's cat?",
                "actor_id": ACTOR,
                "must_retrieve": [{"fact": "a cat named Tom"}],
                "k": 3,
            },
            {
                "id": "dog-name",
                "query": "What is the dog called?",
                "actor_id": ACTOR,
                "must_retrieve": ["m-dog"],
                "k": 3,
            },
        ],
    )


def test_gate_below_threshold_but_not_worse_is_a_warning(home: Path, tmp_path: Path) -> None:
    seed(home, [DOG, TRIP])
    summary = run_local(
        RunConfig(dry_run=False, now=NOW, eval_cases=_contradicting_cases(tmp_path))
    )
    gate = summary.gate or {}
    assert summary.status == "success" and gate["status"] == "warn"
    assert gate["gates"]["must_retain_recall"]["result"] == "warn"
    assert gate["gates"]["aggregate_score"]["value"] == 0.5  # reported beside the others
    assert "must_retain_recall" in gate["warnings"] and summary.lifecycle["deleted"] == 1
    receipt = json.loads(Path(summary.receipt or "").read_text())
    assert receipt["gate"]["status"] == "warn"
    res = CliRunner().invoke(
        app,
        [
            "run",
            "--engine",
            "local",
            "--dry-run",
            "--now",
            NOW_ARG,
            "--eval-cases",
            _contradicting_cases(tmp_path),
        ],
    )
    assert (
        "gate: warn" in res.output
        and "must_retain_recall 0.500 < 1.000 (before 0.500, warn)" in res.output
    )


def test_block_on_absolute_blocks_a_gate_below_threshold(home: Path, tmp_path: Path) -> None:
    seed(home, [DOG, TRIP])
    pol = policy_with(tmp_path, block_on_absolute=True)
    summary = run_local(
        RunConfig(dry_run=False, now=NOW, policy=pol, eval_cases=_contradicting_cases(tmp_path))
    )
    gate = summary.gate or {}
    assert (
        summary.status == "blocked" and "GATE_BELOW_THRESHOLD:must_retain_recall" in gate["reasons"]
    )
    assert summary.lifecycle["deleted"] == 0 and summary.lifecycle["quarantined"] == 1


def test_aggregate_score_is_gateable(home: Path, tmp_path: Path) -> None:
    seed(home, [DOG])
    cases = write_cases(
        tmp_path / "cases.yaml",
        [
            {
                "id": "dog",
                "query": "What is the dog called?",
                "actor_id": ACTOR,
                "must_retrieve": ["m-dog"],
            },
            {
                "id": "cat",
                "query": "What is the cat called?",
                "actor_id": ACTOR,
                "must_retrieve": [{"fact": "a cat named Tom"}],
                "min_result": 0.0,
            },
        ],
    )
    ok = run_local(
        RunConfig(
            dry_run=True,
            now=NOW,
            eval_cases=cases,
            policy=policy_with(tmp_path, aggregate_score_min=0.5),
        )
    )
    assert ok.gate is not None and ok.gate["gates"]["aggregate_score"]["result"] == "pass"
    strict = policy_with(tmp_path, aggregate_score_min=0.9, block_on_absolute=True)
    bad = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases, policy=strict))
    assert bad.gate is not None and bad.gate["reasons"] == ["GATE_BELOW_THRESHOLD:aggregate_score"]
    assert bad.status == "blocked"


# -- crash safety through the staged steps ------------------------------------------------------
def _final_state(home: Path) -> dict[str, Any]:
    store = SqliteStore(home / "memlife.db")
    try:
        rows = store.connection.execute("SELECT id, status FROM records ORDER BY id").fetchall()
        return {r[0]: r[1] for r in rows}
    finally:
        store.close()


def _anonymous(state: dict[str, Any]) -> dict[str, Any]:
    return {("r-" if rid.startswith("r-") else rid): status for rid, status in state.items()}


@pytest.mark.parametrize(
    "point,skip",
    [
        ("after_stage", 0),
        ("after_gate", 0),
        ("after_commit_groups", 0),
        ("after_replacement_write", 0),
        ("after_supersede", 0),
        ("after_delete", 0),
        ("before_receipt", 2),
        ("after_journal_write", 1),
    ],
)
def test_a_crash_at_any_staged_step_resumes_to_the_clean_result(
    home: Path, tmp_path: Path, point: str, skip: int
) -> None:
    cases = write_cases(
        tmp_path / "cases.yaml",
        [
            {
                "id": "dog",
                "query": "What is the dog called?",
                "actor_id": ACTOR,
                "must_retrieve": ["m-dog"],
                "impact": "high",
            },
        ],
    )
    clean_home = tmp_path / "clean"
    clean_home.mkdir()
    seed(clean_home)
    clean = run_local(
        RunConfig(
            dry_run=False,
            now=NOW,
            eval_cases=cases,
            store=f"sqlite:///{clean_home / 'memlife.db'}",
            receipts=f"file://{clean_home / 'receipts'}",
        )
    )
    assert clean.status == "success" and clean.lifecycle["superseded"] == 2
    expected = _final_state(clean_home)

    seed(home)
    with inject(point, skip=skip), pytest.raises(InjectedFault):
        run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    if point in ("after_stage", "after_gate"):  # staged only: the store is as it was
        assert _final_state(home) == {r.id: "active" for r in RECORDS}
    again = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    assert again.status == "success", again.as_json()
    # a replacement's id is keyed by its store's run secret (audit 50c): the clean store's
    # has another; one replacement each, checked below
    assert _anonymous(_final_state(home)) == _anonymous(expected)
    store = SqliteStore(home / "memlife.db")
    try:  # one replacement, every superseded original pointing at it (invariant 3)
        reps = [r for r in store.connection.execute("SELECT id FROM records WHERE id LIKE 'r-%'")]
        assert len(reps) == 1
        for rid in ("m-tea", "m-coffee"):
            r = store.get(rid)
            assert r is not None and r.status is Status.superseded
            assert store.get(r.provenance.replaced_by or "").status is Status.active  # type: ignore[union-attr]
    finally:
        store.close()
    ops = json.loads(Path(again.receipt or "").read_text())["failures"]
    assert ops == []


def test_a_hold_placed_on_a_written_replacement_before_the_rerun_is_kept(
    home: Path, tmp_path: Path
) -> None:
    """Adversarial review: the rerun's replacement write was an upsert of the planned payload,
    and wiped a legal hold placed on the replacement after the crash (invariant 1)."""
    from memlife.holds import place_hold

    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
         "must_retrieve": ["m-dog"], "impact": "high"},
    ])  # fmt: skip
    seed(home)
    with inject("after_replacement_write"), pytest.raises(InjectedFault):
        run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    store = SqliteStore(home / "memlife.db")
    (rid,) = [r for (r,) in store.connection.execute("SELECT id FROM records WHERE id LIKE 'r-%'")]
    place_hold(store, ids=[rid])
    held = store.get(rid)
    store.close()
    again = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    assert again.status == "success", again.as_json()
    store = SqliteStore(home / "memlife.db")
    try:
        assert store.get(rid) == held  # still held, not rewritten
        for source in ("m-tea", "m-coffee"):
            assert store.get(source).provenance.replaced_by == rid  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_replacement_outlives_the_member_with_the_earliest_deadline(
    home: Path, tmp_path: Path
) -> None:
    """Adversarial review: the replacement took its survivor's expires_at, so on the night it
    expired it was deleted while the member without a deadline still pointed at it."""
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
         "must_retrieve": ["m-dog"]},
    ])  # fmt: skip
    deadline = NOW + timedelta(days=5)
    soon = rec("m-berlin", "facts", "The user lives in Berlin.", subject="city", age=10,
               expires=deadline)  # fmt: skip
    kept = rec("m-berlin2", "facts", "the user lives in berlin", subject="city", age=90)
    seed(home, [soon, kept, DOG])
    first = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    assert first.status == "success" and first.lifecycle["superseded"] == 2, first.as_json()
    store = SqliteStore(home / "memlife.db")
    replacement = store.get(store.get("m-berlin2").provenance.replaced_by or "")  # type: ignore[union-attr]
    assert replacement is not None and replacement.expires_at is None
    store.close()
    later = run_local(RunConfig(dry_run=False, now=deadline + timedelta(days=1), eval_cases=cases))
    assert later.status == "success", later.as_json()
    store = SqliteStore(home / "memlife.db")
    try:  # invariant 3 after the deadline: what is superseded points to an active record
        for r in store.iter_all():
            if r.status is Status.superseded:
                assert store.get(r.provenance.replaced_by or "").status is Status.active  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_source_edited_between_the_crash_and_the_rerun_withdraws_the_group(
    home: Path, tmp_path: Path
) -> None:
    """Adversarial review: the rerun wrote the replacement planned before the crash, with
    the text the edited source no longer says (invariant 6); now the group is withdrawn and
    the next night regroups what the records say."""
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
         "must_retrieve": ["m-dog"], "impact": "high"},
    ])  # fmt: skip
    seed(home)
    with inject("after_journal_write"), pytest.raises(InjectedFault):
        run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    store = SqliteStore(home / "memlife.db")
    edited = "Switched to oat milk lattes; no longer drinks tea."
    store.put_many([COFFEE.model_copy(update={"content": edited})])
    store.close()
    again = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    assert again.status == "success", again.as_json()
    store = SqliteStore(home / "memlife.db")
    try:
        active = [r for r in store.iter_all() if r.status is Status.active]
        assert all(r.content != COFFEE.content for r in active)  # the old text is nowhere
        assert {"m-tea", "m-coffee"} <= {r.id for r in active}
    finally:
        store.close()
    night2 = run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), eval_cases=cases))
    assert night2.status == "success" and night2.lifecycle["superseded"] == 2
    store = SqliteStore(home / "memlife.db")
    try:
        replacement = store.get(store.get("m-coffee").provenance.replaced_by or "")  # type: ignore[union-attr]
        assert replacement is not None and replacement.content == edited
    finally:
        store.close()


def test_a_replacement_superseded_in_its_turn_hands_over_its_sources(
    home: Path, tmp_path: Path
) -> None:
    """Adversarial review: night 2 superseded night 1's replacement, and tea and coffee kept
    pointing to it, a superseded record (invariant 3 asks for an active one)."""
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
         "must_retrieve": ["m-dog"]},
    ])  # fmt: skip
    seed(home, [TEA, COFFEE, DOG])
    assert run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases)).status == "success"
    water = rec("m-water", "preferences", "Now drinks only water; no longer drinks coffee.",
                subject="beverage", age=-1)  # fmt: skip
    seed(home, [water])
    later = NOW + timedelta(days=2)
    night2 = run_local(RunConfig(dry_run=False, now=later, eval_cases=cases))
    assert night2.status == "success" and night2.lifecycle["superseded"] == 2, night2.as_json()
    store = SqliteStore(home / "memlife.db")
    try:
        for r in store.iter_all():
            if r.status is Status.superseded:
                target = store.get(r.provenance.replaced_by or "")
                assert target is not None and target.status is Status.active, r.id
    finally:
        store.close()


def test_a_set_that_names_no_actor_of_the_store_gates_nothing(home: Path, tmp_path: Path) -> None:
    """Adversarial review: a set for another deployment's actor satisfied the required gate
    while checking nothing, and u-1's consolidation went ahead."""
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "elsewhere", "query": "What does the user drink?", "actor_id": "nobody",
         "must_retrieve": [{"fact": "tea"}]},
    ])  # fmt: skip
    seed(home, [TEA, COFFEE, DOG])
    night = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))
    assert night.status == "success", night.as_json()
    assert night.lifecycle["superseded"] == 0
    assert night.gate is not None and night.gate["uncovered"]["groups"]
    assert _final_state(home) == {"m-coffee": "active", "m-dog": "active", "m-tea": "active"}
    covering = write_cases(tmp_path / "mine.yaml", [
        {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
         "must_retrieve": ["m-dog"]},
    ])  # fmt: skip
    later = run_local(RunConfig(dry_run=False, now=NOW + timedelta(hours=1), eval_cases=covering))
    assert later.status == "success" and later.lifecycle["superseded"] == 2


# -- the shipped deployments carry the gate -------------------------------------------------------
def test_nightly_and_dry_run_deployments_carry_the_gate_configuration() -> None:
    data = yaml.safe_load(Path("deploy/prefect.yaml").read_text())
    deployments = {d["name"]: d for d in data["deployments"]}
    fields = set(RunConfig.model_fields)
    for name in ("nightly", "dry-run"):
        (p,) = deployments[name]["parameters"].values()  # the flow's one RunConfig
        assert p["eval_cases"] == "{{ $MEMLIFE_EVAL_CASES }}", name  # the operator's set
        assert set(p) <= fields, set(p) - fields  # every key is a RunConfig field
        RunConfig.model_validate({**p, "eval_cases": None})  # and a valid one
    assert deployments["dry-run"]["parameters"]["config"]["with_model"] is False
    # the policy the deployments run requires the gate where deletion is enforced
    policy_path = deployments["nightly"]["parameters"]["config"]["policy"]
    policy = yaml.safe_load(Path(policy_path).read_text())
    assert policy["gate"]["required"] is True and policy["enforce_deletion_in"]
    autos = yaml.safe_load(Path("deploy/automations.yaml").read_text())["automations"]
    assert any("memlife.run.blocked" in a["trigger"]["expect"] for a in autos)


def test_a_missing_or_empty_evaluation_set_is_refused_before_the_run(
    home: Path, tmp_path: Path
) -> None:
    seed(home)
    res = CliRunner().invoke(
        app,
        ["run", "--engine", "local", "--now", NOW_ARG, "--eval-cases", str(tmp_path / "nope.yaml")],
    )
    assert res.exit_code == 2 and "nope.yaml" in res.output
    empty = write_cases(tmp_path / "empty.yaml", [])
    res = CliRunner().invoke(
        app, ["run", "--engine", "local", "--now", NOW_ARG, "--eval-cases", empty]
    )
    assert res.exit_code == 2 and "no cases" in res.output
    assert statuses(home)["m-tea"] == "active"


# -- eval init writes cases worth having ------------------------------------------------------------
def test_eval_init_writes_questions_and_all_five_kinds(home: Path, tmp_path: Path) -> None:
    from memlife.demo import generate
    from memlife.evalset import CaseKind, load_cases

    store = SqliteStore(home / "memlife.db")
    records = list(generate(1500, anchor=NOW))
    store.put_many(records)
    store.close()
    runner = CliRunner()
    victim = next(
        r
        for r in records
        if r.actor_id == "u-000001"
        and r.retention_class.value == "standard"
        and r.memory_type is MemoryType.semantic
    )
    res = runner.invoke(app, ["erase", "--actor", "u-000001", "--id", victim.id, "--yes", "--json"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "cases.yaml"
    res = runner.invoke(app, ["eval", "init", "-o", str(out), "--actors", "3", "--now", NOW_ARG])
    assert res.exit_code == 0, res.output
    assert "MEMLIFE_EVAL_CASES" in res.output and "--eval-cases" in res.output  # where it goes
    cases = load_cases(out)
    assert {c.kind for c in cases} >= {
        CaseKind.recent_preference,
        CaseKind.superseded_fact,
        CaseKind.expired_fact,
        CaseKind.procedure,
        CaseKind.erased,
    }
    contents = [" ".join(r.content.lower().split()) for r in records]
    for c in cases:  # questions, never the stored text
        assert c.query.endswith("?"), c.query
        q = " ".join(c.query.lower().split())
        assert not any(q in text or text in q for text in contents), c.id
    (erased,) = [c for c in cases if c.kind is CaseKind.erased]
    assert [t.id for t in erased.forbidden] == [victim.id] and not erased.must_retrieve
    raw = out.read_text()
    assert victim.content not in raw  # ids only
    # every must-retrieve case passes on the store as it is (a baseline that can regress)
    res = runner.invoke(app, ["eval", "--cases", str(out), "--json"])
    report = json.loads(res.stdout)
    must = {c.id for c in cases if c.must_retrieve}
    assert must and not must & set(report["failed_cases"])
    assert erased.id not in report["failed_cases"]  # the erased record does not come back


# -- a dry run calls no model unless asked; an evaluation set in S3 ----------------------------------
def test_dry_run_estimates_model_calls_and_calls_none_unless_asked(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages_server: Any
) -> None:
    from memlife.consolidate.prompts import TOOL_NAME
    from tests.fakes.messages_api import tool_use_reply

    seed(home)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    summary = run_local(RunConfig(dry_run=True, now=NOW))
    assert messages_server.message_requests == []  # a key is set, and still no paid call
    assert summary.model["calls"] == 0 and summary.model["estimated_calls"] == 1
    assert summary.model["estimated_input_tokens"] > 100
    res = CliRunner().invoke(app, ["run", "--engine", "local", "--dry-run", "--now", NOW_ARG])
    assert "model: not called (dry run); an apply run would make about 1 call," in res.output
    assert messages_server.message_requests == []

    def answer(body: dict) -> Any:
        out = {
            "summary": COFFEE.content,
            "claims": [COFFEE.content],
            "dropped_claims": [TEA.content],
            "confidence": 0.9,
            "source_ids": sorted([TEA.id, COFFEE.id]),
        }
        return tool_use_reply(TOOL_NAME, out)

    messages_server.set_handler(answer)
    asked = run_local(
        RunConfig(dry_run=True, now=NOW, with_model=True, policy=policy_with(tmp_path))
    )
    assert len(messages_server.message_requests) == 1 and asked.model["calls"] == 1
    assert statuses(home)["m-tea"] == "active"  # still a dry run


def test_evaluation_set_in_s3(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from moto import mock_aws

    for k, v in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    seed(home)
    body = Path(write_cases(tmp_path / "cases.yaml", [tea_case()])).read_bytes()
    with mock_aws():
        boto3.client("s3").create_bucket(Bucket="gate")
        boto3.client("s3").put_object(Bucket="gate", Key="eval/cases.yaml", Body=body)
        monkeypatch.setenv("MEMLIFE_EVAL_CASES", "s3://gate/eval/cases.yaml")  # the worker's
        summary = run_local(RunConfig(dry_run=False, now=NOW))
        assert summary.status == "blocked" and (summary.gate or {})["high_impact_failed"] == [
            "tea-kept"
        ]
        res = CliRunner().invoke(
            app,
            [
                "run",
                "--engine",
                "local",
                "--now",
                NOW_ARG,
                "--eval-cases",
                "s3://gate/eval/missing.yaml",
            ],
        )
        assert res.exit_code == 2 and "s3://gate/eval/missing.yaml: no such object" in res.output
    manifest = json.loads(Path(summary.manifest).read_text())
    assert manifest["eval_cases"] == "s3://gate/eval/cases.yaml"


def test_dry_run_counts_withheld_groups_per_enforced_namespace_as_apply_does(
    home: Path, tmp_path: Path
) -> None:
    """A dry run without an evaluation set keeps only a count of staged groups per namespace:
    it reports as withheld exactly the groups an apply run withholds (enforced namespaces)."""
    milk = rec("m-milk", "notes", "Drinks oat milk only.", subject="milk", age=300)
    milk2 = rec("m-milk2", "notes", "Switched to soy milk; no more oat milk.", subject="milk",
                age=10)  # fmt: skip
    seed(home, [TEA, COFFEE, DOG, milk, milk2])
    policy = yaml.safe_load(Path("policies/default.yaml").read_text())
    found = {}
    for enforced in (["/users/*/preferences"], ["/users/*/preferences", "/users/*/notes"], []):
        policy["enforce_deletion_in"] = enforced
        policy["version"] = f"test-enforced-{len(enforced)}"
        path = tmp_path / f"p{len(enforced)}.yaml"
        path.write_text(yaml.safe_dump(policy))
        dry = run_local(RunConfig(dry_run=True, now=NOW, policy=str(path)))
        assert dry.gate is not None
        found[len(enforced)] = dry.gate["withheld_groups"]
    assert found == {1: 1, 2: 2, 0: 0}
    policy["enforce_deletion_in"] = ["/users/*/preferences"]
    policy["version"] = "test-enforced-apply"
    (tmp_path / "pa.yaml").write_text(yaml.safe_dump(policy))
    applied = run_local(RunConfig(dry_run=False, now=NOW, policy=str(tmp_path / "pa.yaml")))
    assert applied.gate is not None and applied.gate["withheld_groups"] == found[1]


@pytest.mark.parametrize("blocks", ["supersedes", "deletions"])
def test_a_dry_runs_would_is_net_of_what_the_gate_blocks(
    home: Path, tmp_path: Path, blocks: str
) -> None:
    """Session 30 "Left": with an evaluation set the dry run's "an apply run would" column
    counted the consolidation or deletion its own gate line said it would block: the apply
    run then quarantined the deletion, or left the supersede undone."""
    from memlife.would_change import would_change

    seed(home)
    case = tea_case() if blocks == "supersedes" else {
        "id": "trip-kept", "query": "Where did the user plan a trip?", "actor_id": ACTOR,
        "must_retrieve": ["m-trip"], "impact": "high", "k": 3,
    }  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [case])
    dry = run_local(RunConfig(dry_run=True, now=NOW, eval_cases=cases)).as_json()
    assert (dry["gate"] or {})[f"{blocks}_blocked"] is True
    would = dict(would_change(dry))
    assert would[f"hold back, gate: {'groups' if blocks == 'supersedes' else 'deletions'}"] == 1
    done = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases)).as_json()["lifecycle"]
    assert (done["deleted"], done["consolidated"]) == (
        would["delete"],
        would["consolidate (groups)"],
    )


def test_a_flow_refused_before_it_starts_still_emits_the_failure_event(
    home: Path, prefect_harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused run has no run id and no receipt: the failure event is all an automation
    watching memlife.run.* sees (flows/nightly.py calls events.on_refused). Content-free:
    the error's type, never its message."""
    import flows.events
    import flows.nightly as nightly_mod
    from memlife.errors import InputError

    seed(home)
    emitted: list[tuple[str, dict, dict]] = []
    monkeypatch.setattr(
        flows.events,
        "emit_event",
        lambda event, resource, payload: emitted.append((event, resource, payload)),
    )
    far = NOW.replace(year=NOW.year + 50)  # an apply cutoff far ahead: refused
    with pytest.raises(InputError):
        nightly_mod.nightly(RunConfig(dry_run=False, now=far))
    (name, resource, payload), *more = emitted
    assert not more and name == flows.events.EVENT_FAILURE
    assert resource["prefect.resource.id"] == "memlife.run.refused"
    assert payload == {"run_id": None, "status": "failure", "stage": "start", "mode": "apply",
                       "error": "InputError"}  # fmt: skip
    assert statuses(home)["m-tea"] == "active"  # nothing ran
