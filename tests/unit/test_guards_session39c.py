"""Guards left untested by the thirty-ninth audit (session 39): the online hand-over of a
supersede (memlife/online/memory.py::_hand_over) on SQLite and AgentCore, the cap on the
records subject inference hands to staging (run_planning.KEEP_READ), and the outage streak
of the Anthropic consolidator on 200 answers that are no message.

Three tests showed real bugs of the code they were written against (fixed in session 39)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, RetentionClass, Status, utcnow
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

NS = "/users/u-1/facts"
T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)


def rec(rid: str, content: str = "Likes tea.", **kw: Any) -> MemoryRecord:
    base: dict[str, Any] = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic",
                                content=content, created_at=utcnow() - timedelta(days=40),
                                subject="drinks", owner="team")  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def pointing(rid: str, to: str, status: Status = Status.superseded, **kw: Any) -> MemoryRecord:
    """A record that ``to`` replaced (superseded, or quarantined keeping its replacement)."""
    return rec(rid, f"Fact {rid}.", status=status, provenance={"replaced_by": to}, **kw)


def chain(*followers: MemoryRecord) -> list[MemoryRecord]:
    """``followers`` (each pointing to B), B (active, listing them) and C (active)."""
    b = rec("B", "Likes green tea.", provenance={"supersedes": [f.id for f in followers]})
    return [*followers, b, rec("C", "Likes green tea daily.")]


@pytest.fixture()
def sqlite(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


def online(store: Any, home: Path) -> LongTermMemory:
    return LongTermMemory(store, ledger=AccessLedger(home / "ledger"))


def stored(store: Any, rid: str) -> MemoryRecord:
    got = store.get(rid)
    assert isinstance(got, MemoryRecord)
    return got


# -- 1. online/memory.py _hand_over ------------------------------------------------------------
@pytest.fixture(scope="module")
def harness() -> Iterator[Any]:
    from tests.fakes.agentcore import AgentCoreHarness

    h = AgentCoreHarness()
    yield h
    h.close()


def test_online_hand_over_never_rewrites_a_held_follower_on_agentcore(
    harness: Any, home: Path
) -> None:
    """Attacks ``not r.held`` in `memlife/online/memory.py::_hand_over`: AgentCore's status
    write checks no hold (no set_status_unless_held), so the read is the only guard. A1
    (legal hold) and A2 point to B; B is superseded online by C: A2 moves to C, A1 stays
    exactly as it was (invariant 1). Mutant: the held A1 is re-pointed too."""
    store = harness.store()
    a1 = pointing("A1", "B", retention_class=RetentionClass.legal_hold)
    store.put_many(chain(a1, pointing("A2", "B")))
    before = stored(store, "A1")
    mem = online(store, home)
    try:
        assert mem.set_status(["B"], Status.superseded, replaced_by="C") == ["B"]
    finally:
        mem.close()
    assert stored(store, "A2").provenance.replaced_by == "C"
    assert stored(store, "A1") == before


def test_online_hand_over_moves_only_superseded_records_that_name_the_one_superseded(
    sqlite: SqliteStore, home: Path
) -> None:
    """Attacks ``pointing_to(self.store, targets)`` and the ``if followers`` write in
    `memlife/online/memory.py::_hand_over`, and ``status is Status.superseded and
    result.succeeded`` in ``set_status``: A (-> B) moves to C when B is superseded by C;
    D (-> C, another chain) and E (-> B, another actor's record sharing the name space of
    ids) are not touched."""
    e = pointing("E", "B", actor_id="u-2", namespace="/users/u-2/facts")
    sqlite.put_many([*chain(pointing("A", "B")), pointing("D", "C"), e])
    mem = online(sqlite, home)
    try:
        assert mem.set_status(["B"], Status.superseded, replaced_by="C") == ["B"]
    finally:
        mem.close()
    assert stored(sqlite, "A").provenance.replaced_by == "C"
    assert stored(sqlite, "D").provenance.replaced_by == "C"
    assert stored(sqlite, "E") == e


def test_online_quarantine_hands_nothing_over(sqlite: SqliteStore, home: Path) -> None:
    """Attacks ``if status is Status.superseded and result.succeeded`` in
    `memlife/online/memory.py::set_status`: a quarantine of B leaves A naming B (a restore
    of B puts the chain back as it was). Mutant (status check dropped): the hand-over runs
    with ``to`` None and rewrites A (SQLite: its status time; elsewhere its replacement)."""
    sqlite.put_many(chain(pointing("A", "B", status_changed_at=T0 - timedelta(days=80))))
    before = stored(sqlite, "A")
    mem = online(sqlite, home)
    try:
        assert mem.set_status(["B"], Status.quarantined) == ["B"]
    finally:
        mem.close()
    assert stored(sqlite, "A") == before


def test_online_hand_over_keeps_each_followers_status_time(sqlite: SqliteStore, home: Path) -> None:
    """Guard missing in `memlife/online/memory.py::_hand_over`: re-pointing is no new
    supersede (status._repoint keeps ``s.status_changed_at``), so superseded retention still
    counts from when A was superseded, 80 days ago. The online hand-over writes A's status
    time as now: A lives a full superseded retention longer each time its chain moves."""
    since = utcnow().replace(microsecond=0) - timedelta(days=80)
    sqlite.put_many(chain(pointing("A", "B", status_changed_at=since)))
    mem = online(sqlite, home)
    try:
        assert mem.set_status(["B"], Status.superseded, replaced_by="C") == ["B"]
    finally:
        mem.close()
    a = stored(sqlite, "A")
    assert (a.provenance.replaced_by, a.status_changed_at) == ("C", since)


def test_online_hand_over_moves_a_quarantined_follower_with_its_chain(
    sqlite: SqliteStore, home: Path
) -> None:
    """Guard missing in `memlife/online/memory.py::_hand_over` (``r.status is
    Status.superseded``): the night's ``_repoint`` moves a quarantined source with its
    chain (tests/unit/test_guards_session36e.py); the online hand-over leaves it naming B."""
    sqlite.put_many(chain(pointing("A", "B", status=Status.quarantined)))
    mem = online(sqlite, home)
    try:
        assert mem.set_status(["B"], Status.superseded, replaced_by="C") == ["B"]
    finally:
        mem.close()
    a = stored(sqlite, "A")
    assert (a.status, a.provenance.replaced_by) == (Status.quarantined, "C")


# -- 1b. apply/appliers/status.py: a batch stopped part-way still hands over ------------------
def test_a_supersede_batch_stopped_part_way_hands_over_what_it_superseded(home: Path) -> None:
    """Attacks ``_hand_over(ex, ops, replaced, out)`` before ``raise ShardStopped`` in
    `memlife/apply/appliers/status.py::set_status`: m-a (itself a replacement: S1 points to
    it) and m-b are superseded by m-r in one batch; the store stops after m-a (a quota).
    m-a's supersede is receipted tonight, so S1 must move to m-r now: no later night
    supersedes m-a again. Mutant: the hand-over skipped on a stop -> S1 keeps naming the
    superseded m-a for good (invariant 3)."""
    from memlife.apply import Tally
    from memlife.apply.lifecycle import run_lifecycle
    from memlife.audit import FileSink
    from memlife.journal import OpKind, OpState, Outcome, open_journal
    from tests.unit.test_guards_session33 import rec as rec36
    from tests.unit.test_guards_session36e import StatusQuotaAfterOne, executor, superseded_by

    store = StatusQuotaAfterOne(home / "memlife.db")
    try:
        env = (store, open_journal(store), FileSink(home / "receipts"))
        s1 = superseded_by(rec36("S1", "Likes tea."), "m-a")
        a = rec36("m-a", "Likes tea a lot.", provenance={"supersedes": ["S1"]})
        b = rec36("m-b", "Likes tea very much.")
        r = rec36("m-r", "Likes green tea.", provenance={"supersedes": ["m-a", "m-b"]})
        store.put_many([s1, a, b, r])
        ex = executor(env)
        ops = ex.journal.plan([ex.new_op(OpKind.supersede, "u-1", x.namespace, x.id,
                                         ["SAME_SUBJECT"], x.sha256, replacement="m-r")
                               for x in (a, b)])  # fmt: skip
        done = {o.record_id: o for o in run_lifecycle(ex, ops, Tally())}
        assert (done["m-a"].state, done["m-a"].outcome) == (OpState.RECEIPTED, Outcome.superseded)
        assert done["m-b"].state is OpState.FAILED
        assert stored(store, "S1").provenance.replaced_by == "m-r"
    finally:
        store.close()


# -- 2. run_planning.py KEEP_READ --------------------------------------------------------------
CAP = 3  # KEEP_READ for these tests: the boundary without thousands of records
NOTES = [
    ("d-1", "Has a dog named Rex.", 30),
    ("d-2", "Has a dog named Rex.", 10),
    ("c-1", "Lives in Lisbon near the river.", 12),
    ("p-1", "Plays the cello on Sundays.", 7),
]


def seed_notes(home: Path, n: int) -> list[MemoryRecord]:
    from tests.support.gate import rec as gate_rec
    from tests.unit.test_gate_staged import seed

    recs = [gate_rec(rid, "notes", text, age=age) for rid, text, age in NOTES[:n]]
    seed(home, recs)
    return recs


@pytest.mark.parametrize("n", [CAP - 1, CAP, CAP + 1])
def test_inference_hands_a_shard_to_staging_up_to_keep_read_records(
    home: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    """Attacks ``len(got) <= keep_read`` in `memlife/inferred/cached.py::_infer` (with
    run_planning.KEEP_READ): a shard of subjectless records up to the cap hands all of them
    to staging (read once); one over the cap hands none (staging reads them itself), never a
    part. Mutants: ``<`` (the cap-sized shard re-read), the check dropped (memory unbounded)."""
    import memlife.run_planning as rp
    from memlife.pipeline import RunConfig
    from memlife.run_start import start_run
    from memlife.run_types import Shard
    from tests.support.gate import ACTOR

    monkeypatch.setattr(rp, "KEEP_READ", CAP)
    recs = seed_notes(home, n)
    ctx = start_run(RunConfig(dry_run=True, store=f"sqlite:///{home / 'memlife.db'}"))
    read: dict[str, MemoryRecord] = {}
    with SqliteStore(home / "memlife.db") as store:
        rp.plan_shard(ctx, store, Shard(ACTOR, recs[0].namespace), None, read)
    assert read == ({r.id: r for r in recs} if n <= CAP else {})


@pytest.mark.parametrize("cap", [CAP, CAP + 1])
def test_a_shard_over_keep_read_is_staged_as_one_under_it(
    home: Path, monkeypatch: pytest.MonkeyPatch, cap: int
) -> None:
    """Attacks the hand-over of ``read`` (run_planning.process_batch -> group_reads
    ``GroupReads._load``, ``rid not in known``) at ``KEEP_READ``: four subjectless records,
    the cap at 3 (nothing handed over: staging reads them) or 4 (all handed over), and two
    with a subject (never handed over). Either way the duplicates d-1/d-2 and t-1/t-2 each
    merge into one replacement and the others stay active. Mutant: staging reads nothing
    once something was handed over -> the tea pair is never staged."""
    import memlife.run_planning as rp
    from memlife.pipeline import RunConfig, run_local
    from tests.support.gate import NOW
    from tests.support.gate import rec as gate_rec
    from tests.support.lifecycle import gate_cases
    from tests.unit.test_gate_staged import seed

    monkeypatch.setattr(rp, "KEEP_READ", cap)
    seed_notes(home, 4)
    tea = [gate_rec(f"t-{i}", "notes", "Drinks green tea.", subject="tea", age=5 + i)
           for i in (1, 2)]  # fmt: skip
    seed(home, tea)  # with a subject: never read by inference, so never handed over
    night = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=gate_cases(home / "memlife.db")))
    assert (night.lifecycle["consolidated"], night.lifecycle["superseded"]) == (2, 4)
    with SqliteStore(home / "memlife.db") as store:
        got = {r.id: r for r in store.iter_all()}
    new = {r.content: r for r in got.values() if r.id.startswith("r-")}
    assert sorted(new) == ["Drinks green tea.", "Has a dog named Rex."]
    for text, ids in (
        ("Has a dog named Rex.", ["d-1", "d-2"]),
        ("Drinks green tea.", ["t-1", "t-2"]),
    ):
        assert (new[text].status, sorted(new[text].provenance.supersedes)) == (Status.active, ids)
        assert [got[i].provenance.replaced_by for i in ids] == [new[text].id] * 2
    assert {got[i].status for i in ("c-1", "p-1")} == {Status.active}


# -- 3. consolidate/anthropic.py: the outage streak --------------------------------------------
def test_proxy_pages_in_a_row_stop_the_run_sending(messages_server: Any) -> None:
    """Guard missing in `memlife/consolidate/anthropic.py::_call`/``_answer``: the module
    says a 200 whose body is no message is MODEL_UNAVAILABLE and that after OUTAGE_CALLS
    groups in a row found the service unavailable, later groups are not sent. ``_call``
    sets ``self._outage = 0`` as soon as the SDK returns; ``_answer`` then finds no message
    and raises MODEL_UNAVAILABLE without counting it."""
    from memlife.consolidate import ConsolidationError
    from memlife.consolidate.anthropic import OUTAGE_CALLS
    from memlife.embed import default_embedder
    from tests.fakes.messages_api import raw_reply
    from tests.unit.test_consolidation_adversarial import PAIR, _make

    messages_server.set_handler(
        lambda body: raw_reply("<html>Proxy login required</html>", content_type="text/html")
    )
    c = _make(messages_server, default_embedder())
    for _ in range(OUTAGE_CALLS + 3):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert len(messages_server.message_requests) == OUTAGE_CALLS


def test_an_answer_without_usage_counts_its_last_partial_token(messages_server: Any) -> None:
    """Attacks ``-(-chars // CHARS_PER_TOKEN)`` in `memlife/consolidate/anthropic.py::_usage`:
    an answer whose ``usage`` a proxy dropped is estimated at 4 characters a token, rounded
    up (275 characters: 69 tokens, not 68). Mutant: floor division under-counts it."""
    import json

    from memlife.consolidate.estimate import CHARS_PER_TOKEN
    from memlife.consolidate.prompts import TOOL_NAME
    from memlife.embed import default_embedder
    from tests.fakes.messages_api import raw_reply
    from tests.unit.test_consolidate_anthropic import COFFEE, GOOD, make

    chars = len(json.dumps(GOOD))
    assert chars % CHARS_PER_TOKEN  # a partial last token, or the test holds nothing
    body = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{"type": "tool_use", "id": "tu_1", "name": TOOL_NAME, "input": GOOD}],
        "stop_reason": "tool_use", "stop_sequence": None,
    }  # fmt: skip
    messages_server.enqueue(raw_reply(json.dumps(body)))
    result = make(messages_server, default_embedder()).consolidate(COFFEE)
    assert result.usage_estimated
    assert result.output_tokens == chars // CHARS_PER_TOKEN + 1


def test_a_consolidator_with_no_concurrency_is_refused() -> None:
    """Attacks ``max_concurrency < 1`` in `AnthropicConsolidator.__init__`: a limit of 0 is
    a BoundedSemaphore(0), on which every group's call would wait for ever (the run hangs
    under its lease). Mutant ``< 0``: accepted."""
    from memlife.consolidate.anthropic import AnthropicConsolidator

    for bad in (0, -1):
        with pytest.raises(ValueError, match="max_concurrency"):
            AnthropicConsolidator(api_key="sk-ant-fake", max_concurrency=bad)
    assert AnthropicConsolidator(api_key="sk-ant-fake", max_concurrency=1).max_concurrency == 1


def test_a_too_large_request_naming_the_model_is_the_groups_not_the_runs(
    messages_server: Any,
) -> None:
    """Attacks ``exc.status_code == 400`` in `AnthropicConsolidator._configuration_error`:
    only a 400 naming the model is the run's configuration (sticky: nothing more is sent).
    A 413 for one group's request, whose text names the model, is that group's
    (MODEL_REJECTED); the next group is still sent. Mutant ``>= 400``: the run stops
    consolidating for one oversized group."""
    from memlife.consolidate import ConsolidationError
    from memlife.embed import default_embedder
    from tests.fakes.messages_api import error_reply
    from tests.unit.test_consolidate_anthropic import COFFEE, GOOD, answer, make

    messages_server.enqueue(
        error_reply(413, "request_too_large", "Request too large for claude-haiku-4-5"),
        answer(GOOD),
    )
    c = make(messages_server, default_embedder())
    with pytest.raises(ConsolidationError) as info:
        c.consolidate(COFFEE)
    assert info.value.code == "MODEL_REJECTED" and not info.value.retryable
    assert c.consolidate(COFFEE).summary == GOOD["summary"]
    assert len(messages_server.message_requests) == 2


def test_re_pointing_twice_in_one_run_on_agentcore_follows_its_own_moves(
    harness: Any, home: Path
) -> None:
    """Attacks ``frontier.setdefault(sid, level[named][1:])`` in
    `memlife/apply/appliers/status.py::_repoint` on AgentCore, which has no lookup by
    replaced_by: what points where is paged once a run (orphans.pointing_to) and kept
    current by the run's writes. S1 was superseded by R1 by a reviewer (listed by no one).
    Batch 1 supersedes R1 by R2: S1 moves to R2. Batch 2, same run, supersedes R2 by R3: S1
    moves to R3. Mutant: records found only by their replaced_by are not followed -> S1
    keeps naming a superseded record (invariant 3). (Dropping ``note_pointers`` there is
    equivalent here: the stale S1 -> R1 is still reached through R1, which points to R2.)"""
    from memlife.audit import FileSink
    from memlife.journal import OpKind, OpState, Outcome, SqliteJournal
    from tests.unit.test_guards_session33 import rec as rec36
    from tests.unit.test_guards_session36e import executor, plan, run_one, superseded_by

    store = harness.store()
    env = (store, SqliteJournal.at(home / "journal.db"), FileSink(home / "receipts"))
    r1 = rec36("R1", "Likes green tea.")
    store.put_many([superseded_by(rec36("S1"), "R1"), r1,
                    rec36("R2", "Likes green tea daily.", provenance={"supersedes": ["R1"]}),
                    rec36("R3", "Likes green tea at noon.", provenance={"supersedes": ["R2"]})])  # fmt: skip
    ex = executor(env)
    for old, new in ((r1, "R2"), (stored(store, "R2"), "R3")):
        done = run_one(ex, plan(ex, OpKind.supersede, old, ["SAME_SUBJECT"], replacement=new))
        assert (done.state, done.outcome) == (OpState.RECEIPTED, Outcome.superseded)
        assert stored(store, "S1").provenance.replaced_by == new


def test_an_online_supersede_by_a_record_of_another_namespace_is_refused(
    sqlite: SqliteStore, home: Path
) -> None:
    """Attacks ``(rec.actor_id, rec.namespace) != (by.actor_id, by.namespace)`` in
    `memlife/online/memory.py::_check_replacement` (invariant 8): A cannot be superseded by
    the same actor's record in another namespace, nor by itself; nothing is written.
    Mutant (actor compared only): A is superseded by a record of /users/u-1/notes."""
    from memlife.errors import InputError

    a = rec("A")
    other = rec("N", "Likes green tea.", namespace="/users/u-1/notes")
    sqlite.put_many([a, other])
    mem = online(sqlite, home)
    try:
        for by in ("N", "A"):
            with pytest.raises(InputError, match="cannot replace"):
                mem.set_status(["A"], Status.superseded, replaced_by=by)
    finally:
        mem.close()
    assert stored(sqlite, "A") == a
