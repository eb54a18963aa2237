"""What a legal hold protects beyond its own record (adversarial review, session 11)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from memlife.erase import release_hold
from memlife.errors import InputError
from memlife.holds import place_hold
from memlife.model import MemoryRecord, MemoryType, Provenance, RetentionClass, Status
from memlife.pinned import held_superseded
from memlife.pipeline import RunConfig, RunSummary, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW


def rec(rid: str, content: str, actor: str = "u-1", **kw: object) -> MemoryRecord:
    base = dict(id=rid, actor_id=actor, namespace=f"/users/{actor}/facts",
                memory_type=MemoryType.semantic, subject="beverage", content=content,
                created_at=NOW - timedelta(days=30))  # fmt: skip
    return MemoryRecord(**(base | kw))  # type: ignore[arg-type]


def _pinned_store(home: Path) -> None:
    store = SqliteStore(home / "memlife.db")
    store.put_many([
        rec("A", "Prefers green tea in the morning.", status=Status.superseded,
            retention_class=RetentionClass.legal_hold, provenance=Provenance(replaced_by="R")),
        rec("R", "Prefers green tea in the morning.", expires_at=NOW - timedelta(days=1),
            provenance=Provenance(supersedes=["A"])),
        rec("X", "Had a dentist appointment on Friday.", expires_at=NOW - timedelta(days=1)),
    ])  # fmt: skip
    store.close()


def test_a_replacement_a_held_source_points_to_outlives_its_expiry(home: Path) -> None:
    """R expired and was deleted while the held A still said "replaced by R": A was left
    superseded by nothing, and once released its fact was served by no record."""
    _pinned_store(home)
    summary = run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    store = SqliteStore(home / "memlife.db")
    assert store.get("X") is None  # expiry still deletes what no hold pins
    assert store.get("R") is not None and store.get("A").provenance.replaced_by == "R"  # type: ignore[union-attr]
    assert {"id": "R", "reason": "HELD_SOURCE"} in receipt["ids_not_deleted"]
    # once the hold goes, the next night deletes R as it would have
    release_hold(store, ["A"], now=NOW)
    store.close()
    run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=1), consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("R") is None


def test_a_dry_run_says_the_pinned_replacement_is_kept_as_the_apply_run_does(home: Path) -> None:
    """The planner read no provenance: a dry run proposed deleting R, which the apply run
    then kept (HELD_SOURCE). Both now plan a hold for R, and the same counts."""
    _pinned_store(home)
    dry = run_local(RunConfig(dry_run=True, now=NOW, consolidate=False))
    decisions = {d["id"]: d for d in map(json.loads, Path(dry.report).read_text().splitlines())}
    assert decisions["R"]["action"] == "hold"
    assert {"DELETE_DEFERRED", "HELD_SOURCE"} <= set(decisions["R"]["reasons"])
    assert decisions["X"]["action"] == "delete_expired"
    applied = run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    assert applied.counts == dry.counts and applied.counts["delete_expired"] == 1


@pytest.mark.parametrize(
    "source",
    [
        dict(status=Status.retained),
        dict(status=Status.superseded, retention_class=RetentionClass.legal_hold,
             namespace="/users/u-1/old"),
        dict(status=Status.active, retention_class=RetentionClass.legal_hold),
    ],
    ids=["retained-status", "another-namespace", "held-active"],
)  # fmt: skip
def test_dry_run_and_apply_agree_for_every_kind_of_held_source(home: Path, source: dict) -> None:
    """Review of session 19: the first planning check looked only at held, superseded
    sources of the same shard; the applier looks at every held source a replacement names.
    Both now ask one function (pinned.pinned_by_a_hold)."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("A", "Prefers green tea.", provenance=Provenance(replaced_by="R"), **source),
            rec("R", "Prefers green tea.", expires_at=NOW - timedelta(days=1),
                provenance=Provenance(supersedes=["A"])),
        ])  # fmt: skip
    dry = run_local(RunConfig(dry_run=True, now=NOW, consolidate=False))
    decisions = {d["id"]: d for d in map(json.loads, Path(dry.report).read_text().splitlines())}
    assert decisions["R"]["action"] == "hold" and "HELD_SOURCE" in decisions["R"]["reasons"]
    applied = run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    assert applied.counts == dry.counts
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("R") is not None


def test_a_chain_of_replacements_under_a_hold_is_kept_to_its_end(home: Path) -> None:
    """Review of session 19: with A (held) -> R1 -> R2, R1 was kept (A names it) but R2
    expired and went, leaving R1 "replaced by" nothing and A's fact unserved once the hold
    goes. The pin follows the chain; a chain whose bottom is not held is not pinned."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("A", "Prefers green tea.", status=Status.superseded,
                retention_class=RetentionClass.legal_hold, provenance=Provenance(replaced_by="R1")),
            rec("R1", "Prefers green tea!", status=Status.superseded,
                expires_at=NOW - timedelta(days=1),
                provenance=Provenance(supersedes=["A"], replaced_by="R2")),
            rec("R2", "Prefers green tea!!", expires_at=NOW - timedelta(days=1),
                provenance=Provenance(supersedes=["R1"])),
            rec("B", "Likes jazz.", status=Status.superseded, provenance=Provenance(replaced_by="S1")),
            rec("S1", "Likes jazz!", status=Status.superseded, expires_at=NOW - timedelta(days=1),
                provenance=Provenance(supersedes=["B"], replaced_by="S2")),
            rec("S2", "Likes jazz!!", expires_at=NOW - timedelta(days=1),
                provenance=Provenance(supersedes=["S1"])),
        ])  # fmt: skip
    dry = run_local(RunConfig(dry_run=True, now=NOW, consolidate=False))
    decisions = {d["id"]: d for d in map(json.loads, Path(dry.report).read_text().splitlines())}
    assert decisions["R1"]["action"] == decisions["R2"]["action"] == "hold"
    assert decisions["S2"]["action"] == "delete_expired"  # no hold below it
    applied = run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    assert applied.counts == dry.counts
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("R1") is not None and store.get("R2") is not None
        assert store.get("S2") is None


def _dry_and_apply(home: Path) -> dict[str, str]:
    """Each record's planned action in a dry run; then the apply run, whose counts agree."""
    dry = run_local(RunConfig(dry_run=True, now=NOW, consolidate=False))
    actions = {
        d["id"]: d["action"] for d in map(json.loads, Path(dry.report).read_text().splitlines())
    }
    assert run_local(RunConfig(dry_run=False, now=NOW, consolidate=False)).counts == dry.counts
    return actions


def test_a_held_source_its_replacement_does_not_list_still_pins_it(home: Path) -> None:
    """Review of session 19: O (held) says "replaced by N" but N lists no source (a status
    set online, an import). The walk up from N found nothing, and N was deleted."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("O", "Prefers green tea.", status=Status.superseded,
                retention_class=RetentionClass.legal_hold, provenance=Provenance(replaced_by="N")),
            rec("N", "Prefers green tea.", expires_at=NOW - timedelta(days=1)),
        ])  # fmt: skip
    assert _dry_and_apply(home)["N"] == "hold"
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("N") is not None


def test_a_chain_of_any_length_is_followed_and_cycles_end_the_walk(home: Path) -> None:
    """Review of session 19: the walk stopped after 16 links and let the 17th go. Nightly
    re-consolidation grows a chain by a link a night. A cycle of replacements with no hold
    below it pins nothing, whatever order its records come in."""
    links = [rec("A", "Fact 0.", status=Status.superseded,
                 retention_class=RetentionClass.legal_hold, provenance=Provenance(replaced_by="R1"))]  # fmt: skip
    for i in range(1, 25):
        last = i == 24
        links.append(rec(f"R{i}", f"Fact {i}.", status=Status.active if last else Status.superseded,
                         expires_at=NOW - timedelta(days=1) if last else None,
                         provenance=Provenance(supersedes=["A" if i == 1 else f"R{i - 1}"],
                                               replaced_by=None if last else f"R{i + 1}")))  # fmt: skip
    cycle = [
        rec("X", "Cycle x.", expires_at=NOW - timedelta(days=1),
            provenance=Provenance(supersedes=["Y"], replaced_by="Y")),
        rec("Y", "Cycle y.", expires_at=NOW - timedelta(days=1),
            provenance=Provenance(supersedes=["X"], replaced_by="X")),
    ]  # fmt: skip
    with SqliteStore(home / "memlife.db") as store:
        store.put_many(links + cycle)
        from memlife.pinned import pinned_by_a_hold, read_links

        for order in (["X", "Y"], ["Y", "X"]):
            assert pinned_by_a_hold(store, read_links(store, order)) == set()
    actions = _dry_and_apply(home)
    assert actions["R24"] == "hold" and actions["X"] == actions["Y"] == "delete_expired"
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("R24") is not None and store.get("X") is None


def test_a_hold_named_with_an_actor_never_takes_another_actors_record(home: Path) -> None:
    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("a", "Fact A."), rec("b", "Fact B.", actor="u-2")])
    with pytest.raises(InputError, match="not records of actor u-1: b"):
        place_hold(store, ids=["b"], actor="u-1", now=NOW)
    assert store.get("b").retention_class is RetentionClass.standard  # type: ignore[union-attr]
    assert place_hold(store, ids=["a"], actor="u-1", now=NOW)["held"] == ["a"]
    store.close()


def test_hold_release_names_what_it_did_not_release_and_never_creates_a_store(
    home: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from memlife.cli import app

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("a", "Fact A.")])
    res = CliRunner().invoke(app, ["hold", "release", "--id", "a", "--id", "zz"])
    assert res.exit_code == 3 and "not held: a" in res.output and "not found: zz" in res.output
    res = CliRunner().invoke(app, ["hold", "release", "--id", "a"])  # a record, not held
    assert res.exit_code == 1 and "nothing released: not held: a" in res.output
    missing = tmp_path / "nowhere" / "memlife.db"
    res = CliRunner().invoke(
        app, ["hold", "release", "--id", "a", "--store", f"sqlite:///{missing}"]
    )
    assert res.exit_code != 0 and not missing.exists()


def test_the_sqlite_fast_path_reads_the_same_links_as_the_records(home: Path) -> None:
    """`SqliteStore.links_many` skips parsing provenance that holds no link; a source event
    quoting the very text it looks for must not fool it."""
    from memlife.model import link_of

    tricky = 'x","replaced_by":null,"supersedes":[],"y":"'
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("a", "Fact a."),
            rec("b", "Fact b.", provenance=Provenance(source_event=tricky, replaced_by="c")),
            rec("c", "Fact c.", provenance=Provenance(source_event=tricky, supersedes=["b"])),
            rec("d", "Fact d.", status=Status.retained, provenance=Provenance(supersedes=["a", "b"])),
            rec("e", "Fact e.", retention_class=RetentionClass.legal_hold),
        ])  # fmt: skip
        ids = ["a", "b", "c", "d", "e", "missing"]
        slow = {rid: link_of(r) for rid, r in store.get_many(ids).items()}
        assert store.links_many(ids) == slow and slow["b"].replaced_by == "c"
        assert slow["d"].held and slow["e"].held and not slow["a"].held


def test_a_hold_placed_while_a_run_waits_to_delete_pins_what_its_record_names(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hold placed between planning and deleting (compliance does not wait for the night):
    O is held once the run has committed its groups, its deletions still to come. N lists
    no source, so only a walk down from O finds it; the applier walked up only."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("O", "Prefers green tea.", status=Status.superseded,
                provenance=Provenance(replaced_by="N")),
            rec("N", "Prefers green tea.", expires_at=NOW - timedelta(days=1)),
        ])  # fmt: skip
    import memlife.run_commit as run_commit

    def hold_now(point: str) -> None:
        if point == "after_commit_groups":
            with SqliteStore(home / "memlife.db") as other:  # another process's connection
                place_hold(other, ids=["O"], now=NOW)

    monkeypatch.setattr(run_commit, "checkpoint", hold_now)
    summary = run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("N") is not None
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert {"id": "N", "reason": "HELD_SOURCE"} in receipt["ids_not_deleted"]


def test_held_superseded_records_read_alike_with_and_without_the_sqlite_index(
    home: Path,
) -> None:
    """The walk down starts from held, superseded records: SQLite reads them through its
    index for every namespace of the actor, another store pages the shard (once a run,
    review of session 20: it was once a batch of 100). Never another actor's, nor a
    record that is held but active, or superseded but free."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("a", "x1", status=Status.superseded, retention_class=RetentionClass.legal_hold),
            rec("b", "x2", status=Status.superseded),
            rec("c", "x3", retention_class=RetentionClass.legal_hold),
            rec("d", "x4", status=Status.superseded, retention_class=RetentionClass.legal_hold,
                namespace="/users/u-1/old"),
            rec("e", "x5", "u-2", status=Status.superseded,
                retention_class=RetentionClass.legal_hold),
        ])  # fmt: skip

        listed: list[tuple[str, str]] = []

        class Paged:  # the store without its fast path: what AgentCore gets
            def page(self, actor_id: str, namespace: str, **kw: object) -> object:
                listed.append((actor_id, namespace))
                return store.page(actor_id, namespace, **kw)  # type: ignore[arg-type]

        shards = [("u-1", "/users/u-1/facts"), ("u-2", "/users/u-2/facts")]
        # SQLite: every namespace of the actor (d, held in /old, may name a record here)
        assert sorted(held_superseded(store, shards)) == ["a", "d", "e"]
        paged: dict = {}
        assert sorted(held_superseded(Paged(), shards, paged)) == ["a", "e"]  # type: ignore[arg-type]
        assert sorted(held_superseded(Paged(), shards[:1], paged)) == ["a"]  # type: ignore[arg-type]
        assert listed == shards  # each shard listed once a run, not once a batch


def test_a_hold_placed_on_the_record_just_before_its_delete_wins(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of session 20: the applier re-read N, then dropped its cached vectors, then
    deleted it unconditionally; a hold placed on N in between was deleted with it. The hold
    is now part of SQLite's DELETE: N stays, receipted LEGAL_HOLD, never deleted."""
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([rec("N", "Had a dentist appointment.", expires_at=NOW - timedelta(days=1))])
    import memlife.apply.appliers.delete as delete

    forget = delete.forget_content

    def then_hold(ex: object, gone: object, current: object) -> None:
        forget(ex, gone, current)  # type: ignore[arg-type]
        with SqliteStore(home / "memlife.db") as other:  # compliance, another process
            place_hold(other, ids=["N"], now=NOW)

    monkeypatch.setattr(delete, "forget_content", then_hold)
    summary = run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        kept = store.get("N")
        assert kept is not None and kept.retention_class is RetentionClass.legal_hold
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert [f["code"] for f in receipt["failures"]] == ["LEGAL_HOLD"]
    assert summary.lifecycle["deleted"] == 0


@pytest.mark.parametrize("when", ["before planning", "after planning"])
def test_a_held_record_in_another_namespace_pins_the_replacement_it_names(
    home: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """Review of session 20: O, held and superseded in /old, says "replaced by N" in
    /facts (an import keeps such a link); the walk down started from N's shard only, so
    N expired and went, O left pointing at nothing."""
    held = RetentionClass.legal_hold if when == "before planning" else RetentionClass.standard
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("O", "Prefers green tea.", namespace="/users/u-1/old", status=Status.superseded,
                retention_class=held, provenance=Provenance(replaced_by="N")),
            rec("N", "Prefers green tea.", expires_at=NOW - timedelta(days=1)),
        ])  # fmt: skip
    import memlife.run_commit as run_commit

    def hold_now(point: str) -> None:
        if point == "after_commit_groups" and when == "after planning":
            with SqliteStore(home / "memlife.db") as other:
                place_hold(other, ids=["O"], now=NOW)

    monkeypatch.setattr(run_commit, "checkpoint", hold_now)
    run_local(RunConfig(dry_run=False, now=NOW, consolidate=False))
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("N") is not None


def _after_the_supersede_read(
    home: Path, monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[SqliteStore], object]
) -> RunSummary:
    """An apply run consolidating A and B, where another process does ``meanwhile`` to the
    store right after the supersede applier has read A."""
    from tests.support.lifecycle import gate_cases

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            rec("A", "Prefers green tea.", created_at=NOW - timedelta(days=60)),
            rec("B", "Prefers green tea!", created_at=NOW - timedelta(days=50)),
        ])  # fmt: skip
    cases = gate_cases(home / "memlife.db")
    import memlife.apply.appliers.status as status

    read = status.get_many

    def then_act(store: SqliteStore, ids: list[str]) -> dict:
        found = read(store, ids)
        if "A" in ids:
            with SqliteStore(home / "memlife.db") as other:  # another process
                meanwhile(other)
        return found

    monkeypatch.setattr(status, "get_many", then_act)
    return run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))


def test_a_hold_placed_after_the_supersede_read_its_record_wins(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of session 20: the nightly supersede re-read each original, then set its
    status unconditionally; a hold placed in between was superseded anyway (a held record
    changed). The write now checks the hold in its own transaction (SQLite)."""
    summary = _after_the_supersede_read(
        home, monkeypatch, lambda other: place_hold(other, ids=["A"], now=NOW)
    )
    with SqliteStore(home / "memlife.db") as store:
        a = store.get("A")
        assert a is not None and a.status is Status.active
        assert a.retention_class is RetentionClass.legal_hold and a.provenance.replaced_by is None
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert {"A": "LEGAL_HOLD"} == {f["record_id"]: f["code"] for f in receipt["failures"]}


def test_an_original_deleted_after_the_supersede_read_is_not_claimed_superseded(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of session 20: a record gone between the read and the status write came back
    ``missing`` from the store and was still receipted ``superseded``."""
    from tests.support.lifecycle import operation_receipts

    _after_the_supersede_read(home, monkeypatch, lambda other: other.delete_many(["A"]))
    claims = {o["record_id"]: o["outcome"] for o in operation_receipts(home / "receipts").values()
              if o["action"] == "supersede"}  # fmt: skip
    assert claims.get("A") != "superseded"
