"""A child batch's outcome file, read as an adversary would write it (memlife/outcomes.py).

The parent loads what a child put beside the run's report (or on S3). A pickle calls what
it names while it loads, so a file planted there must run nothing: only the types an
outcome is made of load, and the batch is counted failed otherwise.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import sqlite3
from pathlib import Path

import pytest

from memlife import fanout
from memlife.demo import generate
from memlife.errors import OutcomeRefused
from memlife.evalset import dump_cases
from memlife.evalset_starter import starter_cases
from memlife.outcomes import OUTCOME_TYPES, dumps_outcome, loads_outcome
from memlife.run_start import start_run
from memlife.run_types import BatchOutcome, RunConfig, RunContext, Shard
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import NOW


def globals_named(body: bytes) -> set[tuple[str, str]]:
    """Every (module, name) a pickle looks up, as the unpickler is asked for them."""
    seen: set[tuple[str, str]] = set()

    class Recording(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> type:
            seen.add((module, name))
            found: type = super().find_class(module, name)
            return found

    Recording(io.BytesIO(body)).load()
    return seen


@pytest.fixture()
def gated_child(home: Path) -> tuple[RunContext, BatchOutcome]:
    """A gated apply's child batch over demo records: staged consolidations (replacement
    records and their operations), deletions, review findings: every kind of value."""
    db = home / "memlife.db"
    store = SqliteStore(db)
    store.put_many(list(generate(1500, anchor=NOW)))
    dump_cases(starter_cases(store, now=NOW), home / "cases.yaml")
    store.close()
    config = RunConfig(
        dry_run=False, now=NOW, store=f"sqlite:///{db}", eval_cases=str(home / "cases.yaml")
    )
    ctx = start_run(config)
    with sqlite3.connect(db) as con:
        shards = [
            Shard(a, n) for a, n in con.execute("SELECT DISTINCT actor_id, namespace FROM records")
        ]
    child = fanout.config_from_params(fanout.config_params(config, ctx))
    return ctx, fanout.process_isolated(child, shards, "0")  # the parent's ctx, its child's


def test_a_gated_batchs_outcome_comes_back_whole_through_the_restricted_loader(gated_child):
    ctx, outcome = gated_child
    assert outcome.staged and outcome.deletions and outcome.reviews.best  # every kind held
    got = fanout.child_outcome(ctx, "0")
    assert got == outcome
    # the allowlist is exactly current: a type added to an outcome fails here, not in a run
    assert globals_named(dumps_outcome(outcome)) <= OUTCOME_TYPES


class _Planted:
    """What an attacker's pickle does: call something with arguments while loading."""

    def __init__(self, fn: object, *args: object):
        self.fn, self.args = fn, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return self.fn, self.args


def test_a_planted_outcome_runs_nothing_and_the_batch_counts_failed(gated_child, tmp_path):
    ctx, _ = gated_child
    path = ctx.report_dir / "outcomes" / "0.pickle"
    marker = tmp_path / "ran"
    attacks = [
        _Planted(os.system, f"touch {marker}"),
        _Planted(eval, f"open({str(marker)!r}, 'w')"),
        _Planted(SqliteStore, marker),  # a memlife class with a side effect: opens a file
        [_Planted(Path.touch, marker)],  # nested anywhere in the file
    ]
    for attack in attacks:
        path.write_bytes(pickle.dumps(attack))
        with pytest.raises(OutcomeRefused) as refused:
            fanout.child_outcome(ctx, "0")
        assert not marker.exists()
        assert str(path) in str(refused.value) and refused.value.code == "OUTCOME_REFUSED"
        # what flows/shard.py does with it: the batch's shards fail by code, the run goes on
        failed = fanout.failed_outcome([Shard("a", "n")], refused.value)
        assert failed.failed_shards == [Shard("a", "n").failed("OUTCOME_REFUSED")]


def test_an_outcome_of_allowed_types_is_refused_unless_this_run_sealed_it(gated_child, tmp_path):
    """Review of session 11: an outcome is a list of instructions. A planted one made of
    allowed types only (a DeleteItem) deleted any record; it must carry this run's seal."""
    from memlife.apply.deletions import DeleteItem
    from memlife.outcomes import _local_key, seal

    ctx, outcome = gated_child
    victim = outcome.deletions[0]
    forged = BatchOutcome(deletions=[DeleteItem(victim.id, victim.actor_id, victim.namespace,
                                                ("HARD_EXPIRED",), None)])  # fmt: skip
    path = ctx.report_dir / "outcomes" / "0.pickle"
    path.write_bytes(dumps_outcome(forged))  # the types pass the allowlist: no seal
    with pytest.raises(OutcomeRefused, match="not sealed by this run"):
        fanout.child_outcome(ctx, "0")
    other = dataclasses.replace(ctx, run_id=ctx.run_id + "-other")
    path.write_bytes(seal(other, forged))  # sealed, by another run's key
    assert _local_key(other.run_id) != _local_key(ctx.run_id)
    with pytest.raises(OutcomeRefused, match="not sealed by this run"):
        fanout.child_outcome(ctx, "0")
    path.write_bytes(seal(ctx, forged))  # what this run's child writes: accepted
    assert fanout.child_outcome(ctx, "0").deletions == forged.deletions


def test_truncated_foreign_and_non_outcome_files_are_refused_by_name():
    whole = dumps_outcome(BatchOutcome(records=3))
    assert loads_outcome(whole, "here").records == 3
    for body, says in [
        (whole[: len(whole) // 2], "unreadable"),
        (b"not a pickle", "unreadable"),
        (pickle.dumps({"records": 3}), "holds a dict"),
    ]:
        with pytest.raises(OutcomeRefused, match=says) as refused:
            loads_outcome(body, "s3://bucket/key")
        assert "s3://bucket/key" in str(refused.value)


def test_the_loader_never_looks_a_refused_name_up():
    """find_class refuses before importing: a module named in the file is not imported."""
    body = b"cmemlife_test_never_imported\nx\n."  # GLOBAL module name, STOP
    with pytest.raises(OutcomeRefused, match="memlife_test_never_imported.x"):
        loads_outcome(body, "here")
    assert "memlife_test_never_imported" not in __import__("sys").modules
