"""Audit 43x (session 43) (session 43): mutation tests for code session 43 added, each killing a mutant
(named in its docstring) that the session's own tests let live."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

import memlife.gate as gate_mod
from memlife.apply import Tally
from memlife.apply.lifecycle import run_lifecycle
from memlife.errors import InputError
from memlife.journal import OpKind, OpState, Outcome
from memlife.model import Status
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_erase import rec as erase_rec
from tests.unit.test_guards_session33 import (  # noqa: F401 - sqlite_env is a fixture
    SqliteEnv,
    executor,
    rec,
    sqlite_env,
    supersede_op,
)


def test_a_resumed_supersede_follows_a_chain_of_two_hand_overs(
    sqlite_env: SqliteEnv,  # noqa: F811
) -> None:
    """The night planned m-a superseded by m-r; online since, m-r was superseded by m-s and
    m-s by m-z. The resumed supersede must walk the whole chain (``_handed_to``) and point
    m-a at m-z, the first record not superseded. (Mutant: its ``while`` read as ``if``,
    one hop only: m-s is superseded, so the op failed REPLACEMENT_MISSING.)"""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    store.put_many([
        a,
        rec("m-r", "Likes green tea.", status=Status.superseded, provenance={"replaced_by": "m-s"}),
        rec("m-s", "Likes tea.", status=Status.superseded, provenance={"replaced_by": "m-z"}),
        rec("m-z", "Likes green tea, mostly."),
    ])  # fmt: skip
    ex = executor(store, journal, sink)
    (done,) = run_lifecycle(ex, [supersede_op(ex, a, by="m-r")], Tally())
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.superseded), done.last_error
    now = store.get("m-a")
    assert now is not None and (now.status, now.provenance.replaced_by) == (
        Status.superseded,
        "m-z",
    )


def test_a_cancelled_transaction_with_a_conflict_among_its_reasons_is_no_conditional_failure() -> (
    None
):
    """DynamoDB cancels a transaction whose reasons mix a refused condition with a
    TransactionConflict: the conflict is the service's, so the write must not read as
    refused by another writer (``is_conditional_failure``). (Mutant: only "a
    ConditionalCheckFailed among the reasons" checked.)"""
    from botocore.exceptions import ClientError

    from memlife.state.dynamodb import is_conditional_failure

    def cancelled(*codes: str) -> ClientError:
        reasons = [{"Code": c} for c in codes]
        return ClientError({"Error": {"Code": "TransactionCanceledException"},
                            "CancellationReasons": reasons}, "TransactWriteItems")  # fmt: skip

    assert is_conditional_failure(cancelled("None", "ConditionalCheckFailed"))
    assert not is_conditional_failure(cancelled("ConditionalCheckFailed", "TransactionConflict"))
    assert not is_conditional_failure(cancelled("ConditionalCheckFailed", "ThrottlingError"))


def test_the_effective_receipt_of_failures_only_is_the_last_that_sealed_its_work() -> None:
    """A run crashed twice: the first attempt sealed its work (evidence), the second died
    before sealing. The run's result must be the sealed one, not the later unsealed one
    that proves nothing. (Mutant: the sealed filter dropped, the last attempt taken.)"""
    from memlife.run_receipts import effective_receipt

    sealed = {"status": "partial_failure", "evidence": {"parquet": "p"}}
    unsealed = {"status": "failure"}
    assert effective_receipt([sealed, unsealed]) is sealed
    assert effective_receipt([unsealed, {"status": "failure"}]) == {"status": "failure"}


def test_an_access_file_with_a_numeric_time_column_is_refused(tmp_path: Path) -> None:
    """The adversary hands `import --access` a Parquet file whose ``accessed_at`` is a plain
    integer (epoch seconds): cast, every read would land in January 1970 and be lost in
    silence. It must be refused, naming the column. (Mutant: the timestamp type check
    dropped; test_migration_session43 catches it end to end, this is the unit check.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from memlife.access_export import SCHEMA, read_access_file

    cols = {f.name: pa.array(["u-1"], f.type) for f in SCHEMA if pa.types.is_string(f.type)}
    cols |= {
        "accessed_at": pa.array([1_780_000_000], pa.int64()),
        "rank": pa.array([1], pa.int32()),
    }
    path = tmp_path / "access.parquet"
    pq.write_table(pa.table(cols), path)
    with pytest.raises(InputError, match="accessed_at"):
        read_access_file(path)


def test_a_live_record_under_an_erased_id_with_another_erased_text_is_refused(
    tmp_path: Path,
) -> None:
    """The erasures file tombstones m-1 ("Owes 500 EUR to Bob.") and m-2 ("Plays the
    cello."); the store holds an m-1 whose text is m-2's erased one. It is no older copy of
    the erased m-1 (its text is not m-1's): the file does not belong to this store, and it
    must be refused with m-1 kept, not erased as "stale". (Mutant: a record counted stale
    on its id alone.)"""
    from memlife.erasure_export import Tombstone, apply_erasures
    from memlife.model import content_sha256

    def tomb(rid: str, text: str) -> Tombstone:
        return Tombstone(kind="tombstone", actor_id="u-1", record_id=rid,
                         content_sha256=content_sha256(text))  # fmt: skip

    with SqliteStore(tmp_path / "s.db") as store:
        store.put_many([erase_rec("m-1", "Plays the cello.")])
        tombs = [tomb("m-1", "Owes 500 EUR to Bob."), tomb("m-2", "Plays the cello.")]
        with pytest.raises(InputError, match="live record"):
            apply_erasures(store, tombs, [])
        assert store.get("m-1") is not None


def test_the_gates_before_view_keeps_a_hidden_record_the_run_itself_changes(home: Path) -> None:
    """Two records past their deadline in one namespace, both hidden from online recall;
    the run deletes one of them (its candidate, ``include``). The gate's "before" view must
    still hold that candidate (what the run loses is measured against it) and leave the
    other out. (Mutant: the ``r.id in extra`` exemption dropped: the candidate vanished.)"""
    from memlife.gate import ShadowRecall
    from tests.support.gate import rec as gate_rec

    store = SqliteStore(home / "memlife.db")
    store.put_many([gate_rec("m-1", "facts", "Allergic to peanuts.", age=400),
                    gate_rec("m-2", "facts", "Allergic to shellfish.", age=400)])  # fmt: skip
    shadow = ShadowRecall(store, hidden=lambda r: True, token_alignment=False)
    view = shadow.corpus("u-1", "/users/u-1/facts", include=frozenset({"m-1"}))
    assert [r.id for r in view.records] == ["m-1"]
    store.close()


@pytest.mark.parametrize("backend", ["sqlite", "dynamodb"])
def test_a_deferral_of_an_id_in_another_namespace_of_the_same_actor_replaces_the_row(
    backend: str,
) -> None:
    """u-1's row for X names /facts; X went, and u-1's X under /episodes is deferred. The
    row must then name /episodes (the stale one replaced), as it does for another actor.
    (Mutant: the WHERE / condition compares the actor only.)"""
    from memlife.state.side import DynamoSideTables, SqliteSideTables
    from tests.support.aws_state import aws_state

    row = {"record_id": "X", "actor_id": "u-1", "namespace": "/users/u-1/facts",
           "operation_id": "op-1", "run_id": "manual-1", "requested_at": "2026-06-01"}  # fmt: skip
    moved = {**row, "namespace": "/users/u-1/episodes", "operation_id": "op-2"}
    if backend == "sqlite":
        side = SqliteSideTables(sqlite3.connect(":memory:"), threading.RLock())
        side.add_pending(row)
        side.add_pending(moved)
        assert side.pending("u-1") == [moved]
        return
    with aws_state("inprocess") as (_, state):
        side = DynamoSideTables(state)
        side.add_pending(row)
        side.add_pending(moved)
        assert side.pending("u-1") == [moved]


def test_a_ttl_delete_of_a_record_written_again_since_the_plan_leaves_it(
    sqlite_env: SqliteEnv,  # noqa: F811
) -> None:
    """The night planned m-old deleted for its TTL; before the delete ran, an agent wrote
    it again (same id and text, created now: a LangGraph put). Its lifetime starts again,
    so the delete must not take it. (Mutant: only HARD_EXPIRED re-checked, not
    TTL_EXPIRED.)"""
    store, journal, sink = sqlite_env
    old = rec("m-old")
    store.put_many([old])
    ex = executor(store, journal, sink)
    (op,) = ex.journal.plan([ex.new_op(OpKind.delete, old.actor_id, old.namespace, old.id,
                                       ["TTL_EXPIRED"], old.sha256)])  # fmt: skip
    again = old.model_copy(update={"created_at": ex.cutoff})
    store.put_many([again])
    run_lifecycle(ex, [op], Tally())
    now = store.get("m-old")
    assert now is not None and now.status is Status.active


def test_a_rerun_after_a_completed_receipt_writes_no_second_one(tmp_path: Path) -> None:
    """A run's receipt says success; a rerun of the same run puts its own. Nothing may
    follow a completed receipt: the rerun gets the first key back and no receipt.2.json
    appears; after a failure it does. (Mutant: the completed-receipt stop dropped.)"""
    from memlife.audit import FileSink
    from memlife.run_receipts import put_run_receipt, run_receipts

    sink = FileSink(tmp_path / "ledger")
    assert put_run_receipt(sink, "runs/r-1", {"status": "success"}) == "runs/r-1/receipt.json"
    assert put_run_receipt(sink, "runs/r-1", {"status": "success"}) == "runs/r-1/receipt.json"
    assert [k for k, _ in run_receipts(sink, "runs/r-1")] == ["runs/r-1/receipt.json"]
    assert put_run_receipt(sink, "runs/r-2", {"status": "failure"}) == "runs/r-2/receipt.json"
    assert put_run_receipt(sink, "runs/r-2", {"status": "success"}) == "runs/r-2/receipt.2.json"


def test_an_access_file_with_iso_text_times_is_read(tmp_path: Path) -> None:
    """A ledger file written by another tool carries ``accessed_at`` as ISO text: it is a
    time, not a count, and must be read, not refused. (Mutant: only large strings and
    timestamps accepted.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from memlife.access_export import SCHEMA, read_access_file

    cols = {f.name: pa.array(["u-1"], f.type) for f in SCHEMA if pa.types.is_string(f.type)}
    cols |= {"accessed_at": pa.array(["2026-06-01T10:00:00+00:00"], pa.string()),
             "rank": pa.array([1], pa.int32())}  # fmt: skip
    path = tmp_path / "access.parquet"
    pq.write_table(pa.table(cols), path)
    assert read_access_file(path).num_rows == 1


@pytest.mark.parametrize("held", [False, True])
def test_an_older_backup_restored_with_todays_erasures_erases_or_defers_again(
    home: Path, tmp_path: Path, held: bool
) -> None:
    """The backup holds m-1 (held when it was taken, or not); m-1 was erased since. Restored
    with today's erasures, an unheld m-1 must be gone and reported erased again; a held one
    stays, reported deferred again. (Mutants: the erase-again loop dropped; the
    ``deferred_again`` report dropped.)"""
    from typer.testing import CliRunner

    from memlife.cli import app
    from tests.support.records import good
    from tests.unit.test_import_export import write_jsonl

    def ok(*args: str) -> str:
        res = CliRunner().invoke(app, list(args))
        assert res.exit_code == 0, res.output
        return res.stdout

    old, new = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}"
    seed = write_jsonl(tmp_path / "seed.jsonl", [json.dumps(good("m-1", content="Owes Bob.")),
                                                 json.dumps(good("m-2", content="Likes jazz."))])  # fmt: skip
    ok("import", str(seed), "--store", old)
    if held:
        ok("hold", "place", "--id", "m-1", "--store", old)
    ok("export", "--store", old, "-o", str(tmp_path / "backup.jsonl"))
    if held:
        ok("hold", "release", "--id", "m-1", "--store", old)
    ok("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    ok("export", "--store", old, "-o", str(tmp_path / "now.jsonl"),
       "--erasures", str(tmp_path / "erasures.jsonl"))  # fmt: skip
    out = json.loads(ok("import", str(tmp_path / "backup.jsonl"), "--store", new,
                        "--erasures", str(tmp_path / "erasures.jsonl"), "--json"))  # fmt: skip
    with SqliteStore(tmp_path / "new.db") as s:
        assert (s.get("m-1") is not None) is held
    got = out["erasures"]
    assert (got.get("erased_again", []), got.get("deferred_again", [])) == (
        ([], ["m-1"]) if held else (["m-1"], [])
    )


def test_a_failing_case_of_a_tenant_with_no_deletion_names_no_blocking_actor(
    home: Path, tmp_path: Path
) -> None:
    """The scenario of test_gate_session43's hard-expiry test (u-1's high-impact case fails
    whatever the run does; the night's one deletion is u-2's): the verdict must hold no
    deletion back and name no blocking actor, u-1 owning none. (Mutant: the failing actors
    held whole, ``failing`` not narrowed to the deletions' owners: u-1 named, deletions
    "blocked".)"""
    from tests.unit.test_gate_session43 import (
        test_a_case_failing_before_the_run_does_not_hold_back_another_tenants_hard_expiry as run,
    )

    seen: list[dict] = []
    real = gate_mod.evaluate_changes

    def spy(*args: object, **kw: object) -> dict:
        seen.append(real(*args, **kw))
        return seen[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gate_mod, "evaluate_changes", spy)
        run(home, tmp_path)
    (verdict,) = seen
    assert not verdict["deletions_blocked"] and not verdict.get("blocking_actors"), verdict
