"""A reviewer's decision killed part way (session 29; "Left" since session 27): `review
resolve ITEM --decision delete` killed after the delete, before its receipt, left the record
gone, the operation APPLIED with no receipt, the run without a run receipt and the item
open; the same command then stopped at "record ... no longer exists" (exit 2), so the
delete had no receipt until a night completed it (invariant 2). The same command now
finishes that attempt: its operation receipted, its run sealed, the item closed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memlife.journal import OpKind, OpState, open_journal
from memlife.stores.sqlite import SqliteStore


def _cli(home: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMLIFE_HOME": str(home)}
    if fault:
        env |= {"MEMLIFE_FAULT": fault, "MEMLIFE_FAULT_MODE": "kill"}
    return subprocess.run([sys.executable, "-m", "memlife", *args], env=env,
                          capture_output=True, text=True)  # fmt: skip


@pytest.fixture()
def item(home: Path) -> dict:
    """An open review item of a demo night's (a record it may delete)."""
    assert _cli(home, "demo", "--records", "200").returncode == 0
    assert _cli(home, "run", "--engine", "local").returncode == 0
    items = json.loads(_cli(home, "review", "list", "--json").stdout)
    return next(i for i in items if i["reason"] != "POSSIBLE_UPDATE")


def _verify_manual_runs(home: Path) -> dict[str, list[str]]:
    runs = json.loads(_cli(home, "receipts", "list", "--json").stdout)
    out = {}
    for r in runs:
        if r["run_id"].startswith("manual-"):
            v = json.loads(_cli(home, "receipts", "verify", r["run_id"], "--json").stdout)
            out[r["run_id"]] = [p["code"] for p in v["problems"]]
    return out


@pytest.mark.parametrize("fault", ["before_receipt", "after_receipt"])
def test_the_same_resolve_after_a_kill_finishes_the_delete(
    home: Path, item: dict, fault: str
) -> None:
    resolve = ("review", "resolve", item["item_id"], "--decision", "delete", "--reviewer", "ana")
    killed = _cli(home, *resolve, fault=fault)
    assert killed.returncode != 0
    with SqliteStore(home / "memlife.db") as store:
        assert store.get(item["record_id"]) is None  # the delete happened
    again = _cli(home, *resolve)
    assert again.returncode == 0, again.stderr
    assert "finished the decision run" in again.stderr
    with SqliteStore(home / "memlife.db") as store:
        ops = [o for o in open_journal(store).for_record(item["record_id"])
               if o.kind is OpKind.delete]  # fmt: skip
        assert len(ops) == 1 and ops[0].state is OpState.RECEIPTED  # one delete, receipted
    (now,) = [i for i in json.loads(_cli(home, "review", "list", "--all", "--json").stdout)
              if i["item_id"] == item["item_id"]]  # fmt: skip
    assert (now["state"], now["decision"], now["reviewer"]) == ("resolved", "delete", "ana")
    assert now["operation_id"] == ops[0].operation_id
    runs = _verify_manual_runs(home)
    assert len(runs) == 2 and all(p == [] for p in runs.values()), runs  # both sealed, clean
    third = _cli(home, *resolve)
    assert third.returncode == 2 and "already resolved" in third.stderr


def test_another_decision_after_a_killed_delete_is_still_refused(home: Path, item: dict) -> None:
    """Only the decision that was under way is finished: a `verify` of the record the
    killed delete removed has nothing to act on."""
    resolve = ("review", "resolve", item["item_id"], "--reviewer", "ana", "--decision")
    assert _cli(home, *resolve, "delete", fault="before_receipt").returncode != 0
    other = _cli(home, *resolve, "verify")
    assert other.returncode == 2 and "no longer exists" in other.stderr


def test_another_reviewers_killed_attempt_is_not_finished_under_this_name(
    home: Path, item: dict
) -> None:
    """Session 29 review: the attempt was matched by record and reason only, so reviewer B's
    resolve would have receipted A's killed delete under B's name."""
    ana = ("review", "resolve", item["item_id"], "--decision", "delete", "--reviewer", "ana")
    assert _cli(home, *ana, fault="before_receipt").returncode != 0
    bob = _cli(home, "review", "resolve", item["item_id"], "--decision", "delete",
               "--reviewer", "bob")  # fmt: skip
    assert bob.returncode == 2 and "another request" in bob.stderr, bob.stderr
    again = _cli(home, *ana)
    assert again.returncode == 0 and "finished the decision run" in again.stderr
    (now,) = [i for i in json.loads(_cli(home, "review", "list", "--all", "--json").stdout)
              if i["item_id"] == item["item_id"]]  # fmt: skip
    assert now["reviewer"] == "ana"
