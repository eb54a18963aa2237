"""`memlife review` as an operator met it on real memories (session 30 review).

1. `review list` filters that matched nothing said nothing: `--reason possible_update`
   (the codes are upper case) and an unrooted `--namespace 'team/*'` printed "0 review
   items", exit 0, and the queue looked empty. A reason is read in any case and a code that
   is no review reason refused; an unrooted glob is refused as `run --namespace` refuses it.
2. `resolve --by` was ignored for keep, verify, delete and dispute: now refused (exit 2).
3. `supersede --by` an id naming no record said "not an active record" (exit 2): now a
   not-found (exit 1). A pair whose newer record was superseded since names what replaced
   it, and how to supersede by that one.
4. "supersede by ana@example.com" read as if ana were the replacement: the line names the
   record, the replacing record and the reviewer as such.
5. Nothing printed a record's text: `review show ITEM` does (the item, its record's and its
   pair's content and dates), as text or JSON, writes nothing, and escapes markup.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.model import MemoryRecord, Status
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewItem, ReviewQueue
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
LATER = DAY1 + timedelta(days=39)
NIGHT = LATER + timedelta(days=2)
NS = "/team/notes"
COFFEE = "I drink a large black coffee every morning."
TEA = "I gave up coffee in October; my mornings are green tea now."
MARKUP = "Deploy with [/] and [bold]care[/bold]."  # "[/]" alone is a rich MarkupError
REVIEWER = "ana@example.com"


def rec(rid: str, text: str, **kw: object) -> MemoryRecord:
    return MemoryRecord.model_validate({
        "id": rid, "actor_id": "u-7", "namespace": NS, "memory_type": "semantic",
        "content": text, "created_at": DAY1, "source": "agent_inferred", "confidence": 0.6, **kw,
    })  # fmt: skip


def error_line(code: int, err: str, expected: int) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == expected, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


def store(home: Path) -> SqliteStore:
    return SqliteStore(home / "memlife.db")


def items(home: Path, *states: str) -> dict[tuple[str, str], ReviewItem]:
    """Items by (record id, reason)."""
    db = store(home)
    try:
        queue = ReviewQueue.for_store(db)
        return {(i.record_id, i.reason): i for i in queue.list(states=states or ("open",))}
    finally:
        db.close()


@pytest.fixture()
def night(offline_home: Path) -> Path:
    """x (coffee) and a1 (tea, newer): a POSSIBLE_UPDATE pair; x, a1 and m (markup in its
    text) have no owner: a MISSING_OWNER item each."""
    db = store(offline_home)
    try:
        db.put_many([rec("x", COFFEE), rec("a1", TEA, created_at=LATER),
                     rec("m", MARKUP, subject="deploy")])  # fmt: skip
    finally:
        db.close()
    assert run_local(RunConfig(dry_run=False, now=NIGHT)).status == "success"
    assert set(items(offline_home)) == {("x", "POSSIBLE_UPDATE"), ("x", "MISSING_OWNER"),
                                        ("a1", "MISSING_OWNER"), ("m", "MISSING_OWNER")}  # fmt: skip
    return offline_home


def pair_item(home: Path) -> str:
    return items(home)[("x", "POSSIBLE_UPDATE")].item_id


# -- 1. filters that can match nothing are refused ---------------------------------------------


def test_a_reason_is_read_in_any_case(night: Path) -> None:
    code, out, err = invoke("review", "list", "--reason", "possible_update", "--json")
    assert code == 0, err
    assert [(i["record_id"], i["reason"]) for i in json.loads(out)] == [("x", "POSSIBLE_UPDATE")]


@pytest.mark.parametrize("code", ["POSSIBLE_UPDTE", "DELETE_EXPIRED", ""])
def test_a_code_that_is_no_review_reason_is_refused_naming_the_valid_ones(
    night: Path, code: str
) -> None:
    """A typo, and a reason code of the planner that never opens a review item."""
    got, out, err = invoke("review", "list", "--reason", code)
    line = error_line(got, err, 2)
    assert "no review reason" in line and "POSSIBLE_UPDATE" in line and "MISSING_OWNER" in line
    assert "review items" not in out


def test_an_unrooted_namespace_glob_is_refused(night: Path) -> None:
    got, out, err = invoke("review", "list", "--namespace", "team/*")
    assert "must start with '/'" in error_line(got, err, 2)
    assert "review items" not in out
    got, out, err = invoke("review", "list", "--namespace", "/team/*", "--json")
    assert got == 0, err
    assert len(json.loads(out)) == 4


# -- 2. --by only with supersede -----------------------------------------------------------------


@pytest.mark.parametrize("decision", ["keep", "verify", "delete", "dispute"])
def test_by_is_refused_for_a_decision_other_than_supersede(night: Path, decision: str) -> None:
    iid = items(night)[("x", "MISSING_OWNER")].item_id
    got, _, err = invoke("review", "resolve", iid, "--decision", decision, "--reviewer",
                         REVIEWER, "--by", "a1")  # fmt: skip
    assert "--by is for --decision supersede" in error_line(got, err, 2)
    assert items(night)[("x", "MISSING_OWNER")].state == "open"  # nothing decided
    db = store(night)
    try:
        x = db.get("x")
        assert x is not None and x.status is Status.active
    finally:
        db.close()


# -- 3. the replacement: not found, or superseded since --------------------------------------


def test_supersede_by_an_id_naming_no_record_is_not_found(night: Path) -> None:
    """Exit 1, as every "not found"; a record that exists but is not active stays bad
    input (exit 2)."""
    got, _, err = invoke("review", "resolve", pair_item(night), "--decision", "supersede",
                         "--reviewer", REVIEWER, "--by", "no-such-record")  # fmt: skip
    line = error_line(got, err, 1)
    assert "no-such-record" in line and "no such record" in line
    assert items(night)[("x", "POSSIBLE_UPDATE")].state == "open"
    db = store(night)
    try:
        db.put_many([rec("q", "The canteen opens at noon.", subject="canteen")])
        db.set_status(["q"], Status.quarantined, at=NIGHT)
    finally:
        db.close()
    got, _, err = invoke("review", "resolve", pair_item(night), "--decision", "supersede",
                         "--reviewer", REVIEWER, "--by", "q")  # fmt: skip
    assert "replacement q is not an active record" in error_line(got, err, 2)


def test_a_superseded_pair_names_what_replaced_it(night: Path) -> None:
    """a1 is superseded by a3 after the night paired x with a1: the refusal says so and
    how to go on; `--by a3` then supersedes x, and the line names a3 as the replacement."""
    db = store(night)
    try:
        db.put_many([rec("a3", TEA + " With honey.", created_at=LATER + timedelta(days=1))])
        db.set_status(["a1"], Status.superseded, replaced_by="a3", at=NIGHT)
    finally:
        db.close()
    iid = pair_item(night)
    args = ("review", "resolve", iid, "--decision", "supersede", "--reviewer", REVIEWER)
    got, _, err = invoke(*args)
    line = error_line(got, err, 2)
    assert "replacement a1 is not an active record" in line
    assert "superseded by a3" in line and "--by a3" in line
    got, _, err = invoke(*args, "--by", "a3")
    assert got == 0, err
    assert f"{iid} (record x): supersede (replaced by a3) by reviewer {REVIEWER} -> resolved" in (
        err
    )


# -- 4. the confirmation line ----------------------------------------------------------------


def test_the_confirmation_names_the_record_the_replacement_and_the_reviewer(night: Path) -> None:
    iid = pair_item(night)
    got, _, err = invoke("review", "resolve", iid, "--decision", "supersede", "--reviewer",
                         REVIEWER)  # fmt: skip
    assert got == 0, err
    assert f"{iid} (record x): supersede (replaced by a1) by reviewer {REVIEWER} -> resolved" in (
        err
    )
    kept = items(night)[("m", "MISSING_OWNER")].item_id
    got, _, err = invoke("review", "resolve", kept, "--decision", "keep", "--reviewer", REVIEWER)
    assert got == 0, err
    assert f"{kept} (record m): keep by reviewer {REVIEWER} -> resolved" in err
    assert "replaced by" not in err


# -- 5. review show --------------------------------------------------------------------------


def _written(home: Path) -> dict[str, int]:
    """Every file under the home with its modification time (receipts included)."""
    return {str(p.relative_to(home)): p.stat().st_mtime_ns for p in home.rglob("*") if p.is_file()}


def test_show_prints_the_item_and_both_records_text(night: Path) -> None:
    iid = pair_item(night)
    before = _written(night)
    got, out, err = invoke("review", "show", iid)
    assert got == 0, err
    for field in ("POSSIBLE_UPDATE", "open", "nights", "priority", "owner", NS, "semantic",
                  "active", "2026-01-05T08:00:00+00:00", "2026-02-13T08:00:00+00:00",
                  "expires_at", COFFEE, TEA):  # fmt: skip
        assert field in out, field
    assert out.index(COFFEE) < out.index(TEA)  # the record, then its pair
    assert _written(night) == before  # a read: no receipt, no journal, nothing written


def test_show_json_holds_the_item_and_the_records(night: Path) -> None:
    iid = pair_item(night)
    got, out, err = invoke("review", "show", iid, "--json")
    assert got == 0, err
    doc = json.loads(out)
    assert doc["item"]["item_id"] == iid and doc["item"]["reason"] == "POSSIBLE_UPDATE"
    assert doc["item"]["nights"] == 1 and doc["item"]["state"] == "open"
    record, pair = doc["record"], doc["pair"]
    assert (record["id"], record["content"], record["status"]) == ("x", COFFEE, "active")
    assert (pair["id"], pair["content"], pair["memory_type"]) == ("a1", TEA, "semantic")
    assert record["created_at"] == "2026-01-05T08:00:00+00:00" and record["expires_at"] is None
    assert pair["created_at"] == "2026-02-13T08:00:00+00:00"
    single = items(night)[("m", "MISSING_OWNER")].item_id
    got, out, err = invoke("review", "show", single, "--json")
    assert got == 0, err
    assert json.loads(out)["pair"] is None


def test_show_prints_markup_in_content_as_text(night: Path) -> None:
    got, out, err = invoke("review", "show", items(night)[("m", "MISSING_OWNER")].item_id)
    assert got == 0, err
    assert MARKUP in out


def test_show_of_an_unknown_item_is_not_found(night: Path) -> None:
    got, out, err = invoke("review", "show", "rv-nope")
    assert "review item rv-nope: not found" in error_line(got, err, 1)
    assert out == ""


def test_show_of_an_item_whose_record_is_gone_says_so(night: Path) -> None:
    iid = items(night)[("a1", "MISSING_OWNER")].item_id
    db = store(night)
    try:
        db.delete_many(["a1"])
    finally:
        db.close()
    got, out, err = invoke("review", "show", iid, "--json")
    assert got == 0, err
    assert json.loads(out)["record"] is None
    got, out, err = invoke("review", "show", iid)
    assert got == 0, err
    assert "gone" in out and TEA not in out
