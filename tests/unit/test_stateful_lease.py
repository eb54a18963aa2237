"""Session 40: a stateful (model-based) test of one lifecycle writer per store and of the
operation journal's state machine, with two or three workers at once (DynamoDB in moto).

The machine models workers (each its own process: its own ``memlife.lease.OWNER``, its own
``_HELD``, its own wall clock ``T + offset`` and its own TTL) sharing one store's DynamoDB
lease, and two journal writers per backend (DynamoDB, SQLite) moving the same operations.
True time ``T`` is the model's; a worker's wall clock (``memlife.state.lease.time``,
``memlife.lease.utcnow``) and monotonic clock (``memlife.lease.time``) are derived from it.
Heartbeat threads are not started: a running worker's heartbeat beats (the real
``Lease._beat``, one iteration) every third of its TTL of true time whenever time advances,
also while another worker watches a lease that looks expired (``time.sleep`` of the watch).

Rules: acquire (re-entrant when held), check the fence (``lease.fence_for``), release (a
paused worker resumes for either), pause (no beat, no action), kill (stops for good),
restart (a new process), step a worker's wall clock (NTP), advance time; plan an operation, move it (APPLIED / FAILED /
RECEIPTED), optionally with another writer's move between its read and its write.

Invariants: a fence check passes only for the worker the lease item names (so never two at
once); a LeaseLost is raised only to a worker that really lost it; an acquire is refused
while the holder is running, and succeeds once a holder that no longer beats (killed or
paused) looks expired on the taker's clock (liveness); a release never frees another
worker's lease; every journal reader sees each operation exactly as the model says, never
moved backwards, and no operation is receipted twice.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import memlife.lease as lease_mod
import memlife.state.lease as dynamo_lease_mod
from memlife.errors import JournalStateError
from memlife.journal import Operation, OpKind, OpState, Outcome, SqliteJournal
from memlife.journal import operation_id as make_op_id
from memlife.journal.dynamodb import DynamoJournal
from memlife.state.dynamodb import DynamoState
from tests.support.aws_state import aws_state

EXAMPLES = int(os.environ.get("MEMLIFE_STATEFUL_EXAMPLES", "40"))
SHRINK = not os.environ.get("MEMLIFE_STATEFUL_NOSHRINK")  # a mutation hunt: no shrinking
TTLS = [0.5, 1.8, 3.0, 7.0, 60.0]  # 1.8: a TTL of a fraction of a second (session 40)
OFFSETS = [0.0, 0.0, 4.0, -4.0, 61.0, -61.0, 250.0]
MOVES = {  # the journal's state machine as documented (memlife/journal/base.py), kept apart
    OpState.PLANNED: {OpState.APPLIED, OpState.FAILED},
    OpState.FAILED: {OpState.APPLIED, OpState.FAILED},
    OpState.APPLIED: {OpState.RECEIPTED},
    OpState.RECEIPTED: set(),
}
RANK = {OpState.PLANNED: 0, OpState.FAILED: 1, OpState.APPLIED: 2, OpState.RECEIPTED: 3}


class _World:
    """True time and the worker whose code runs now (what the patched clocks read)."""

    T = 1_000_000.0
    cur: Any = None
    sleep: Callable[[float], None] = lambda s: None


W = _World()


class _NoThread:
    """The heartbeat thread memlife.lease starts: beats are driven by the machine instead."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def start(self) -> None:
        pass


class _Asked(Exception):
    pass


class _Probe:
    """A lease backend that only says whether Lease.check asked it (it then renews)."""

    def lease_renew(self, *a: Any, **k: Any) -> bool:
        raise _Asked


class _Once:
    """A Lease._stop that lets its heartbeat loop beat exactly once."""

    def __init__(self) -> None:
        self.calls = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.calls += 1
        return self.calls > 1

    def set(self) -> None:
        self.calls = 99


@dataclass
class Worker:
    name: str
    state: DynamoState
    offset: float
    ttl: float
    incarnation: int = 0
    held: dict[Any, lease_mod.Lease] = field(default_factory=dict)
    lease: lease_mod.Lease | None = None
    alive: bool = True
    paused: bool = False
    beating: bool = False
    last_beat: float = 0.0

    def __repr__(self) -> str:
        return f"<{self.name}#{self.incarnation}>"

    @property
    def owner(self) -> str:
        return f"{self.name}-host/boot/1:{4000 + self.incarnation}:n{self.incarnation}"

    @property
    def running(self) -> bool:
        return self.alive and not self.paused


@contextmanager
def as_worker(w: Worker) -> Iterator[None]:
    """Run memlife code as ``w``'s process: its owner, its held leases, its clocks, its TTL."""
    prev = W.cur
    W.cur = w
    lease_mod.OWNER, lease_mod._HELD = w.owner, w.held
    os.environ["MEMLIFE_LEASE_TTL_SECONDS"] = str(w.ttl)
    try:
        yield
    finally:
        W.cur = prev
        if prev is not None:
            lease_mod.OWNER, lease_mod._HELD = prev.owner, prev.held
            os.environ["MEMLIFE_LEASE_TTL_SECONDS"] = str(prev.ttl)


class _Store:
    """What memlife.lease asks of a remote store: a URL (its identity names the lease)."""

    url = "agentcore://mem-s40?region=us-east-1"
    identity = "agentcore://mem-s40@us-east-1"
    connection = None


STATES: list[DynamoState] = []  # one per worker, made once per test (the re-entrancy key)
COUNTER = [0]


def _op(run: str, rid: str) -> Operation:
    return Operation(
        operation_id=make_op_id(run, OpKind.delete, [rid]),
        run_id=run,
        kind=OpKind.delete,
        actor_id="u-1",
        namespace="/users/u-1/facts",
        record_id=rid,
        reasons=["HARD_EXPIRED"],
        policy_version="p1",
        content_sha256="ab" * 32,
    )


def _any(ok: Callable[[Worker], bool]) -> Callable[[Any], bool]:
    return lambda machine: any(ok(w) for w in machine.workers)


def _can_acquire(w: Worker) -> bool:
    return w.running and (w.lease is None or not w.lease.lost)


def _holding(w: Worker) -> bool:
    return w.alive and w.lease is not None


def _running_holder(w: Worker) -> bool:
    return w.running and w.lease is not None


def _alive(w: Worker) -> bool:
    return w.alive


class LeaseMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        COUNTER[0] += 1
        self.n = COUNTER[0]
        self.store = _Store()
        k = {"pk": {"S": f"lease#{self.store.identity}"}, "sk": {"S": "lease"}}
        STATES[0].ddb.delete_item(TableName=STATES[0].table, Key=k)  # the last example's
        self.workers: list[Worker] = []
        W.T, W.cur, W.sleep = 1_000_000.0, None, self._watch_sleep

    def teardown(self) -> None:
        W.cur = None

    # -- the world -------------------------------------------------------------------------
    def _item(self) -> dict[str, Any] | None:
        k = {"pk": {"S": f"lease#{self.store.identity}"}, "sk": {"S": "lease"}}
        return STATES[0].get(k)

    def _holder(self) -> str | None:
        item = self._item()
        return item["holder"]["S"] if item else None

    def _advance(self, d: float, exclude: Worker | None = None) -> None:
        """True time passes; every running worker's heartbeat beats on its own pace."""
        target = W.T + d
        last: list[tuple[float, int]] = []  # each worker's last beat due by then
        for n, w in enumerate(self.workers):
            if w.running and w.beating and w is not exclude:
                pace = w.ttl / 3
                if w.last_beat + pace <= target:  # the beats before it change nothing more
                    last.append((w.last_beat + pace * ((target - w.last_beat) // pace), n))
        for at, n in sorted(last):
            W.T = max(W.T, at)
            self._beat(self.workers[n])
        W.T = target

    def _beat(self, w: Worker) -> None:
        assert w.lease is not None
        with as_worker(w):
            w.lease._stop = _Once()  # type: ignore[assignment]
            w.lease._beat()  # the heartbeat thread's loop, one beat
        w.last_beat = W.T
        if w.lease.lost:
            w.beating = False  # its thread ended
            assert self._holder() != w.owner, f"{w.name}'s heartbeat lost a lease it holds"

    def _watch_sleep(self, seconds: float) -> None:
        """A taker watches an expired-looking lease: time passes for everyone else."""
        self.watched.append(seconds)
        self._advance(seconds, exclude=W.cur)

    # -- workers ---------------------------------------------------------------------------
    @initialize(
        ttls=st.lists(st.sampled_from(TTLS), min_size=3, max_size=3),
        offsets=st.lists(st.sampled_from(OFFSETS), min_size=3, max_size=3),
    )
    def make_workers(self, ttls: list[float], offsets: list[float]) -> None:
        self.watched: list[float] = []
        for i in range(3):
            self.workers.append(Worker(f"w{i}", STATES[i], offsets[i], ttls[i]))

    def _which(self, data: st.DataObject, ok: Callable[[Worker], bool]) -> Worker:
        return data.draw(st.sampled_from([w for w in self.workers if ok(w)]))

    @precondition(_any(_can_acquire))
    @rule(data=st.data())
    def acquire(self, data: st.DataObject) -> None:
        w = self._which(data, _can_acquire)
        if w.lease is not None:  # re-entrant within its process
            depth = w.lease.depth
            with as_worker(w):
                again = lease_mod.for_store(self.store, f"run-{w.name}", "nightly")
            assert again is w.lease and again.depth == depth + 1
            return
        item = self._item()
        holder = next((v for v in self.workers if item and v.owner == item["holder"]["S"]), None)
        wall = W.T + w.offset
        if item is None or item["holder"]["S"] == w.owner:
            expect = "ok"
        elif holder is not None and holder.running and holder.beating:
            expect = "refused"  # a live holder keeps its lease, whatever the clocks say
        else:  # killed, paused, or an earlier process of a restarted worker: no beat
            expect = "ok" if float(item["expires_at"]["N"]) < wall else "refused"
        with as_worker(w):
            try:
                got = lease_mod.for_store(self.store, f"run-{w.name}", "nightly")
            except lease_mod.LeaseHeld:
                assert expect == "refused", (
                    f"liveness: {w.name} refused a lease whose holder no longer beats"
                )
                assert self._holder() != w.owner
                return
        assert expect == "ok", f"{w.name} took over the lease of a running holder"
        assert self._holder() == w.owner
        took = item is not None and item["holder"]["S"] != w.owner
        assert (got.taken_over is not None) == took
        w.lease, w.beating, w.last_beat = got, True, W.T

    @precondition(_any(_holding))
    @rule(data=st.data())
    def check_fence(self, data: st.DataObject) -> None:
        w = self._which(data, _holding)
        w.paused = False  # a paused worker resumes: its first act is the fence before a write
        with as_worker(w):
            try:
                lease_mod.fence_for(self.store)()
            except lease_mod.LeaseLost:
                assert self._holder() != w.owner, f"{w.name} told LeaseLost while holding"
                self._drop(w)  # its run stops and gives back what it took (lease.scoped)
                return
        assert self._holder() == w.owner, (
            f"{w.name} passed its fence while {self._holder()} holds the lease"
        )

    def _drop(self, w: Worker) -> None:
        assert w.lease is not None
        before, ours = self._item(), self._holder() == w.owner
        with as_worker(w):
            while w.lease.depth > 0 and w.held:
                w.lease.release()
        w.lease, w.beating = None, False
        after = self._item()
        if ours:
            assert after is None or after["holder"]["S"] != w.owner
        else:
            assert after == before, f"{w.name}'s release changed another worker's lease"

    @precondition(_any(_holding))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        w = self._which(data, _holding)
        w.paused = False  # a paused worker resumes and gives its lease back
        lease = w.lease
        assert lease is not None
        if lease.depth > 1:
            with as_worker(w):
                lease.release()
            assert lease.depth >= 1 and w.held
            return
        self._drop(w)

    @precondition(_any(_running_holder))
    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        self._which(data, _running_holder).paused = True

    @precondition(_any(_holding))
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        self._which(data, _holding).alive = False

    @precondition(_any(lambda w: not w.alive))
    @rule(data=st.data())
    def restart(self, data: st.DataObject) -> None:
        w = self._which(data, lambda w: not w.alive)
        w.incarnation += 1
        w.held, w.lease, w.alive, w.paused, w.beating = {}, None, True, False, False

    @precondition(_any(_alive))
    @rule(data=st.data(), delta=st.sampled_from([-61.0, -3.0, 3.0, 61.0]))
    def step_clock(self, data: st.DataObject, delta: float) -> None:
        self._which(data, _alive).offset += delta  # NTP stepped its wall clock

    @rule(d=st.sampled_from([0.2, 1.0, 2.5, 10.0, 25.0, 40.0, 61.0, 200.0]))
    def advance(self, d: float) -> None:
        self._advance(d)

    @invariant()
    def one_holder_at_most(self) -> None:
        """Every worker whose fence would pass now without asking DynamoDB (its last renewal
        trusted: the real Lease.check, its backend a probe) is the lease item's holder."""
        holder = self._holder()
        for w in self.workers:
            if not w.alive or w.lease is None or w.lease.lost:
                continue
            backend, w.lease.backend = w.lease.backend, _Probe()  # type: ignore[assignment]
            try:
                with as_worker(w):
                    w.lease.check()
            except _Asked:
                continue  # it would renew first: the fence asks the truth
            finally:
                w.lease.backend = backend
            assert w.owner == holder, f"{w.name} trusts a lease {holder} holds"


class JournalMachine(RuleBasedStateMachine):
    """Two writers per backend move the same operations; a stale read may be interleaved."""

    def __init__(self) -> None:
        super().__init__()
        COUNTER[0] += 1
        self.n = COUNTER[0]
        self.tmp = tempfile.mkdtemp(prefix="s40-journal-")
        path = os.path.join(self.tmp, "journal.db")
        self.journals: dict[str, list[Any]] = {
            "dynamo": [DynamoJournal(STATES[0]), DynamoJournal(STATES[1])],
            "sqlite": [SqliteJournal.at(path), SqliteJournal.at(path)],
        }
        self.ops = [_op(f"run-s40-{self.n}", f"m-{i}") for i in range(3)]
        self.model: dict[tuple[str, int], tuple[OpState, int]] = {}
        self.seen: dict[tuple[str, int], tuple[OpState, int]] = {}
        self.receipted: dict[tuple[str, int], int] = {}

    def teardown(self) -> None:
        for j in self.journals["sqlite"]:
            j.connection.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- rules -----------------------------------------------------------------------
    @rule(b=st.sampled_from(["dynamo", "sqlite"]), j=st.integers(0, 1), k=st.integers(0, 2))
    def plan(self, b: str, j: int, k: int) -> None:
        (got,) = self.journals[b][j].plan([self.ops[k]])
        self.model.setdefault((b, k), (OpState.PLANNED, 0))
        assert (got.state, got.attempts) == self.model[(b, k)]

    @precondition(lambda self: bool(self.model))
    @rule(
        data=st.data(),
        j=st.integers(0, 1),
        to=st.sampled_from([OpState.APPLIED, OpState.FAILED, OpState.RECEIPTED]),
        other=st.none() | st.sampled_from([OpState.APPLIED, OpState.FAILED, OpState.RECEIPTED]),
    )
    def move(self, data: st.DataObject, j: int, to: OpState, other: OpState | None) -> None:
        b, k = data.draw(st.sampled_from(sorted(self.model)))
        stale, second = self.journals[b][j], self.journals[b][1 - j]
        read = self.model[(b, k)]
        moved_between = False
        if other is not None:  # the other writer moves it between stale's read and write
            real_get = stale.get

            def get_then_other_moves(oid: str) -> Operation | None:
                nonlocal moved_between
                seen: Operation | None = real_get(oid)
                stale.get = real_get
                moved_between = self._move(second, b, k, other)
                return seen

            stale.get = get_then_other_moves
        try:
            ok = self._move(stale, b, k, to, read=read, raced=lambda: moved_between)
        finally:
            stale.__dict__.pop("get", None)
        assert not (ok and moved_between), "a stale writer's move overwrote another's"

    def _move(
        self,
        j: Any,
        b: str,
        k: int,
        to: OpState,
        read: tuple[OpState, int] | None = None,
        raced: Callable[[], bool] = lambda: False,
    ) -> bool:
        state, attempts = read or self.model[(b, k)]
        allowed = to in MOVES[state]
        kw: dict[str, Any] = {}
        if to is OpState.APPLIED:
            kw = {"outcome": Outcome.deleted}
        elif to is OpState.FAILED:
            kw = {"outcome": Outcome.failed, "error": "THROTTLED"}
        try:
            j.transition(self.ops[k].operation_id, to, **kw)
        except JournalStateError:
            assert not allowed or raced(), f"{state} -> {to} refused"
            return False
        assert allowed and not raced(), f"{state} -> {to} ({'stale' if raced() else ''}) went"
        inc = 1 if to in (OpState.APPLIED, OpState.FAILED) else 0
        self.model[(b, k)] = (to, attempts + inc)
        if to is OpState.RECEIPTED:
            self.receipted[(b, k)] = self.receipted.get((b, k), 0) + 1
        return True

    @invariant()
    def journal_as_modelled(self) -> None:
        for (b, k), want in self.model.items():
            for j in self.journals[b]:
                got = j.get(self.ops[k].operation_id)
                assert got is not None and (got.state, got.attempts) == want
                prev = self.seen.get((b, k), (OpState.PLANNED, 0))
                assert RANK[got.state] >= RANK[prev[0]] and got.attempts >= prev[1], (
                    f"moved backwards: {prev} -> {(got.state, got.attempts)}"
                )
                self.seen[(b, k)] = (got.state, got.attempts)
            assert self.receipted.get((b, k), 0) <= 1, "receipted twice"


@pytest.fixture()
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoState]:
    """Moto for the whole test; the clocks, owner, held leases and heartbeat of memlife.lease
    and memlife.state.lease read the worker the machine runs as (restored afterwards)."""
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECONDS", "60")
    for var in ("MEMLIFE_STATEFUL_EXAMPLES", "MEMLIFE_STATEFUL_NOSHRINK"):
        monkeypatch.delenv(var, raising=False)  # not memlife settings
    monkeypatch.setattr(lease_mod, "OWNER", lease_mod.OWNER)
    monkeypatch.setattr(lease_mod, "_HELD", {})
    monkeypatch.setattr(
        lease_mod, "threading", SimpleNamespace(Thread=_NoThread, get_ident=threading.get_ident)
    )

    def wall() -> float:
        return W.T + (W.cur.offset if W.cur is not None else 0.0)

    clocks = SimpleNamespace(time=wall, sleep=lambda s: W.sleep(s), monotonic=lambda: W.T)
    monkeypatch.setattr(dynamo_lease_mod, "time", clocks)
    monkeypatch.setattr(lease_mod, "time", clocks)
    monkeypatch.setattr(lease_mod, "utcnow", lambda: datetime.fromtimestamp(wall(), tz=UTC))
    with aws_state("inprocess", table="memlife-s40-lease") as (url, state):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        import memlife.state as state_mod

        monkeypatch.setattr(state_mod, "_open", {url: state})
        STATES[:] = [state, DynamoState(state.settings), DynamoState(state.settings)]
        yield state
        STATES.clear()


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=True,
        phases=list(Phase) if SHRINK else [Phase.explicit, Phase.reuse, Phase.generate],
    )


def test_lease_machine(world: DynamoState) -> None:
    run_state_machine_as_test(LeaseMachine, settings=_settings(EXAMPLES, 30))


def test_journal_machine(world: DynamoState) -> None:
    run_state_machine_as_test(JournalMachine, settings=_settings(max(10, EXAMPLES // 2), 25))


# -- the real bugs the machine's author found, reduced (fixed in session 40) --------------
def _two_workers(ttl0: float, offset1: float) -> tuple[LeaseMachine, Worker, Worker]:
    m = LeaseMachine()
    m.make_workers(ttls=[ttl0, 60.0, 60.0], offsets=[0.0, offset1, 0.0])
    return m, m.workers[0], m.workers[1]


def test_a_fractional_ttl_lets_a_taker_in_while_the_holder_still_trusts_its_lease(
    world: DynamoState,
) -> None:
    """Attacks ``math.ceil`` in `memlife/lease.py::DynamoBackend._lease`: it wrote
    ``ttl_s=max(1, int(span))``, so with MEMLIFE_LEASE_TTL_SECONDS=1.8 the item said 1 s
    while the holder trusts a renewal for 0.6 s. A taker whose clock runs 4 s ahead watched
    0.5 s (half the item's ttl_s) and took the lease of a holder paused right after
    renewing, which still passed its fence without asking: two writers (invariant 9). The
    item now says 2 s: the taker watches 1 s, and the holder's trust has run out by then."""
    m, w0, w1 = _two_workers(1.8, 4.0)
    with as_worker(w0):
        w0.lease = lease_mod.for_store(m.store, "run-0", "nightly")
    w0.paused = True
    with as_worker(w1):
        w1.lease = lease_mod.for_store(m.store, "run-1", "nightly")  # after a 1 s watch
    assert m.watched == [1.0] and m._holder() == w1.owner
    with as_worker(w0), pytest.raises(lease_mod.LeaseLost):
        lease_mod.fence_for(m.store)()  # its trust ran out while watched: it asks, and lost
    m.one_holder_at_most()


def test_a_pause_between_the_put_and_the_lease_object_extends_no_trust(
    world: DynamoState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``_confirmed=asked`` in `memlife/lease.py::acquire`: the Lease was built after
    ``backend.lease_acquire`` returned, trusted from its construction. A worker paused there
    (a stopped VM) for longer than its TTL and the watch loses the lease to a taker, then
    trusted it for a third of its TTL from the resume: a write with no lease. It is trusted
    from the moment it was asked for, so its first fence after the pause asks DynamoDB."""
    m, w0, w1 = _two_workers(60.0, 0.0)
    put = lease_mod.DynamoBackend.lease_acquire

    def paused_after_the_put(self: Any, *a: Any, **k: Any) -> Any:
        out = put(self, *a, **k)
        m._advance(100.0)  # the pause: between the put and the Lease object
        return out

    monkeypatch.setattr(lease_mod.DynamoBackend, "lease_acquire", paused_after_the_put)
    asked = W.T
    with as_worker(w0):
        w0.lease = lease_mod.for_store(m.store, "run-0", "nightly")  # the put: expires +60
    assert w0.lease._confirmed == asked < W.T  # trusted from the asking, before the pause
    monkeypatch.setattr(lease_mod.DynamoBackend, "lease_acquire", put)
    with as_worker(w1):
        w1.lease = lease_mod.for_store(m.store, "run-1", "nightly")  # expired; 30 s watch
    assert m._holder() == w1.owner
    m.one_holder_at_most()
    with as_worker(w0), pytest.raises(lease_mod.LeaseLost):
        lease_mod.fence_for(m.store)()


def test_a_takeovers_watch_does_not_hold_the_process_wide_lease_lock(
    world: DynamoState,
) -> None:
    """`memlife/lease.py::acquire` calls ``backend.lease_acquire`` under ``_HELD_LOCK``; on
    DynamoDB that can sleep half the holder's TTL (60 s by default, up to 12 h with the
    maximum TTL of a day). Every other thread of the process that checks its fence
    (check_held), asks holds() or releases a lease on another store waits that long."""
    m, w0, w1 = _two_workers(60.0, 0.0)
    with as_worker(w0):
        w0.lease = lease_mod.for_store(m.store, "run-0", "nightly")
    w0.alive = False  # killed
    m._advance(61.0)
    free: list[bool] = []

    def watch(seconds: float) -> None:
        got = lease_mod._HELD_LOCK.acquire(blocking=False)  # another thread's check_held
        if got:
            lease_mod._HELD_LOCK.release()
        free.append(got)

    W.sleep = watch
    with as_worker(w1):
        lease_mod.for_store(m.store, "run-1", "nightly")
    assert free == [True]
