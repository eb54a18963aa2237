"""Session 46 (audit 46e): a group's supersedes decided together (session 46), where the supersedes all
failed retryably on the night of the write (AgentCore: a 500 on each item) and the retry
queue finishes them on a later night."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from memlife.apply import Tally
from memlife.apply.group_resume import resume_group
from memlife.apply.lifecycle import run_lifecycle
from memlife.journal import OpState
from memlife.model import MemoryRecord, MemoryType, Source, Status
from memlife.pipeline import RunConfig, RunSummary, run_local
from tests.e2e.test_agentcore_nightly import ac, harness, home  # noqa: F401
from tests.fakes.agentcore import bulk_load
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases
from tests.unit.test_guards_session33 import rec as grec
from tests.unit.test_guards_session36e import _group, env, executor  # noqa: F401

NS = "/users/u-s/preferences"


def _tea(k: int) -> MemoryRecord:
    return MemoryRecord(
        id=f"p-tea-{k}", actor_id="u-s", namespace=NS, memory_type=MemoryType.semantic,
        subject="tea", source=Source.user_stated,
        content="Prefers green tea." if k == 0 else "Still prefers green tea.",
        created_at=ANCHOR - timedelta(days=40 - k),
    )  # fmt: skip


def _night(ac_env: dict, now: Any, cases: str) -> RunSummary:
    config = RunConfig(dry_run=False, now=now, store=ac_env["url"], receipts=ac_env["sink"],
                       eval_cases=cases)  # fmt: skip
    return run_local(config, gate=lambda *a: {"blocked": False})


def test_a_member_edited_while_its_groups_supersedes_wait_in_the_retry_queue(
    ac: dict,  # noqa: F811
) -> None:
    """The adversary fails every supersede of a two-record group on the night of its write
    (none is superseded), then the user rewrites the newer member ("Now drinks only coffee.")
    before the retry queue runs. What must hold (session 46: a group none of whose supersedes
    is done is decided together): no active replacement of the edited member still says
    "green tea" (today the older member is superseded into it and both are served)."""
    store, fake = ac["store"], ac["fake"]
    recs = [_tea(0), _tea(1)]
    bulk_load(store, fake, recs)
    cases = gate_cases(ac["home"] / "none.db", recs)
    fake.fail_next_updates([r.id for r in recs], 500, times=100)
    first = _night(ac, CUTOFF, cases)
    assert first.lifecycle["failed"] == 2 and first.lifecycle.get("superseded", 0) == 0
    fake.clear_scripts()
    edited = store.get("p-tea-1").model_copy(update={"content": "Now drinks only coffee."})
    assert not store.put_many([edited]).failed
    _night(ac, CUTOFF + timedelta(days=1), cases)
    stale = [r.id for r in store.iter_all() if r.status is Status.active
             and "p-tea-1" in r.provenance.supersedes and "green tea" in r.content]  # fmt: skip
    assert not stale, "a replacement still says what its edited source no longer says"
    assert store.get("p-tea-1").content == "Now drinks only coffee."


def test_a_source_edited_after_its_groups_first_supersede_is_receipted_keeps_the_group(
    env: Any,  # noqa: F811
) -> None:
    """The write and m-a's supersede are carried out and receipted (then a crash); the user
    edits m-b before the rerun. What must hold: m-a points to m-r, so m-r stays (not taken
    back), only m-b's own supersede is refused. (test_mutations_session45's "supersede is
    done" runs its supersede through the write applier, where it fails NO_PAYLOAD: no
    supersede of its group is ever done.)"""
    store = env[0]
    a, b = grec("m-a"), grec("m-b", "Likes tea a lot.")
    store.put_many([a, b])
    ex = executor(env)
    write, sup_a, sup_b = _group(ex, [a, b])
    (write,) = run_lifecycle(ex, [write], Tally())
    (sup_a,) = run_lifecycle(ex, [sup_a], Tally())
    assert (sup_a.state, store.get("m-a").status) == (OpState.RECEIPTED, Status.superseded)
    store.put_many([store.get("m-b").model_copy(update={"content": "Likes coffee now."})])
    resume_group(ex, [sup_a, sup_b], Tally())
    assert store.get("m-r") is not None and store.get("m-r").status is Status.active
    assert store.get("m-a").provenance.replaced_by == "m-r"
    assert store.get("m-b").status is Status.active
