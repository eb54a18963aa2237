"""The regression gate against the session-24 review: a case the run breaks hidden by one it
fixes, cases that check nothing (a wrong namespace or id; any actor on AgentCore), keys
written twice in a set, one tenant's failing case holding every tenant's deletions back,
and what a run without a set lets go ahead ungated.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from memlife.apply.deletions import DeleteItem
from memlife.evalset import EvalSetError, load_cases, parse_cases
from memlife.evalset_starter import starter_cases
from memlife.gate import evaluate_changes
from memlife.model import MemoryRecord, MemoryType, Source
from memlife.pipeline import RunConfig, run_local
from memlife.policy import GatePolicy, load_policy
from memlife.run_commit import uncovered
from memlife.run_finish import gate_line
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import ACTOR, NOW, rec, write_cases

TEA = rec(
    "m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage", age=300
)
COFFEE = rec("m-coffee", "preferences",
             "Switched to black coffee every morning; no longer drinks tea.",
             subject="beverage", age=20)  # fmt: skip
DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
TEA_CASE: dict[str, Any] = {"id": "tea-kept", "query": "Which kind of tea does the user drink?",
                            "actor_id": ACTOR, "must_retrieve": [{"fact": "green tea"}], "k": 3}  # fmt: skip


def seed(home: Path, records: list[MemoryRecord]) -> None:
    store = SqliteStore(home / "memlife.db")
    store.put_many(records)
    store.close()


def statuses(home: Path) -> dict[str, str]:
    store = SqliteStore(home / "memlife.db")
    try:
        return dict(store.connection.execute("SELECT id, status FROM records").fetchall())
    finally:
        store.close()


# -- F1: a case the run breaks blocks, whatever another case does ---------------------------------
def test_a_broken_case_blocks_though_a_fixed_case_keeps_every_gate_level(
    home: Path, tmp_path: Path
) -> None:
    # the supersede loses "green tea" (tea-kept breaks); the hard expiry of m-trip stops it
    # crowding k=1 (osaka-hotel is fixed): every gate's figure is the same before and after
    trip = rec("m-trip", "episodes", "Planned a trip to Osaka in May.", age=40,
               mtype=MemoryType.episodic, expires=NOW - timedelta(days=2))  # fmt: skip
    hotel = rec("m-trip2", "episodes", "Booked a hotel for the Osaka trip.", age=10,
                mtype=MemoryType.episodic)  # fmt: skip
    seed(home, [TEA, COFFEE, DOG, trip, hotel])
    osaka = {"id": "osaka-hotel", "query": "Planned a trip to Osaka in May", "actor_id": ACTOR,
             "must_retrieve": ["m-trip2"], "k": 1}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [TEA_CASE, osaka])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    g = summary.gate or {}
    assert all(
        v["value"] == v["before"] for n, v in g["gates"].items() if n != "contradiction_rate"
    )
    assert g["blocked"] and g["reasons"] == ["CASE_REGRESSED"] and summary.status == "blocked"
    assert g["regressed_cases"] == ["tea-kept"]
    # the part at fault is held back, the innocent deletion goes ahead
    assert g["supersedes_blocked"] and not g["deletions_blocked"]
    assert statuses(home) == {"m-tea": "active", "m-coffee": "active", "m-dog": "active",
                              "m-trip2": "active"}  # fmt: skip
    assert "CASE_REGRESSED" in (gate_line(summary.as_json()) or "")


# -- F2: a case that checks nothing withholds what it would have judged ---------------------------
OTHER = rec("m-u2-tea", "preferences", "Drinks only green tea.", subject="beverage", actor="u-2")
VARIANTS = {
    "typo-namespace": ({**TEA_CASE, "namespace": "/user/u-1/preferences"}, "NO_RECORDS"),
    "other-tenant-namespace": ({**TEA_CASE, "namespace": "/users/u-2/preferences"}, "NO_RECORDS"),
    "other-tenant-id": ({**TEA_CASE, "must_retrieve": ["m-u2-tea"]}, "TARGET_ABSENT"),
    "forbidden-only-typo": (
        {
            "id": "tea-kept",
            "query": "Which kind of tea does the user drink?",
            "actor_id": ACTOR,
            "namespace": "/users/u-1/preference",
            "forbidden": [{"claim": "black coffee"}],
        },
        "NO_RECORDS",
    ),  # fmt: skip
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_case_that_checks_nothing_leaves_its_actor_unchanged(
    home: Path, tmp_path: Path, variant: str
) -> None:
    case, code = VARIANTS[variant]
    seed(home, [TEA, COFFEE, DOG, OTHER])
    cases = write_cases(tmp_path / "cases.yaml", [case])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    g = summary.gate or {}
    assert [(u["case"], u["code"]) for u in g["uncovered_cases"]] == [("tea-kept", code)]
    assert g["uncovered"]["groups"] and summary.lifecycle["superseded"] == 0
    assert statuses(home)["m-tea"] == "active"
    assert "GATE_UNCOVERED" in (gate_line(summary.as_json()) or "")


def test_beside_a_good_case_a_wrong_namespace_still_withholds_its_actor(
    home: Path, tmp_path: Path
) -> None:
    seed(home, [TEA, COFFEE, DOG, OTHER])
    dog = {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
           "must_retrieve": ["m-dog"]}  # fmt: skip
    typo = {**TEA_CASE, "namespace": "/user/u-1/preferences"}
    cases = write_cases(tmp_path / "cases.yaml", [dog, typo])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    g = summary.gate or {}
    assert [u["case"] for u in g["uncovered_cases"]] == ["tea-kept"]
    assert g["cases"] == 1  # the typo case is not evaluated: it would only warn every night
    assert summary.other["gate_withheld_groups"] == 1 and statuses(home)["m-tea"] == "active"


# -- F3: on AgentCore every actor id "has" the strategies' namespaces ----------------------------
def test_on_agentcore_a_set_for_another_deployment_gates_nothing() -> None:
    from tests.fakes.agentcore import agentcore_store

    strategies = [{"strategyId": "facts-a1b2c3d4e5", "name": "facts", "type": "SEMANTIC",
                   "namespaces": ["/users/{actorId}/facts"],
                   "namespaceTemplates": ["/users/{actorId}/facts"]}]  # fmt: skip
    cases = parse_cases([{"id": "elsewhere", "query": "What does the user drink?",
                          "actor_id": "nobody", "must_retrieve": [{"fact": "tea"}]}])  # fmt: skip
    item = DeleteItem("m-1", "u-1", "/users/u-1/facts", ("LOW_SCORE",), None)
    outcome = SimpleNamespace(deletions=[item], staged=[])
    ctx = SimpleNamespace(policy=load_policy())
    with agentcore_store(strategies=strategies) as (store, fake):
        fake.add_actor("u-1")
        assert store.list_namespaces("nobody")  # the template, filled with any id
        verdict = evaluate_changes(store, cases, GatePolicy(), deletions=["m-1"])
    assert [(u["case"], u["code"]) for u in verdict["uncovered_cases"]] == [
        ("elsewhere", "NO_RECORDS")
    ]
    held = uncovered(ctx, [outcome], cases, verdict["uncovered_cases"])  # type: ignore[arg-type]
    assert held["deletions"] == ["m-1"]


# -- F5: a key written twice, or a top-level key the format does not read -------------------------
CASE_YAML = "  - id: tea\n    query: q\n    actor_id: u-1\n    must_retrieve: [m-tea]\n"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("cases:\n" + CASE_YAML + "cases:\n" + CASE_YAML.replace("tea", "dog"), "cases"),
        ("cases:\n" + CASE_YAML + "    impact: high\n    impact: normal\n", "impact"),
        ("cases:\n" + CASE_YAML + "    must_retrieve: [m-dog]\n", "must_retrieve"),
    ],
)
def test_a_key_written_twice_in_a_yaml_set_is_refused(tmp_path: Path, text: str, key: str) -> None:
    p = tmp_path / "cases.yaml"
    p.write_text(text)
    with pytest.raises(EvalSetError, match=f"key '{key}' repeated"):
        load_cases(p)


def test_a_key_written_twice_in_a_jsonl_set_is_refused_without_echoing_content(
    tmp_path: Path,
) -> None:
    base = json.dumps({"id": "c", "query": "q", "actor_id": "u-1", "must_retrieve": ["m-1"]})
    p = tmp_path / "cases.jsonl"
    p.write_text(base[:-1] + ', "impact": "high", "impact": "normal"}\n')
    with pytest.raises(EvalSetError, match=r"line 1: key 'impact' repeated"):
        load_cases(p)
    # a key that may be content pasted in a key's place is not quoted
    p.write_text(base[:-1] + ', "likes green tea": 1, "likes green tea": 2}\n')
    with pytest.raises(EvalSetError) as err:
        load_cases(p)
    assert "green tea" not in str(err.value) and "a key repeated" in str(err.value)


def test_an_unknown_top_level_key_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "cases.yaml"
    p.write_text("defaults:\n  impact: high\ncases:\n" + CASE_YAML)
    with pytest.raises(EvalSetError, match="unknown top-level key 'defaults'"):
        load_cases(p)


# -- F6: one tenant's failing case holds back only its own deletions ------------------------------
ROUTER = rec("m-router", "procedures",
             "To reset the router: unplug it, wait 30 seconds, plug it back in.",
             subject="router_reset", mtype=MemoryType.procedural,
             source=Source.system_of_record, age=20, expires=NOW - timedelta(days=1))  # fmt: skip


def test_a_failing_case_holds_back_only_its_actors_deletions(home: Path, tmp_path: Path) -> None:
    lima = rec("m-u2-trip", "episodes", "Planned a trip to Lima.", actor="u-2", age=40,
               mtype=MemoryType.episodic, expires=NOW - timedelta(days=3))  # fmt: skip
    seed(home, [ROUTER, DOG, lima])
    router = {"id": "router", "query": "What are the steps for router reset?", "actor_id": ACTOR,
              "must_retrieve": ["m-router"], "impact": "high"}  # fmt: skip
    cases = write_cases(tmp_path / "cases.yaml", [router])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    g = summary.gate or {}
    assert g["blocked"] and g["deletions_blocked"] and g["blocking_actors"] == [ACTOR]
    # u-2's hard expiry cannot move a case of u-1 (recall is actor-scoped): it goes ahead
    assert statuses(home) == {"m-router": "quarantined", "m-dog": "active"}
    assert summary.lifecycle["deleted"] == 1 and summary.lifecycle["quarantined"] == 1
    assert "held: deletions of 1 actor(s)" in (gate_line(summary.as_json()) or "")


def test_eval_init_pins_no_record_that_will_expire(home: Path) -> None:
    due = ROUTER.model_copy(update={"expires_at": NOW + timedelta(days=5)})
    kept = due.model_copy(update={"id": "m-router-2", "expires_at": None,
                                  "subject": "modem_reset"})  # fmt: skip
    seed(home, [due, kept])
    store = SqliteStore(home / "memlife.db")
    try:
        cases = starter_cases(store, now=NOW)
    finally:
        store.close()
    assert [t.id for c in cases for t in c.must_retrieve] == ["m-router-2"]


# -- F7: what a run without a set lets go ahead is counted ----------------------------------------
@pytest.mark.parametrize(("ns", "ungated", "withheld"), [("notes", 1, 0), ("facts", 0, 1)])
def test_without_a_set_the_gate_line_counts_what_went_ahead_ungated(
    home: Path, ns: str, ungated: int, withheld: int
) -> None:
    seed(home, [rec("m-peanut", ns, "Allergic to peanuts.", subject="allergy", age=300),
                rec("m-shell", ns, "Allergic to shellfish.", subject="allergy", age=20)])  # fmt: skip

    summary = run_local(RunConfig(dry_run=False, now=NOW))

    g = summary.gate or {}
    assert g["ungated_groups"] == ungated and g["withheld_groups"] == withheld
    assert summary.lifecycle["consolidated"] == ungated  # the default behaviour is unchanged
    line = gate_line(summary.as_json()) or ""
    noun = "consolidation" if ungated == 1 else "consolidations"
    assert f"went ahead ungated: 0 deletions (obligations) and {ungated} {noun} " in line


def test_yaml_policy_loader_is_the_one_reused() -> None:
    # one loader for both files: a fix to it reaches the evaluation set too
    from memlife import evalset, policy

    assert evalset._UniqueKeyLoader is policy._UniqueKeyLoader
    assert yaml.load("a: 1", Loader=evalset._UniqueKeyLoader) == {"a": 1}  # noqa: S506


def test_an_id_whose_replacement_lives_on_is_still_covered(home: Path) -> None:
    # the original was consolidated, then deleted after its retention: recall still finds
    # it through the replacement's provenance, so the case still checks something
    from memlife.model import Provenance

    repl = rec("r-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage")
    repl = repl.model_copy(
        update={"provenance": Provenance(source_event="evt-r", supersedes=["m-gone"])}
    )
    seed(home, [repl, DOG])
    cases = parse_cases([{**TEA_CASE, "must_retrieve": ["m-gone"]},
                         {**TEA_CASE, "id": "typo", "must_retrieve": ["m-never"]}])  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    try:
        verdict = evaluate_changes(store, cases, GatePolicy())
    finally:
        store.close()
    assert [(u["case"], u["code"]) for u in verdict["uncovered_cases"]] == [
        ("typo", "TARGET_ABSENT")
    ]
    assert verdict["failed_cases"] == []


def test_a_dry_runs_gate_line_counts_the_deletions_the_apply_run_then_makes(
    home: Path, tmp_path: Path
) -> None:
    """Session 28 review: a dry run counted no deletions at all (it stages none), so its gate
    line said an apply run would let "0 deletions (obligations)" go ahead ungated, and
    withhold 0, where the apply run on the same store then deleted the hard-expired records
    and withheld the TTL judgements."""
    expired = [rec(f"m-trip-{i}", "episodes", f"Planned trip number {i} to Osaka.",
                   mtype=MemoryType.episodic, age=40, expires=NOW - timedelta(days=2))
               for i in range(3)]  # fmt: skip
    ttl = [rec(f"m-ttl-{i}", "facts", f"Prefers seat {i} on flights.", subject=f"seat-{i}", age=900)
           for i in range(2)]  # fmt: skip
    seed(home, [*expired, *ttl, DOG])
    policy = yaml.safe_load(Path("policies/default.yaml").read_text())
    policy["memory_types"]["semantic"]["default_ttl_days"] = 365  # the m-ttl: judgements
    policy["version"] = "test-ttl"
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(policy))

    dry = run_local(RunConfig(dry_run=True, now=NOW, policy=str(tmp_path / "p.yaml")))
    applied = run_local(RunConfig(dry_run=False, now=NOW, policy=str(tmp_path / "p.yaml")))

    assert applied.lifecycle["deleted"] == 3  # the obligations; the judgements withheld
    for summary in (dry, applied):
        g = summary.gate or {}
        assert (g["ungated_deletions"], g["withheld_deletions"]) == (3, 2), (summary.mode, g)
    line = gate_line(dry.as_json()) or ""
    assert "an apply run would withhold 2 deletions" in line
    assert "let go ahead ungated: 3 deletions (obligations)" in line
