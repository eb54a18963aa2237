"""Session 36d mutation audit of the regression gate (memlife/gate.py), the evaluation set
format (memlife/evalset.py) and the starter set (memlife/evalset_starter.py): each test
attacks one guard a mutant showed untested. Real SQLite stores in tmp_path and the real
MiniLM embedder; no mocks of memlife logic."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from memlife.audit import FileSink
from memlife.erase import erase
from memlife.evalset import (
    CaseKind,
    EvalSetError,
    Target,
    cases_digest,
    dump_cases,
    load_cases,
    parse_cases,
)
from memlife.evalset_starter import erasure_cases, question_for, starter_cases
from memlife.gate import evaluate, evaluate_changes, model_answerer_from_env
from memlife.model import MemoryRecord, MemoryType, Source, Status
from memlife.policy import GatePolicy, Policy, load_policy
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import text_reply
from tests.support.gate import NOW, rec

PEANUTS = "Is allergic to peanuts; never serve satay."
HIKING = "Likes hiking in the Alps every summer."


def at(r: MemoryRecord, **update: Any) -> MemoryRecord:
    return r.model_copy(update=update)


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "memlife.db")
    yield s
    s.close()


def peanut_case(actor: str, namespace: str) -> list[Any]:
    """A normal-impact case that needs the peanut allergy, scoped to one namespace."""
    return parse_cases([{"id": "peanuts", "query": "Is the user allergic to any food?",
                         "actor_id": actor, "namespace": namespace,
                         "must_retrieve": [{"fact": "peanuts"}], "k": 3}])  # fmt: skip


# -- whose records a view holds -------------------------------------------------------------------


def test_another_actors_quarantined_record_in_a_shared_namespace_is_not_in_a_cases_view(
    store: SqliteStore,
) -> None:
    """ShadowRecall._load's ``r.actor_id == actor`` on the quarantined deletion candidates
    it adds to "before": two actors share ``/team/notes``; u-2's quarantined record (its
    deletion staged) must not count in u-1's view. Mixed in, u-1's case passes before and
    fails after: u-2's deletion is held back on u-1's case (tenants mixed)."""
    ns = "/team/notes"
    mine = at(rec("m-a", "notes", HIKING), namespace=ns)
    theirs = at(rec("m-b", "notes", PEANUTS, actor="u-2"), namespace=ns,
                status=Status.quarantined)  # fmt: skip
    store.put_many([mine, theirs])
    out = evaluate_changes(store, peanut_case("u-1", ns), GatePolicy(), deletions=["m-b"],
                           owners={"m-b": "u-2"})  # fmt: skip
    assert out["before"]["failed_cases"] == ["peanuts"]  # u-1 never had the fact
    assert out["blocked"] is False and out["regressed_cases"] == [], out


def test_a_quarantined_record_of_another_namespace_is_not_in_a_scoped_cases_view(
    store: SqliteStore,
) -> None:
    """ShadowRecall._load's ``r.namespace == namespace``: a case scoped to the actor's
    hobbies must not see the quarantined record of its health namespace in "before" (its
    deletion staged); seen there, the case regresses and the deletion is held for a
    namespace the case does not read."""
    hobbies = "/users/u-1/hobbies"
    store.put_many([rec("m-a", "hobbies", HIKING),
                    at(rec("m-b", "health", PEANUTS), status=Status.quarantined)])  # fmt: skip
    out = evaluate_changes(store, peanut_case("u-1", hobbies), GatePolicy(), deletions=["m-b"],
                           owners={"m-b": "u-1"})  # fmt: skip
    assert out["before"]["failed_cases"] == ["peanuts"]
    assert out["blocked"] is False and out["regressed_cases"] == [], out


def test_only_a_quarantined_deletion_candidate_counts_as_present_before(
    store: SqliteStore,
) -> None:
    """ShadowRecall._load's ``r.status is Status.quarantined``: quarantine is a pause, so a
    quarantined candidate counts in "before"; a superseded record whose retention ended
    (its deletion staged) was not in recall before and must not be put back into it.
    Counted, the case passes before, fails after, and the deletion is held night after
    night for a fact recall never returned."""
    store.put_many([rec("m-a", "notes", HIKING),
                    at(rec("m-b", "notes", PEANUTS), status=Status.superseded)])  # fmt: skip
    out = evaluate_changes(store, peanut_case("u-1", "/users/u-1/notes"), GatePolicy(),
                           deletions=["m-b"], owners={"m-b": "u-1"})  # fmt: skip
    assert out["before"]["failed_cases"] == ["peanuts"]
    assert out["blocked"] is False and out["regressed_cases"] == [], out


# -- one case's recall ----------------------------------------------------------------------------


def test_a_cases_own_cosine_floor_is_the_one_its_recall_uses(store: SqliteStore) -> None:
    """ShadowRecall.recall's ``threshold`` (``DEFAULT_THRESHOLD`` only when the case names
    none): an ``erased`` case watches its whole namespace (``threshold: -1``, as
    ``eval init`` writes it), so an erased record that came back must be caught whatever
    the query. With the default floor the unrelated query finds nothing and the case
    passes while checking nothing."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex.")])
    case = {"id": "erased-dog", "kind": "erased", "query": "What is the weather on Mars?",
            "actor_id": "u-1", "namespace": "/users/u-1/facts", "forbidden": ["m-dog"],
            "k": 100}  # fmt: skip
    assert evaluate(store, parse_cases([case]))["failed_cases"] == []  # below the default floor
    report = evaluate(store, parse_cases([{**case, "threshold": -1.0}]))
    assert report["failed_cases"] == ["erased-dog"]
    assert report["results"][0]["forbidden_hits"] == ["m-dog"]


# -- the evaluation set's format ------------------------------------------------------------------

BASE: dict[str, Any] = {"id": "c-1", "query": "Is the user allergic to any food?",
                        "actor_id": "u-1", "must_retrieve": ["m-1"]}  # fmt: skip
BAD_FIELDS = {
    # a blank text target is in every content: the case would pass while checking nothing
    "blank-fact": ({"must_retrieve": [{"fact": " ... "}]}, "must_retrieve"),
    # an id target with text beside it: which one is checked?
    "id-and-fact": ({"must_retrieve": [{"id": "m-1", "fact": "peanuts"}]}, "must_retrieve"),
    "fact-and-claim": ({"forbidden": [{"fact": "peanuts", "claim": "satay"}]}, "forbidden"),
    "empty-id": ({"id": ""}, "id"),
    "empty-query": ({"query": ""}, "query"),
    "empty-actor": ({"actor_id": ""}, "actor_id"),
    "min-result-above-1": ({"min_result": 1.5}, "min_result"),  # a case that never passes
    "min-result-below-0": ({"min_result": -0.5}, "min_result"),
    "k-0": ({"k": 0}, "k"),
    "k-above-100": ({"k": 101}, "k"),
    "threshold-above-1": ({"threshold": 1.5}, "threshold"),  # recall returns nothing ever
    "threshold-below-minus-1": ({"threshold": -1.5}, "threshold"),
}


@pytest.mark.parametrize("variant", sorted(BAD_FIELDS))
def test_a_bad_field_is_refused_naming_the_case_and_field(variant: str) -> None:
    """EvalCase's field bounds and Target's checks (``min_length``, ``ge``/``le``, one of id or
    text, text not blank): each refused value is an EvalSetError naming the case and the
    field. Loosened, the value loads and the case checks nothing, never passes, or recalls
    outside its bounds. Mutants: each bound dropped; ``set(value) == {"id"}`` to
    ``"id" in value``; ``len(value) == 1`` dropped; the blank-text check dropped."""
    change, field = BAD_FIELDS[variant]
    cid = change.get("id", BASE["id"]) or "1"
    with pytest.raises(EvalSetError, match=rf"case {cid}: {re.escape(field)}\b"):
        parse_cases([{**BASE, **change}])


def test_an_unknown_key_is_named_by_its_place_never_its_text() -> None:
    """_part's field-name check: a key the case format does not know (a value pasted where a
    key goes) may be memory content; the error says ``<key>``, never the key's text. Every
    location step named as it is echoes the content into logs and Prefect's state."""
    with pytest.raises(EvalSetError, match=r"case c-1: <key>: ") as err:
        parse_cases([{**BASE, "is allergic to peanuts": True}])
    assert "peanuts" not in str(err.value)
    with pytest.raises(EvalSetError, match=r"case c-1: must_retrieve: ") as err:
        parse_cases([{**BASE, "must_retrieve": [{"is allergic to peanuts": "x"}]}])
    assert "peanuts" not in str(err.value)


def test_a_target_is_an_id_or_a_text_never_both() -> None:
    """Target._one's ``(id is None) == (text is None)``: both given is refused (the file
    route is refused earlier by _target; the model is public)."""
    with pytest.raises(ValidationError, match="not both or neither"):
        Target(id="m-1", text="peanuts")
    with pytest.raises(ValidationError, match="not both or neither"):
        Target()


def test_a_single_target_or_none_is_read_as_a_list() -> None:
    """EvalCase._targets: a bare ``must_retrieve: m-1`` is one id (not the ids "m", "-",
    "1"), and ``forbidden:`` left empty in YAML (None) is no target."""
    (case,) = parse_cases([{**BASE, "must_retrieve": "m-1", "forbidden": None}])
    assert case.must_retrieve == [Target(id="m-1")] and case.forbidden == []


def test_jsonl_sets_read_ndjson_and_blank_lines_and_name_the_bad_line(tmp_path: Path) -> None:
    """load_cases' ``suffix in (".jsonl", ".ndjson")``, its ``if line.strip()`` and the line
    number in a malformed line's error: ``.ndjson`` is JSONL (read as YAML it fails on the
    second document), a blank line is no case, and a bad line is named by its number."""
    two = [BASE, {**BASE, "id": "c-2"}]
    p = tmp_path / "cases.ndjson"
    p.write_text(json.dumps(two[0]) + "\n\n   \n" + json.dumps(two[1]) + "\n")
    assert [c.id for c in load_cases(p)] == ["c-1", "c-2"]
    p.write_text(json.dumps(two[0]) + "\n{not json\n")
    with pytest.raises(EvalSetError, match=r"line 2: malformed JSON"):
        load_cases(p)


def test_an_empty_jsonl_set_is_refused(tmp_path: Path) -> None:
    """load_cases' ``_some`` on the JSONL route: a file of blank lines is no set (it would
    satisfy a required gate while checking nothing)."""
    p = tmp_path / "cases.jsonl"
    p.write_text("\n  \n")
    with pytest.raises(EvalSetError, match="no cases"):
        load_cases(p)


def test_a_yaml_set_that_is_no_list_says_so(tmp_path: Path) -> None:
    """load_cases' ``isinstance(data, list)``: a mapping under ``cases:`` (one case, not
    indented as a list) is refused with what the format expects, not taken apart."""
    p = tmp_path / "cases.yaml"
    p.write_text(yaml.safe_dump({"cases": BASE}))
    with pytest.raises(EvalSetError, match="expected a list of cases"):
        load_cases(p)


def test_a_yaml_error_names_its_line_and_column(tmp_path: Path) -> None:
    """_where's ``mark.line + 1``: PyYAML counts from 0; the message names the line an
    editor shows (the snippet, which may be content, is left out)."""
    p = tmp_path / "cases.yaml"
    p.write_text("cases:\n  - id: a\n    query: [unclosed\n")
    with pytest.raises(EvalSetError, match=r"\(line 4, column 1\)"):
        load_cases(p)


@pytest.mark.parametrize("suffix", [".yaml", ".jsonl", ".ndjson"])
def test_a_dumped_set_loads_back_the_same_cases(tmp_path: Path, suffix: str) -> None:
    """dump's ``namespace`` and ``threshold`` and dump_cases' JSONL suffixes: ``eval init``
    writes its erased cases with a namespace and ``threshold: -1``; dropped on the way to
    the file, the case would recall over every namespace above the default floor."""
    case = {**BASE, "kind": "erased", "namespace": "/users/u-1/facts", "forbidden": ["m-2"],
            "threshold": -1.0, "k": 100, "impact": "high", "min_result": 0.5}  # fmt: skip
    cases = parse_cases([case])
    assert load_cases(dump_cases(cases, tmp_path / f"set{suffix}")) == cases


@pytest.mark.parametrize(
    "change",
    [
        {"threshold": 0.5},
        {"namespace": "/users/u-1/x"},
        {"impact": "high"},
        {"min_result": 0.5},
        {"forbidden": ["m-9"]},
    ],  # fmt: skip
)
def test_the_digest_moves_with_every_field_of_a_case(change: dict[str, Any]) -> None:
    """cases_digest over every parsed field: the consolidation memo keys a gate-blocked group
    by it, and a changed set must re-open the group."""
    assert cases_digest(parse_cases([{**BASE, **change}])) != cases_digest(parse_cases([BASE]))


# -- which staged group blocks --------------------------------------------------------------------


def test_a_group_tried_alone_is_judged_without_the_other_groups_replacements(
    store: SqliteStore,
) -> None:
    """ShadowRecall.corpus's ``r.id not in exclude`` on the staged replacements: a group is
    tried alone on a view that leaves the other groups' replacements out. Left in, the
    guilty replacement (it brings back a claim the case forbids) makes the innocent group
    look guilty too, the re-run without them still blocks, and no group is named: every
    group of the run is held back instead of the one at fault."""
    store.put_many([rec("m-a1", "prefs", "Drinks black coffee every morning.", subject="drink"),
                    rec("m-b1", "prefs", "Has a dog named Rex.", subject="pet")])  # fmt: skip
    guilty = rec("rA", "prefs", "Drinks black coffee every morning and only green tea at night.",
                 subject="drink")  # fmt: skip
    innocent = rec("rB", "prefs", "Has a dog called Rex.", subject="pet")
    cases = parse_cases([{"id": "no-tea", "query": "What does the user drink?", "actor_id": "u-1",
                          "forbidden": [{"claim": "green tea"}], "k": 5}])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), superseded=["m-a1", "m-b1"],
                           replacements=[guilty, innocent],
                           groups=[("rA", ["m-a1"]), ("rB", ["m-b1"])])  # fmt: skip
    assert out["supersedes_blocked"] is True and out["regressed_cases"] == ["no-tea"], out
    assert out["blocking_groups"] == ["rA"]


# -- competing versions of a fact (contradiction_rate) --------------------------------------------


def test_two_episodes_on_one_subject_are_not_competing_versions(store: SqliteStore) -> None:
    """_competing's ``memory_type is MemoryType.episodic`` skip: two events of one trip are
    history, not two versions of a fact; counted, every case over a trip's episodes fails
    the contradiction gate (max 0) and a run touching them is held for it."""
    store.put_many([
        rec("m-e1", "episodes", "Planned a trip to Osaka in May.", subject="trip",
            mtype=MemoryType.episodic),
        rec("m-e2", "episodes", "Booked a hotel for the Osaka trip.", subject="trip",
            mtype=MemoryType.episodic),
    ])  # fmt: skip
    cases = parse_cases([{"id": "osaka", "query": "What happened regarding the Osaka trip?",
                          "actor_id": "u-1", "must_retrieve": ["m-e1", "m-e2"]}])  # fmt: skip
    report = evaluate(store, cases)
    assert report["results"][0]["must_hits"] == 2
    assert report["results"][0]["contradiction"] is False
    assert report["gates"]["contradiction_rate"]["value"] == 0.0


def test_one_subject_in_two_namespaces_is_not_competing_versions(store: SqliteStore) -> None:
    """_competing's key ``(r.namespace, subject)``: the same subject word in two namespaces
    (the user's diet and the user's dog's diet) is two facts; keyed by subject alone, a
    case recalling over the actor's namespaces counts a contradiction."""
    store.put_many([
        rec("m-me", "facts", "Eats a vegetarian diet.", subject="diet"),
        rec("m-pet", "pets", "The dog eats grain-free kibble.", subject="diet"),
    ])  # fmt: skip
    cases = parse_cases([{"id": "diets", "query": "What diet is followed?", "actor_id": "u-1",
                          "must_retrieve": ["m-me", "m-pet"]}])  # fmt: skip
    report = evaluate(store, cases)
    assert report["results"][0]["must_hits"] == 2
    assert report["results"][0]["contradiction"] is False
    assert report["gates"]["contradiction_rate"]["value"] == 0.0


# -- figures and the verdict ----------------------------------------------------------------------


def gate_policy(**kw: Any) -> Policy:
    base = load_policy()
    return base.model_copy(update={"gate": base.gate.model_copy(update=kw)})


def test_an_aggregate_score_exactly_at_its_minimum_passes(store: SqliteStore) -> None:
    """run_set's ``a_value >= gate.aggregate_score_min`` (docs/evaluation.md: "value >=
    aggregate_score_min"): a set scoring exactly the minimum passes that gate."""
    store.put_many([rec("m-a", "facts", PEANUTS, subject="allergy")])
    cases = parse_cases([{"id": "half", "query": "Is the user allergic to any food?",
                          "actor_id": "u-1", "must_retrieve": [{"fact": "peanuts"},
                          {"fact": "shellfish"}], "min_result": 0.5}])  # fmt: skip
    report = evaluate(store, cases, policy=gate_policy(aggregate_score_min=0.5))
    g = report["gates"]["aggregate_score"]
    assert (g["value"], g["passed"]) == (0.5, True) and report["blocked"] is False, report


def test_a_forbidden_share_exactly_at_its_maximum_passes(store: SqliteStore) -> None:
    """run_set's ``f_value <= gate.forbidden_retrieval_max`` (docs: "value <=
    forbidden_retrieval_max"): one of two forbidden ids surfacing is a share of 0.5, which
    a maximum of 0.5 allows."""
    store.put_many([rec("m-tea", "preferences", "Drinks only green tea.", subject="drink")])
    cases = parse_cases([{"id": "no-tea", "query": "What does the user drink?",
                          "actor_id": "u-1", "forbidden": ["m-tea", "m-old"]}])  # fmt: skip
    report = evaluate(store, cases, policy=gate_policy(forbidden_retrieval_max=0.5))
    g = report["gates"]["forbidden_retrieval"]
    assert (g["value"], g["passed"]) == (0.5, True), report["gates"]


def test_a_contradiction_rate_exactly_at_its_maximum_passes(store: SqliteStore) -> None:
    """run_set's ``c_value <= gate.contradiction_rate_max``: one case of two hands over two
    versions of the user's drink (rate 0.5); a maximum of 0.5 allows it."""
    store.put_many([
        rec("m-tea", "preferences", "Drinks only green tea.", subject="drink", age=300),
        rec("m-coffee", "preferences", "Switched to black coffee.", subject="drink", age=20),
        rec("m-dog", "facts", "Has a dog named Rex.", subject="pet"),
    ])  # fmt: skip
    cases = parse_cases([
        {"id": "drink", "query": "What does the user drink?", "actor_id": "u-1",
         "namespace": "/users/u-1/preferences", "must_retrieve": ["m-coffee"]},
        {"id": "dog", "query": "What is the dog called?", "actor_id": "u-1",
         "namespace": "/users/u-1/facts", "must_retrieve": ["m-dog"]},
    ])  # fmt: skip
    report = evaluate(store, cases, policy=gate_policy(contradiction_rate_max=0.5))
    g = report["gates"]["contradiction_rate"]
    assert (g["value"], g["passed"]) == (0.5, True), report["gates"]


def test_a_must_retain_share_exactly_at_its_minimum_passes(store: SqliteStore) -> None:
    """run_set's ``must_value >= gate.must_retain_recall_min``: one of two must-retrieve
    cases meeting its min_result is a share of 0.5, which a minimum of 0.5 allows."""
    store.put_many([rec("m-a", "facts", PEANUTS, subject="allergy")])
    cases = parse_cases([
        {"id": "ok", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "peanuts"}]},
        {"id": "no", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "shellfish"}]},
    ])  # fmt: skip
    report = evaluate(store, cases, policy=gate_policy(must_retain_recall_min=0.5))
    g = report["gates"]["must_retain_recall"]
    assert (g["value"], g["passed"]) == (0.5, True), report["gates"]


def test_a_high_impact_case_counts_twice_in_the_aggregate_score(store: SqliteStore) -> None:
    """run_set's weights (high impact 2.0): a passing high-impact case (score 1) and a
    failing normal one (score 0) average 2/3, not 1/2."""
    store.put_many([rec("m-a", "facts", PEANUTS, subject="allergy")])
    cases = parse_cases([
        {"id": "high", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "peanuts"}], "impact": "high"},
        {"id": "normal", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "shellfish"}]},
    ])  # fmt: skip
    report = evaluate(store, cases)
    assert report["failed_cases"] == ["normal"]
    assert report["gates"]["aggregate_score"]["value"] == round(2 / 3, 6)


def test_a_failing_high_impact_case_blocks_an_on_demand_evaluation_whose_gates_pass(
    store: SqliteStore,
) -> None:
    """evaluate()'s ``bool(report["high_impact_failed"])``: thresholds loose enough that
    every gate passes, a failing high-impact case still blocks (``memlife eval`` exits 1)."""
    store.put_many([rec("m-a", "facts", PEANUTS, subject="allergy")])
    cases = parse_cases([
        {"id": "ok", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "peanuts"}]},
        {"id": "high", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "shellfish"}], "impact": "high"},
    ])  # fmt: skip
    report = evaluate(store, cases, policy=gate_policy(must_retain_recall_min=0.5,
                                                       aggregate_score_min=0.0))  # fmt: skip
    assert all(g["passed"] for g in report["gates"].values()), report["gates"]
    assert report["high_impact_failed"] == ["high"] and report["blocked"] is True


def test_a_case_that_already_failed_and_fails_worse_blocks(store: SqliteStore) -> None:
    """_regressed's ``after["score"] < before["score"]``: a case missing one of its two
    facts before (fails, score 0.5) that the run's deletion leaves with none (score 0) is
    regressed; no gate figure moves below its default threshold, so only the case blocks."""
    store.put_many([rec("m-a", "facts", PEANUTS, subject="allergy"),
                    rec("m-b", "facts", HIKING, subject="hobby")])  # fmt: skip
    cases = parse_cases([{"id": "both", "query": "Is the user allergic to any food?",
                          "actor_id": "u-1", "must_retrieve": [{"fact": "peanuts"},
                          {"fact": "shellfish"}]}])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), deletions=["m-a"], owners={"m-a": "u-1"})
    assert out["before"]["failed_cases"] == ["both"]
    assert out["regressed_cases"] == ["both"] and "CASE_REGRESSED" in out["reasons"]
    assert out["blocked"] is True and out["deletions_blocked"] is True


# -- cases that check nothing (coverage) ----------------------------------------------------------


def test_an_id_of_another_namespace_of_the_actor_checks_nothing_in_a_scoped_case(
    store: SqliteStore,
) -> None:
    """coverage's ``c.namespace not in (None, r.namespace)``: a case scoped to the actor's
    preferences that must retrieve a record of its facts can never find it (recall reads
    one namespace): TARGET_ABSENT, its scope withheld; evaluated, it only warns nightly."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex.", subject="pet"),
                    rec("m-tea", "preferences", "Drinks green tea.", subject="drink")])  # fmt: skip
    cases = parse_cases([{"id": "dog", "query": "What is the dog called?", "actor_id": "u-1",
                          "namespace": "/users/u-1/preferences", "must_retrieve": ["m-dog"]}])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), deletions=["m-tea"],
                           owners={"m-tea": "u-1"})  # fmt: skip
    assert [(u["case"], u["code"], u["namespace"]) for u in out["uncovered_cases"]] == [
        ("dog", "TARGET_ABSENT", "/users/u-1/preferences")
    ]
    assert out["cases"] == 0


def test_an_erased_case_over_a_namespace_its_erasure_emptied_is_still_checked(
    store: SqliteStore,
) -> None:
    """coverage's ``c.kind is not CaseKind.erased``: an erasure can empty the namespace an
    ``erased`` case watches; that case still checks (nothing may come back) and must not
    be NO_RECORDS, which would withhold every judgement of its actor every night."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex.", subject="pet")])
    cases = parse_cases([{"id": "erased-health", "kind": "erased", "actor_id": "u-1",
                          "query": "What do we know about the user's health?",
                          "namespace": "/users/u-1/health", "forbidden": ["m-gone"],
                          "k": 100, "threshold": -1.0}])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), deletions=["m-dog"],
                           owners={"m-dog": "u-1"})  # fmt: skip
    assert out["uncovered_cases"] == [] and out["cases"] == 1 and out["blocked"] is False


def test_a_must_retrieve_id_the_actor_erased_is_a_failing_case_not_an_unchecked_one(
    home: Path,
) -> None:
    """_named_still's tombstone listing: a must-retrieve id the actor erased is no record
    any more, but the case still checks (it fails and warns: the erasure is the truth);
    taken for TARGET_ABSENT, the case is left out and its scope withheld every night."""
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([rec("m-dog", "facts", "Has a dog named Rex.", subject="pet"),
                        rec("m-cat", "facts", "Has a cat named Tom.", subject="cat")])  # fmt: skip
        assert erase(store, "u-1", ids=["m-dog"], now=NOW)["erased"] == ["m-dog"]
        cases = parse_cases([{"id": "dog", "query": "What is the dog called?",
                              "actor_id": "u-1", "must_retrieve": ["m-dog"]}])  # fmt: skip
        out = evaluate_changes(store, cases, GatePolicy())
    finally:
        store.close()
    assert out["uncovered_cases"] == [] and out["failed_cases"] == ["dog"]
    assert out["blocked"] is False and out["status"] == "warn"


# -- a model's answer (faked at the Messages API's HTTP boundary) ---------------------------------


@pytest.fixture()
def model(monkeypatch: pytest.MonkeyPatch, messages_server: Any) -> Any:
    """The gate's real answerer (the anthropic SDK) pointed at the local Messages API fake."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    return messages_server


DOG_CASE: dict[str, Any] = {"id": "pet", "query": "What is the dog called?", "actor_id": "u-1",
                            "must_retrieve": [{"fact": "dog named rex"}], "k": 2}  # fmt: skip


def test_an_answer_must_include_every_listed_phrase(store: SqliteStore, model: Any) -> None:
    """run_case's ``all(... for s in case.answer_must_include)``: an answer with one of two
    required phrases fails the case (with ``any`` it passes)."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex, a terrier.", subject="pet")])
    model.enqueue(text_reply("The dog is called Rex."))
    cases = parse_cases([{**DOG_CASE, "answer_must_include": ["Rex", "terrier"]}])
    report = evaluate(store, cases, answerer=model_answerer_from_env())
    assert report["results"][0]["answer"] == {"checked": True, "passed": False}
    assert report["failed_cases"] == ["pet"] and len(model.message_requests) == 1


def test_a_case_without_answer_checks_costs_no_model_call(store: SqliteStore, model: Any) -> None:
    """run_case's ``case.answer_must_include or case.answer_must_not_include``: with a model
    configured, a case that checks no answer is not sent to it (a paid call per case and
    replica, every night, for nothing)."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex.", subject="pet")])
    report = evaluate(store, parse_cases([DOG_CASE]), answerer=model_answerer_from_env())
    assert report["failed_cases"] == [] and "answer" not in report["results"][0]
    assert model.message_requests == []


def test_a_case_whose_answer_varied_before_the_run_is_listed_flaky(
    store: SqliteStore, model: Any
) -> None:
    """verdict's ``flaky_cases`` from both views: replicas answered differently in the
    "before" run (the "after" run's answers agree); the receipt must still say the case
    is flaky, since its verdict rests on the worst of varying answers. The deletion changes
    what the case retrieves (an unchanged retrieval keeps its answer: audit 51iii)."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex.", subject="pet"),
                    rec("m-walk", "hobbies", "Walks the dog in the park.", subject="hobby")])  # fmt: skip
    model.enqueue(*(text_reply(t) for t in ["Rex.", "Luna.", "Rex.", "Rex."]))
    cases = parse_cases([{**DOG_CASE, "answer_must_include": ["Rex"]}])
    out = evaluate_changes(store, cases, GatePolicy(replicas=2), deletions=["m-walk"],
                           owners={"m-walk": "u-1"}, answerer=model_answerer_from_env())  # fmt: skip
    assert out["before"]["failed_cases"] == ["pet"] and out["after"]["failed_cases"] == []
    assert len(model.message_requests) == 4 and out["before"]["failed_cases"] == ["pet"]
    assert out["flaky_cases"] == ["pet"] and out["blocked"] is False


def test_a_failed_answer_scores_the_case_zero(store: SqliteStore, model: Any) -> None:
    """run_case's ``0.0`` when a checked answer fails (docs: "0 when a checked answer
    fails"): the record is retrieved (recall 1), the model's answer names the wrong dog;
    the case scores 0 in the aggregate, not 1."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex.", subject="pet")])
    model.enqueue(text_reply("The dog is called Luna."))
    cases = parse_cases([{**DOG_CASE, "answer_must_not_include": ["Luna"]}])
    report = evaluate(store, cases, answerer=model_answerer_from_env())
    assert report["results"][0]["recall_at_k"] == 1.0 and report["results"][0]["score"] == 0.0
    assert report["gates"]["aggregate_score"]["value"] == 0.0


def test_a_forbidden_hit_lowers_the_cases_score_by_its_share(store: SqliteStore) -> None:
    """run_case's ``kept_out``: one of two forbidden ids retrieved halves the case's score
    (and the aggregate); counted as kept out, a stale fact that surfaces costs nothing
    in the aggregate_score gate."""
    store.put_many([rec("m-tea", "preferences", "Drinks only green tea.", subject="drink")])
    cases = parse_cases([{"id": "no-tea", "query": "What does the user drink?",
                          "actor_id": "u-1", "forbidden": ["m-tea", "m-old"]}])  # fmt: skip
    report = evaluate(store, cases)
    assert report["results"][0]["forbidden_hits"] == ["m-tea"]
    assert report["results"][0]["score"] == 0.5
    assert report["gates"]["aggregate_score"]["value"] == 0.5


# -- the starter set (eval init) ------------------------------------------------------------------

ROUTER = "To reset the router: unplug it, wait 30 seconds, plug it back in."
MODEM = "To reset the modem: hold its reset button for ten seconds."


def proc(rid: str, content: str, subject: str, actor: str = "u-1") -> MemoryRecord:
    return rec(rid, "procedures", content, subject=subject, mtype=MemoryType.procedural,
               source=Source.system_of_record, age=20, actor=actor)  # fmt: skip


def erasure_receipt(sink: FileSink, op: str, actor: str, rid: str, outcome: str = "erased") -> None:
    """An erasure's operation receipt as erase writes it (ids only)."""
    doc = {"action": "erase", "outcome": outcome, "record_id": rid,
           "scope": {"actor_id": actor, "namespace": f"/users/{actor}/facts"}}  # fmt: skip
    assert sink.put_new(f"operations/{op}.json", json.dumps(doc).encode())


def test_eval_init_keeps_at_most_per_kind_cases_of_a_kind_per_actor(store: SqliteStore) -> None:
    """starter_cases' ``counts[...] >= per_kind``: two procedures, ``per_kind=1``: one case."""
    store.put_many(
        [proc("m-router", ROUTER, "router_reset"), proc("m-modem", MODEM, "modem_reset")]
    )
    every = starter_cases(store, now=NOW)
    assert sorted(c.id for c in every if c.kind is CaseKind.procedure) == [
        "proc-u-1-m-modem", "proc-u-1-m-router"]  # fmt: skip
    one = starter_cases(store, now=NOW, per_kind=1)
    assert len([c for c in one if c.kind is CaseKind.procedure]) == 1


def test_eval_init_drops_a_case_whose_question_does_not_find_its_record(
    store: SqliteStore,
) -> None:
    """starter_cases' validation (``run_case(...)["passed"]``): a procedure filed under a
    subject its text does not speak of gets a question that does not find it; kept, the
    case fails on the store as it is and can never catch a regression (it only warns)."""
    store.put_many([proc("m-router", ROUTER, "router_reset"),
                    proc("m-odd", MODEM, "quarterly_tax_filing")])  # fmt: skip
    ids = [c.id for c in starter_cases(store, now=NOW)]
    assert "proc-u-1-m-router" in ids and "proc-u-1-m-odd" not in ids


def test_eval_init_takes_only_superseded_records_for_stale_cases(store: SqliteStore) -> None:
    """starter_cases' ``r.status is Status.superseded``: a quarantined record is paused, not
    a stale version; a case forbidding it would fail the night it is restored."""
    store.put_many([rec("m-tea", "preferences", "Drinks green tea.", subject="beverage"),
                    at(rec("m-q", "preferences", "Drinks oat milk lattes.", subject="milk"),
                       status=Status.quarantined)])  # fmt: skip
    assert not [c.id for c in starter_cases(store, now=NOW) if "m-q" in c.id]


def test_eval_init_pins_no_preference_case_on_an_episode(store: SqliteStore) -> None:
    """starter_cases' ``memory_type is MemoryType.semantic`` for the newest preferences: an
    episode filed in a preferences namespace is an event, not the user's current
    preference; a recent_preference case must not require it."""
    store.put_many([rec("m-tea", "preferences", "Drinks green tea.", subject="beverage"),
                    rec("m-ep", "preferences", "Tried a matcha latte at the airport.",
                        subject="beverage", mtype=MemoryType.episodic, age=3)])  # fmt: skip
    cases = starter_cases(store, now=NOW)
    prefs = [t.id for c in cases if c.kind is CaseKind.recent_preference for t in c.must_retrieve]
    assert "m-tea" in prefs and "m-ep" not in prefs


def test_eval_init_asks_for_a_procedures_steps() -> None:
    """question_for's procedural template (docs/evaluation.md: "What are the steps for
    router reset?")."""
    assert question_for(proc("m-router", ROUTER, "router_reset")) == (
        "What are the steps for router reset?"
    )


def test_erased_cases_come_from_completed_erasures_of_the_chosen_actors(tmp_path: Path) -> None:
    """erasure_cases' filters: a failed erasure erased nothing (its record may be live; a
    case forbidding it fails every night), and ``actors`` keeps to the chosen actors. Each
    case recalls over the whole namespace (k 100, any similarity)."""
    sink = FileSink(tmp_path / "receipts")
    erasure_receipt(sink, "op-1", "u-1", "m-1")
    erasure_receipt(sink, "op-2", "u-1", "m-2", outcome="failed")
    erasure_receipt(sink, "op-3", "u-2", "m-3")
    cases = erasure_cases(sink, ["u-1"])
    assert [(c.id, [t.id for t in c.forbidden]) for c in cases] == [("erased-u-1-m-1", ["m-1"])]
    assert (cases[0].k, cases[0].threshold, cases[0].namespace) == (100, -1.0, "/users/u-1/facts")
    assert sorted(c.actor_id for c in erasure_cases(sink)) == ["u-1", "u-2"]


def test_eval_init_by_count_takes_every_erased_actor(store: SqliteStore, tmp_path: Path) -> None:
    """starter_cases' ``list(actor_ids) or None``: by ``--actors N`` (no ids named), the
    erased cases of every actor are written (docs: "every erased actor by default"), not
    only the first N actors' ones."""
    store.put_many([proc("m-router", ROUTER, "router_reset"),
                    proc("m-modem", MODEM, "modem_reset", actor="u-2")])  # fmt: skip
    sink = FileSink(tmp_path / "receipts")
    erasure_receipt(sink, "op-1", "u-2", "m-gone")
    cases = starter_cases(store, now=NOW, actors=1, sink=sink)
    assert {c.actor_id for c in cases if c.kind is not CaseKind.erased} == {"u-1"}
    assert [c.id for c in cases if c.kind is CaseKind.erased] == ["erased-u-2-m-gone"]


# -- which actors' deletions are held (blocking_actors, blocking_groups) ---------------------------


def test_only_the_actor_whose_failing_case_fails_worse_has_its_deletions_held(
    store: SqliteStore,
) -> None:
    """_worse_case's ``after["score"] < before["score"]`` (blocking_actors): u-1's case
    failed before (one fact of two) and the run's deletion leaves it none; u-1 is named,
    so u-2's harmless deletion goes ahead. Without the score clause no actor is named and
    every tenant's deletions are held for one tenant's case."""
    store.put_many([rec("m-a", "facts", PEANUTS, subject="allergy"),
                    rec("m-b", "facts", HIKING, subject="hobby"),
                    rec("m-c", "facts", "Has a cat named Tom.", subject="cat", actor="u-2"),
                    rec("m-d", "facts", "Has a dog named Rex.", subject="pet", actor="u-2")])  # fmt: skip
    cases = parse_cases([
        {"id": "both", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "peanuts"}, {"fact": "shellfish"}]},
        {"id": "dog", "query": "What is the dog called?", "actor_id": "u-2",
         "must_retrieve": ["m-d"]},
    ])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), deletions=["m-a", "m-c"],
                           owners={"m-a": "u-1", "m-c": "u-2"})  # fmt: skip
    assert out["regressed_cases"] == ["both"] and out["deletions_blocked"] is True
    assert out["blocking_actors"] == ["u-1"]


def test_deletions_are_narrowed_on_the_view_where_the_deletions_alone_block(
    store: SqliteStore,
) -> None:
    """evaluate_changes' ``blamed = dels_only if only_dels else after``: the deletions and
    the supersedes each block alone (u-1's deletion loses its allergy, u-2's staged
    replacement brings back a claim u-2's case forbids). The actors whose deletions are held
    are read from the deletions-only view: u-1. Read from the view with both, u-2 (hurt by
    its supersede, held anyway) is named too and its harmless deletion is held. Also
    ``sups_kept``: the re-run that confirms the narrowing leaves the held supersedes undone
    (u-2's coffee stays in its original); taken as done without their replacements, the
    coffee case fails there, the narrowing is refused and every deletion is held."""
    tea = rec("rA", "prefs", "Drinks black coffee every morning and only green tea at night.",
              subject="drink", actor="u-2")  # fmt: skip
    store.put_many([
        rec("m-pa", "facts", PEANUTS, subject="allergy"),
        rec("m-hk", "facts", HIKING, subject="hobby"),
        rec("m-co", "prefs", "Drinks black coffee every morning.", subject="drink", actor="u-2"),
        rec("m-cat", "facts", "Has a cat named Tom.", subject="cat", actor="u-2"),
        rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", actor="u-2"),
    ])  # fmt: skip
    cases = parse_cases([
        {"id": "allergy", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "peanuts"}]},
        {"id": "no-tea", "query": "What does the user drink?", "actor_id": "u-2",
         "namespace": "/users/u-2/prefs", "forbidden": [{"claim": "green tea"}]},
        {"id": "coffee", "query": "What does the user drink?", "actor_id": "u-2",
         "namespace": "/users/u-2/prefs", "must_retrieve": [{"fact": "black coffee"}]},
    ])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), deletions=["m-pa", "m-cat"],
                           superseded=["m-co"], replacements=[tea], groups=[("rA", ["m-co"])],
                           owners={"m-pa": "u-1", "m-cat": "u-2"})  # fmt: skip
    assert out["deletions_blocked"] is True and out["supersedes_blocked"] is True, out
    assert out["blocking_actors"] == ["u-1"] and out["blocking_groups"] == ["rA"]


def test_no_actor_is_named_when_the_gate_without_its_deletions_still_blocks(
    store: SqliteStore,
) -> None:
    """evaluate_changes' re-run ``without(actors)`` before it trusts blocking_actors: u-1's
    deletion makes its case worse, but u-2's high-impact case fails whatever the run does;
    with u-1's deletions held the gate still blocks, so the narrowing is not trusted and
    every deletion is held. Trusted without the re-run, u-2's deletion goes ahead on a
    blocked verdict."""
    store.put_many([
        rec("m-pa", "facts", PEANUTS, subject="allergy"),
        rec("m-hk", "facts", HIKING, subject="hobby"),
        rec("m-cat", "facts", "Has a cat named Tom.", subject="cat", actor="u-2"),
        rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", actor="u-2"),
    ])  # fmt: skip
    cases = parse_cases([
        {"id": "allergy", "query": "Is the user allergic to any food?", "actor_id": "u-1",
         "must_retrieve": [{"fact": "peanuts"}]},
        {"id": "u2-high", "query": "Is the user allergic to any food?", "actor_id": "u-2",
         "must_retrieve": [{"fact": "shellfish"}], "impact": "high"},
    ])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), deletions=["m-pa", "m-cat"],
                           owners={"m-pa": "u-1", "m-cat": "u-2"})  # fmt: skip
    assert out["before"]["high_impact_failed"] == ["u2-high"]
    assert out["regressed_cases"] == ["allergy"] and out["deletions_blocked"] is True
    assert "blocking_actors" not in out


def test_an_actor_whose_case_starts_contradicting_has_its_deletions_held_alone(
    store: SqliteStore,
) -> None:
    """_worse_case's ``after["contradiction"] and not before["contradiction"]``: u-1's
    deletion lets a competing version of its drink into the case's top 2 (the case still
    passes; the contradiction gate regresses). u-1 is named and u-2's harmless deletion goes
    ahead; without the clause no actor is named and every tenant's deletions are held."""
    store.put_many([
        rec("m-x", "prefs", "Drinks black coffee every morning.", subject="drink"),
        rec("m-y", "prefs", "The user drinks coffee with oat milk every morning."),
        rec("m-z", "prefs", "Drinks green tea in the evening.", subject="drink"),
        rec("m-cat", "facts", "Has a cat named Tom.", subject="cat", actor="u-2"),
        rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", actor="u-2"),
    ])  # fmt: skip
    cases = parse_cases([
        {"id": "drink", "query": "What does the user drink every morning?", "actor_id": "u-1",
         "namespace": "/users/u-1/prefs", "must_retrieve": [{"fact": "black coffee"}], "k": 2},
        {"id": "dog", "query": "What is the dog called?", "actor_id": "u-2",
         "must_retrieve": ["m-dog"]},
    ])  # fmt: skip
    out = evaluate_changes(store, cases, GatePolicy(), deletions=["m-y", "m-cat"],
                           owners={"m-y": "u-1", "m-cat": "u-2"})  # fmt: skip
    assert out["reasons"] == ["GATE_REGRESSED:contradiction_rate"] and out["failed_cases"] == []
    assert out["blocking_actors"] == ["u-1"]


@pytest.mark.parametrize("scoped", [False, True], ids=["other-actor", "other-namespace"])
def test_an_innocent_group_is_never_named_with_groups_that_block_only_together(
    store: SqliteStore, scoped: bool
) -> None:
    """blocking_groups' ``in_scope``: u-1's two groups each drop one of two records holding
    the allergy and block only together, so every suspect is named. A group of u-2
    (``c.actor_id == actor``: recall is scoped to the actor; the case reads every namespace
    of u-1) and, for a case scoped to u-1's facts, u-1's group in its notes
    (``c.namespace in (None, ns)``) are no suspects. Counted as suspects, these innocent
    groups are named and held with them (tenants or namespaces mixed)."""
    store.put_many([
        rec("m-1", "facts", "Is allergic to peanuts.", subject="allergy"),
        rec("m-2", "facts", "Carries an epipen because of peanuts.", subject="epipen"),
        rec("m-x", "facts", "Has a dog named Rex.", subject="pet", actor="u-2"),
        rec("m-n", "notes", HIKING, subject="hobby"),
    ])  # fmt: skip
    staged = [rec("rA", "facts", "Is allergic to nuts.", subject="allergy"),
              rec("rB", "facts", "Carries an epipen.", subject="epipen"),
              rec("rX", "facts", "Has a dog called Rex.", subject="pet", actor="u-2"),
              rec("rN", "notes", "Likes hiking in the Alps.", subject="hobby")]  # fmt: skip
    scope = {"namespace": "/users/u-1/facts"} if scoped else {}
    cases = parse_cases([{"id": "allergy", "query": "Is the user allergic to any food?",
                          "actor_id": "u-1", "must_retrieve": [{"fact": "peanuts"}], **scope}])  # fmt: skip
    groups = [("rA", ["m-1"]), ("rB", ["m-2"]), ("rX", ["m-x"])]
    if scoped:
        groups.append(("rN", ["m-n"]))
    out = evaluate_changes(store, cases, GatePolicy(),
                           superseded=[s for _, sups in groups for s in sups],
                           replacements=[r for r in staged if r.id in dict(groups)],
                           groups=groups)  # fmt: skip
    assert out["regressed_cases"] == ["allergy"] and out["supersedes_blocked"] is True
    assert out["blocking_groups"] == ["rA", "rB"]


# -- a real gap found by the audit ----------------------------------------------------------------


def test_a_blank_target_id_is_refused_naming_the_case_and_field(store: SqliteStore) -> None:
    """A real bug the audit found: Target's checks refused blank text (it would match every
    record) but not a blank id. A record id is never blank, so a blank id matches nothing:
    as the only forbidden target of a case, the case was evaluated, passed every night,
    and no one was told it checks nothing. A blank id is refused, naming case and field."""
    store.put_many([rec("m-dog", "facts", "Has a dog named Rex.", subject="pet")])
    case = {"id": "erased-dog", "kind": "erased", "query": "What is the dog called?",
            "actor_id": "u-1", "forbidden": [""]}  # fmt: skip
    with pytest.raises(EvalSetError, match=r"case erased-dog: forbidden\b"):
        parse_cases([case])
    with pytest.raises(EvalSetError, match=r"case erased-dog: forbidden\b"):
        parse_cases([{**case, "forbidden": [{"id": "  "}]}])
    checked = evaluate_changes(store, parse_cases([{**case, "forbidden": ["m-dog"]}]),
                               GatePolicy(), deletions=["m-dog"], owners={"m-dog": "u-1"})  # fmt: skip
    assert checked["failed_cases"] == []  # the same case naming a real id is judged
