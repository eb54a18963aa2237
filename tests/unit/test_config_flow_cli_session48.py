"""Session 48 (audit 48vii): the same inputs through `memlife run` and through the Prefect flow.

The nightly flow in-process under the session's Prefect test harness, on the embedded
SQLite store. The CLI refuses two combinations before anything starts; the flow (a manual
trigger's ``config``, a deployment's parameters) took both and reported success."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from memlife.errors import InputError
from tests.unit.test_ops_engine import POLICY, T0, FlakySink, db, rec  # noqa: F401 (db: a fixture)


def test_a_flow_told_to_drain_the_retry_queue_does_not_report_success_undrained(
    db: tuple,  # noqa: F811
    home: Path,
    prefect_harness: None,
) -> None:
    """Adversary: an erasure deleted m-x while the receipts bucket was down (its operation
    waits in the retry queue, the record gone without a receipt); the operator triggers the
    flow with ``{"retry_only": true, "now": ...}`` to drain it (a RunConfig is a dry run
    unless it says otherwise; `memlife run --retry-only --dry-run` is refused, exit 2).
    Must hold: the flow refuses the combination as the CLI does, or drains the queue; never
    a `success` receipt for a retry run that left the delete unreceipted."""
    from flows.nightly import nightly
    from memlife.erase import erase
    from memlife.journal import OpKind, OpState, open_journal

    store, _ = db
    store.put_many([rec("m-x", subject="cats")])
    erase(store, "u-1", subject="cats", policy=POLICY, receipts=FlakySink(home / "receipts"),
          now=T0)  # fmt: skip
    assert store.get("m-x") is None  # deleted; its receipt is what the retry queue owes
    try:
        nightly({"retry_only": True, "now": (T0 + timedelta(days=1)).isoformat()})
        refused = False
    except InputError:
        refused = True
    op = next(o for o in open_journal(store).for_record("m-x") if o.kind is OpKind.erase)
    assert refused or op.state is OpState.RECEIPTED


def test_a_flow_dry_run_with_model_but_no_key_is_refused_as_the_cli_refuses_it(
    offline_home: Path, prefect_harness: None
) -> None:
    """Adversary: the `dry-run` deployment triggered with ``with_model: true`` (to ask the
    model now and keep its answers for the apply run) on a worker whose ANTHROPIC_API_KEY
    is missing. Must hold: refused before the run starts, naming with_model, as
    `memlife run --dry-run --with-model` is (exit 2): today it runs extractively, asks no
    model, estimates 0 calls and reports success, so nothing says the model was never
    asked."""
    from flows.nightly import nightly
    from tests.support.lifecycle import CUTOFF, seed

    seed(offline_home / "memlife.db", records=20)
    with pytest.raises(InputError, match="with.model"):
        nightly({"dry_run": True, "with_model": True, "now": CUTOFF.isoformat()})
    assert not (offline_home / "receipts" / "runs").exists()


def test_the_cli_refuses_both_combinations(home: Path) -> None:
    """Control: the CLI's own refusals of the two inputs above (exit 2, nothing run)."""
    from tests.support.cli import invoke
    from tests.support.lifecycle import CUTOFF, seed

    seed(home / "memlife.db", records=20)
    now = CUTOFF.isoformat()
    code, _, err = invoke("run", "--dry-run", "--retry-only", "--engine", "local", "--now", now)
    assert code == 2 and "--retry-only" in err
    code, _, err = invoke("run", "--dry-run", "--with-model", "--engine", "local", "--now", now,
                          env={"ANTHROPIC_API_KEY": ""})  # fmt: skip
    assert code == 2 and "--with-model" in err
    assert not (home / "receipts" / "runs").exists()
