"""Audit 53iii (session 53): a set the gate could not read at all, as a compliance owner
relies on it.

A case whose shard holds a row that does not decode (a damaged file, a hand-written value)
is not evaluated: the nightly gate lists it as ``unreadable_cases`` and withholds what it
would have judged (its scope). Since sessions 24 and 47, a set none of whose cases checks
anything here (another deployment's set, a typo in every actor) is treated as no set:
every judgement in an enforced namespace waits (``GATE_UNCOVERED``). A set whose every case
is unreadable also checks nothing, yet it satisfied the required gate: another tenant's
merge went ahead, judged by 0 cases; the gate line explained the wait it did impose as
"no case(s) check nothing"; and ``memlife eval`` on such a store printed every gate
``pass`` over 0 cases and exited 0.

Real components: the SQLite store (a retention class overwritten with a BLOB, as
test_gate_unreadable.py damages it), the local engine, real MiniLM, receipts in a folder,
the CLI in-process.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import yaml

from memlife.pipeline import RunConfig, run_local
from memlife.run_finish import gate_line
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.unit.test_gate_unreadable import NOW, case, pair


def _store(home: Path, *, damaged: bool = True) -> None:
    """u-1's facts (one row damaged) and u-2's two statements of one city, which the night
    merges: a judgement in an enforced namespace (/users/*/preferences)."""
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(
            pair("u-1", "facts", "tea", "green tea") + pair("u-2", "preferences", "city", "Lisbon")
        )
    if damaged:
        db = sqlite3.connect(home / "memlife.db")
        db.execute("UPDATE records SET retention_class=X'01' WHERE id='u-1-tea-1'")
        db.commit()
        db.close()


def _cases(home: Path, *items: dict) -> str:
    path = home / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": list(items)}))
    return str(path)


def _statuses(home: Path) -> dict[str, str]:
    db = sqlite3.connect(home / "memlife.db")
    try:
        return dict(db.execute("SELECT id, status FROM records").fetchall())
    finally:
        db.close()


FACTS_CASE = case("facts", "u-1", "facts", "u-1-tea-0")  # reads u-1's damaged shard
NOBODY_CASE = case("nobody", "u-9", None, "m-9")  # an actor this store never held


def test_a_set_whose_every_case_is_unreadable_gates_nothing(home: Path) -> None:
    """The set's one case reads u-1's shard, which holds a damaged row: it is evaluated
    nowhere (``unreadable_cases``), the verdict counts 0 cases. Must hold: such a set checks
    nothing, as a set of another deployment's actors checks nothing, so u-2's merge in an
    enforced namespace waits (GATE_UNCOVERED) instead of going ahead "gated" by 0 cases."""
    _store(home)
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=_cases(home, FACTS_CASE)))

    assert summary.gate is not None and summary.gate["cases"] == 0
    assert [u["case"] for u in summary.gate["unreadable_cases"]] == ["facts"]
    status = _statuses(home)
    assert status["u-2-city-0"] == status["u-2-city-1"] == "active", summary.gate["uncovered"]
    assert summary.other.get("gate_withheld_groups") == 1
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert receipt["gate"]["uncovered"]["groups"] == summary.gate["uncovered"]["groups"] != []


def test_control_a_set_naming_no_actor_of_the_store_already_gates_nothing(home: Path) -> None:
    """Control: the same night (no row damaged) with a set whose one case names an actor
    this store never held (NO_RECORDS): every merge already waits (sessions 24, 47)."""
    _store(home, damaged=False)
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=_cases(home, NOBODY_CASE)))

    assert set(_statuses(home).values()) == {"active"}  # u-1's merge and u-2's wait
    assert summary.other.get("gate_withheld_groups") == 2


def test_control_an_unreadable_case_beside_a_readable_one_holds_its_own_scope_only(
    home: Path,
) -> None:
    """Control: with a second case that reads u-2's shard, the set checks something: u-2's
    merge is judged by its own case and goes ahead (a sampled set gates the whole run),
    while what the unreadable case would judge waits (test_gate_unreadable.py)."""
    _store(home)
    other = case("other", "u-2", "preferences", "u-2-city-0")
    summary = run_local(
        RunConfig(dry_run=False, now=NOW, eval_cases=_cases(home, FACTS_CASE, other))
    )

    status = _statuses(home)
    assert status["u-2-city-0"] == status["u-2-city-1"] == "superseded", summary.gate
    assert summary.gate is not None and summary.gate["cases"] == 1


def test_the_gate_line_names_the_unreadable_cases_behind_a_wait(home: Path) -> None:
    """u-1 has a second namespace the night merges, and the set's one case (no namespace)
    reads every namespace of u-1, the damaged one included: that merge waits. The line an
    operator reads must say why: cases that could not read their records, not "no case(s)
    check nothing in this store (no record in their actor or namespace, or a must-retrieve
    id absent)", which sends them looking for a typo that is not there."""
    _store(home)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(pair("u-1", "preferences", "music", "jazz"))
    everything = case("everything", "u-1", None, "u-1-music-0")
    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=_cases(home, everything)))

    assert _statuses(home)["u-1-music-0"] == "active"  # withheld: its case could not read
    line = gate_line(summary.as_json())
    assert line is not None and "GATE_UNCOVERED" in line, line
    assert "no case" not in line, line
    assert "1 case could not read" in line, line


def test_eval_on_demand_does_not_pass_a_set_it_could_not_read(home: Path) -> None:
    """A compliance owner checks the deployment's set on demand before a policy change.
    The set's high-impact case reads u-1's damaged shard. Must hold: the check does not
    pass (exit 1), and it names the case, the record and the field (never the value),
    where it printed four passing gates over 0 cases and exited 0."""
    _store(home)
    cases = _cases(home, {**FACTS_CASE, "impact": "high"})

    code, out, err = invoke("eval", "--cases", cases)

    assert code == 1, (out, err)
    said = " ".join((out + err).split())
    assert "facts" in said and "u-1-tea-1" in said and "retention_class" in said, said
    code, out, _ = invoke("eval", "--cases", cases, "--json")
    assert code == 1 and json.loads(out)["blocked"] is True


def test_control_eval_on_demand_passes_the_same_set_on_a_sound_store(home: Path) -> None:
    """Control: the same set on the undamaged store is evaluated and passes (exit 0)."""
    _store(home, damaged=False)
    cases = _cases(home, {**FACTS_CASE, "impact": "high"})

    code, out, err = invoke("eval", "--cases", cases, "--json")

    assert code == 0, (out, err)
    report = json.loads(out)
    assert report["cases"] == 1 and report["unreadable_cases"] == []
