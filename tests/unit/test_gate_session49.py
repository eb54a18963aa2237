"""Audit 49iii (session 49): the regression gate and its evaluation sets as a compliance
owner relies on them: what the receipt says was evaluated, what a case really checks, and
what a dry run's gate line promises of the apply run.

Real components: the SQLite store, the local engine, real MiniLM, the receipts folder, the
real Anthropic SDK against the local Messages API server (the network boundary).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memlife.pipeline import RunConfig, gate_line, run_local
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer
from tests.support.gate import ACTOR, ALLERGY_KEPT, FACTS, NOW, rec, ttl_policy, write_cases

DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)
# a high-impact case whose answer check holds only when a model answers "Rex"
DOG_CASE: dict[str, Any] = {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
                            "must_retrieve": ["m-dog"], "answer_must_include": ["Rex"],
                            "impact": "high"}  # fmt: skip


def _seed(home: Path, records: list[Any]) -> None:
    home.mkdir(exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    store.put_many(records)
    store.close()


def _receipt_gate(location: str | None) -> dict[str, Any]:
    assert location is not None
    return dict(json.loads(Path(location.removeprefix("file://")).read_text())["gate"])


@pytest.fixture()
def model_env(monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer) -> MessagesServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    return messages_server


# -- 1. answer checks the model never ran ------------------------------------------------------
def test_answer_checks_the_model_never_ran_are_named_in_the_receipt(
    home: Path, tmp_path: Path, model_env: MessagesServer
) -> None:
    """A key is set, so the gate checks the model's answers; the Messages API fails (an
    outage, a revoked key: here a 500). docs/evaluation.md: "a model error is reported on the
    case and does not decide it". The per-case results never reach the receipt, which said
    ``answers: "model"`` and ``status: pass``: the evidence claimed a check that never ran
    on a high-impact case. What was not checked must be named there (ids only), and the
    verdict not be a plain pass."""
    _seed(home, [DOG])
    cases = write_cases(tmp_path / "cases.yaml", [DOG_CASE])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    assert model_env.message_requests  # the gate did ask
    gate = _receipt_gate(summary.receipt)
    assert gate["answers_unchecked"] == ["dog"]
    assert gate["status"] == "warn" and not gate["blocked"]
    line = gate_line(summary.as_json()) or ""
    assert "answer check" in line and "not run" in line, line


def test_answers_the_model_gave_are_checked_and_the_receipt_lists_none_unchecked(
    home: Path, tmp_path: Path, model_env: MessagesServer
) -> None:
    """Control: the model answers; the check holds; the verdict passes, nothing unchecked."""
    model_env.set_handler(lambda body: "The dog is called Rex.")
    _seed(home, [DOG])
    cases = write_cases(tmp_path / "cases.yaml", [DOG_CASE])

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    gate = _receipt_gate(summary.receipt)
    assert gate["answers"] == "model" and gate["status"] == "pass"
    assert gate.get("answers_unchecked", []) == []


# -- 2. a forbidden id that is another tenant's record ----------------------------------------
# u-1's green tea said twice in an enforced namespace: a consolidation, a judgement the gate
# must see. u-2 has a record of its own.
TEA = [rec(f"m-tea-{i}", "preferences", "Drinks green tea every morning.", subject="beverage",
           age=age) for i, age in ((1, 60), (2, 30))]  # fmt: skip
U2_CAT = rec("m-u2-cat", "facts", "Has a cat named Tom.", subject="pet", actor="u-2")
U1_DIET = rec("m-diet", "facts", "Is vegetarian.", subject="diet", age=40)
QUERY = "What does the user drink?"


def _night(home: Path, tmp_path: Path, case: dict[str, Any]) -> Any:
    _seed(home, [*TEA, U2_CAT, U1_DIET])
    cases = write_cases(tmp_path / "cases.yaml", [case])
    return run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))


@pytest.mark.parametrize(
    "namespace, forbidden",
    [(None, "m-u2-cat"),  # another tenant's record: u-1's recall never returns it
     ("/users/u-1/preferences", "m-diet")],  # u-1's, but in a namespace the case does not read
)  # fmt: skip
def test_a_forbidden_id_the_case_can_never_retrieve_checks_nothing(
    home: Path, tmp_path: Path, namespace: str | None, forbidden: str
) -> None:
    """A case copied from another tenant (or with the wrong namespace) forbids a record its
    recall can never return: it passes whatever the run does. Session 24 made such a
    must-retrieve id (TARGET_ABSENT) withhold what its case would judge; a forbidden one
    still counted as covering, so a set of such cases let every consolidation go ahead
    "gated" while checking nothing."""
    case = {"id": "no-tea", "query": QUERY, "actor_id": ACTOR, "forbidden": [forbidden]}
    if namespace:
        case["namespace"] = namespace

    summary = _night(home, tmp_path, case)

    gate = summary.gate or {}
    assert [u["case"] for u in gate["uncovered_cases"]] == ["no-tea"]
    assert summary.lifecycle["superseded"] == 0  # the judgement waits (GATE_UNCOVERED)
    assert gate["uncovered"]["groups"]


@pytest.mark.parametrize("forbidden", ["m-gone", "m-tea-1"])
def test_a_forbidden_id_in_the_cases_scope_or_of_no_record_still_gates(
    home: Path, tmp_path: Path, forbidden: str
) -> None:
    """Controls: a forbidden id that is no record (an erasure watch) or one of the actor's own
    records in scope is a case that checks something: the consolidation is gated and goes
    ahead (the replacement is a new id)."""
    summary = _night(home, tmp_path, {"id": "no-tea", "query": QUERY, "actor_id": ACTOR,
                                      "forbidden": [forbidden]})  # fmt: skip

    assert (summary.gate or {})["uncovered_cases"] == []
    assert summary.lifecycle["superseded"] == 2


# -- 3. a dry run's gate line and the apply run's quarantine -----------------------------------
QUARANTINED = re.compile(r"(\d+) records? (?:would be )?quarantined")


def test_a_dry_runs_gate_line_says_what_the_apply_run_quarantines(
    home: Path, tmp_path: Path
) -> None:
    """A policy change shortens the semantic TTL: the deletions would take a high-impact
    allergy. The dry run's gate says "would block", and its line ended "0 records
    quarantined" (a dry run changes nothing), while the apply run at the same cutoff
    quarantined 3. The line must say what the apply run would quarantine."""
    _seed(home, FACTS)
    cases = write_cases(tmp_path / "cases.yaml", [ALLERGY_KEPT])
    policy = ttl_policy(tmp_path, 30)

    dry = run_local(RunConfig(dry_run=True, now=NOW, eval_cases=cases, policy=policy))
    dry_line = gate_line(dry.as_json()) or ""
    applied = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases, policy=policy))
    apply_line = gate_line(applied.as_json()) or ""

    assert applied.lifecycle["quarantined"] == 3
    said = QUARANTINED.search(dry_line)
    assert said is not None and int(said.group(1)) == 3, dry_line
    assert "would be quarantined" in dry_line
    done = QUARANTINED.search(apply_line)
    assert done is not None and int(done.group(1)) == 3, apply_line
