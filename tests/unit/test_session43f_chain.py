"""Audit 43f (session 43): a resumed supersede whose replacement was superseded online since the plan
(``status._handed_to``, session 43), at the two ends the session's tests leave open: a
chain handed back to the source itself, and a rerun that finds the source already moved
down the chain by a hand-over."""

from __future__ import annotations

from memlife.apply import Tally
from memlife.apply.lifecycle import run_lifecycle
from memlife.journal import OpState, Outcome
from memlife.model import Status
from tests.unit.test_guards_session33 import (  # noqa: F401 - sqlite_env is a fixture
    SqliteEnv,
    executor,
    rec,
    sqlite_env,
    supersede_op,
)


def test_a_replacement_handed_back_to_its_source_leaves_the_source_active(
    sqlite_env: SqliteEnv,  # noqa: F811
) -> None:
    """The night planned m-a superseded by m-r; online since, m-r was superseded by m-a
    itself (the user kept the older wording). The resumed supersede must end skipped, not
    failed, and m-a must stay active: nothing is left for it to point to."""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    back = rec("m-r", "Likes green tea.", status=Status.superseded,
               provenance={"replaced_by": "m-a"})  # fmt: skip
    store.put_many([a, back])
    ex = executor(store, journal, sink)
    (done,) = run_lifecycle(ex, [supersede_op(ex, a, by="m-r")], Tally())
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.skipped), done.last_error
    now = store.get("m-a")
    assert now is not None and (now.status, now.provenance.replaced_by) == (Status.active, None)


def test_a_rerun_finds_a_source_already_moved_down_the_chain_done(
    sqlite_env: SqliteEnv,  # noqa: F811
) -> None:
    """The killed attempt superseded m-a by m-r; online, m-r was then superseded by m-z and
    its hand-over moved m-a to m-z. The rerun's supersede of m-a (the journal never knew it
    was done) must read as done, superseded, pointing to m-z; not STALE."""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    ex = executor(store, journal, sink)
    op = supersede_op(ex, a, by="m-r")
    moved = rec("m-a", status=Status.superseded, provenance={"replaced_by": "m-z"})
    gone = rec("m-r", "Likes green tea.", status=Status.superseded,
               provenance={"replaced_by": "m-z"})  # fmt: skip
    store.put_many([moved, gone, rec("m-z", "Likes green tea, mostly.")])
    (done,) = run_lifecycle(ex, [op], Tally())
    assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.superseded), done.last_error
    now = store.get("m-a")
    assert now is not None and now.provenance.replaced_by == "m-z"
