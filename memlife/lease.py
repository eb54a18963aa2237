"""One lifecycle writer per store: a lease with owner, run id, expiry and heartbeat.

Every writer (the nightly run, the retry run, quarantine restore/purge, erase, hold
release, import --update) takes the lease before it changes anything. It lives in the
journal backend: the store's own SQLite file for the embedded store, the journal file
beside any other store. A second writer is refused with :class:`LeaseHeld` (the CLI
prints its one line and exits 4). A heartbeat thread keeps the lease alive while its
holder works; a holder killed outright stops beating, and once its lease expires the
next writer takes it over (and says so in its receipt); a killed holder on the same host
(its pid gone) is taken over at once.

Within one process the lease is re-entrant (hold release runs an erasure inside it).
``MEMLIFE_LEASE_TTL_SECONDS`` sets the expiry (default 120 s; heartbeat every third).
"""

from __future__ import annotations

import atexit
import functools
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

from memlife.errors import MemlifeError, Reason
from memlife.model import utcnow
from memlife.settings import settings

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
EXIT_LEASE_HELD = 4
NAME = "lifecycle"


def _host_id() -> str:
    """Where a pid names one process: the hostname, and on Linux the boot and the PID
    namespace too. Two containers can share a hostname (a fixed compose hostname, host
    networking); a pid of the other one looks dead from here, and its live lease was taken."""
    parts = [socket.gethostname()]
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8])
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    except OSError:  # not Linux: the hostname alone, as before
        pass
    return "/".join(parts)


HOST_ID = _host_id()
OWNER = f"{HOST_ID}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # this process


class LeaseHeld(MemlifeError, RuntimeError):
    """Another writer holds the store's lease: nothing was started."""

    default_code = Reason.LEASE_HELD

    exit_code = EXIT_LEASE_HELD

    def __init__(self, holder: dict[str, Any]):
        self.holder = holder
        h = {k: holder.get(k, "?") for k in ("run_id", "acquired_at", "owner", "purpose",
                                                 "expires_at")}  # fmt: skip
        super().__init__(
            f"another run holds the lock: {h['run_id']} since {h['acquired_at']} "
            f"(owner {h['owner']}, {h['purpose']}; lease expires {h['expires_at']} "
            "unless renewed)"
        )


class LeaseLost(MemlifeError, RuntimeError):
    """This writer's lease expired (a pause longer than its TTL) and another writer took it
    over: it stops before its next write (invariant 9 holds for writes, not just starts)."""

    default_code = Reason.LEASE_HELD

    exit_code = EXIT_LEASE_HELD


class LeaseBackend(Protocol):
    def lease_acquire(self, name: str, owner: str, run_id: str, purpose: str, now: datetime,
                      expires: datetime, takeover: str | None = None,
                      ) -> tuple[bool, dict[str, Any] | None]:  # fmt: skip
        """(True, previous holder if it expired, or is ``takeover``, and was taken over) or
        (False, the holder)."""
        ...

    def lease_renew(self, name: str, owner: str, now: datetime, expires: datetime,
                    run_id: str | None = None) -> bool: ...  # fmt: skip

    def lease_release(self, name: str, owner: str) -> None: ...


def ttl() -> timedelta:
    return timedelta(seconds=settings().lease_ttl_seconds)


@dataclass
class Lease:
    backend: LeaseBackend
    run_id: str
    purpose: str
    ttl: timedelta
    key: Any = 0  # which backend connection (re-entrancy within this process)
    store: str | None = None  # the store it fences (stores.store_identity); None: any store
    taken_over: dict[str, Any] | None = None  # the expired holder this lease replaced
    depth: int = 1
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    lost: bool = False  # sticky: a renewal found another owner
    _confirmed: float = field(default_factory=time.monotonic)  # last renewal that held
    thread: int = field(default_factory=threading.get_ident)  # the taker (nested takes)
    # (depth, the name before): a nested taker's bind, undone when it gives its level back
    _outer: list[tuple[int, str]] = field(default_factory=list)

    def bind(self, run_id: str) -> None:
        """Name the run once its id is known (the lease is taken before the manifest). A
        nested taker's name lasts while it holds its level: once it gives it back, the lease
        names the outer taker again (a finished run named as the one under way would be
        skipped by `receipts verify latest`, audit 47a)."""
        if self.depth > 1:
            self._outer.append((self.depth, self.run_id))
        self._name(run_id)

    def _name(self, run_id: str) -> None:
        self.run_id = run_id
        now = utcnow()
        self.backend.lease_renew(NAME, OWNER, now, now + self.ttl, run_id)

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl.total_seconds() / 3):
            now, asked = utcnow(), time.monotonic()  # the renewal holds from when it was asked
            try:
                if not self.backend.lease_renew(NAME, OWNER, now, now + self.ttl):
                    self.lost = True
                    log.warning(
                        "lifecycle lease of run %s was lost (expired and taken over)", self.run_id
                    )
                    return
                self._confirmed = asked
            except Exception as exc:  # a busy database: try again next beat
                log.warning("lease heartbeat failed: %s", type(exc).__name__)

    def check(self) -> None:
        """Before a write: LeaseLost unless this process still holds the lease. A renewal
        confirmed within a third of the TTL stands (the heartbeat's own pace); an older one
        (the process was paused, e.g. a stopped VM) is renewed now or found taken over."""
        if not self.lost and time.monotonic() - self._confirmed < self.ttl.total_seconds() / 3:
            return
        # the renewal holds from when it was asked: a pause after it must not look fresh
        now, asked = utcnow(), time.monotonic()
        if self.lost or not self.backend.lease_renew(NAME, OWNER, now, now + self.ttl):
            self.lost = True
            raise LeaseLost(
                f"the lifecycle lease of run {self.run_id} was lost (it expired and another "
                "writer took it over): stopped before writing; run it again to finish"
            )
        self._confirmed = asked

    def holds(self, depth: int) -> bool:
        """Whether this process still holds the lease at ``depth`` (a nested taker's level):
        a scope that ended, however, gave its level back."""
        with _HELD_LOCK:
            return _HELD.get(self.key) is self and self.depth >= depth

    def release(self) -> None:
        self.depth -= 1
        if self.depth > 0:
            while self._outer and self._outer[-1][0] > self.depth:
                name = self._outer.pop()[1]
                try:
                    self._name(name)
                except Exception as exc:  # a busy database: the next bind or beat names it
                    self.run_id = name
                    log.warning("lease rename failed: %s", type(exc).__name__)
            return
        self._stop.set()
        with _HELD_LOCK:
            _HELD.pop(self.key, None)
        try:
            self.backend.lease_release(NAME, OWNER)
        except Exception as exc:  # expiry frees it anyway
            log.warning("lease release failed: %s", type(exc).__name__)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


_HELD: dict[Any, Lease] = {}
_HELD_LOCK = threading.Lock()
_TAKING = [threading.Lock() for _ in range(8)]  # one acquire per backend at a time, striped


def check_held(store: str | None = None) -> None:
    """Before a write to ``store`` (its store_identity): the lease this process holds on it
    is still its own (Lease.check). A lease on another store is not checked: a lease kept
    on a closed store must not stop this one's writes. A process that holds none (a
    planning worker, a test without a lease) passes; ``store=None`` checks every lease."""
    with _HELD_LOCK:
        held = list(_HELD.values())
    for lease in held:
        if store is None or lease.store is None or lease.store == store:
            lease.check()


def fence_for(store: object) -> Callable[[], None]:
    """The check a writer to ``store`` makes before each batch (check_held on its lease)."""
    return functools.partial(check_held, _identity(store))


def _identity(store: object) -> str | None:
    url = getattr(store, "url", None)
    if not isinstance(url, str):
        return None  # unknown: fenced by every lease, as before
    from memlife.stores import store_identity

    return store_identity(url)


def for_store(store: object, run_id: str, purpose: str) -> Lease:
    """The lease of ``store``, kept in its journal backend: the SQLite journal, or the
    DynamoDB state table when $MEMLIFE_STATE names one (memlife/state/lease.py)."""
    from memlife.state import uses_remote_state

    remote = uses_remote_state(store)
    if remote is not None:
        from memlife.stores import store_identity

        identity = store_identity(getattr(store, "url", None))
        remote.check_store(identity, claim=True)  # a writer binds the table to its store
        return acquire(DynamoBackend(remote, identity), run_id, purpose, store=_identity(store))
    from memlife.journal import SqliteJournal, open_journal

    if getattr(store, "connection", None) is None:  # its state lives in the home: bind it
        from memlife.state.home import check_home

        check_home(store, claim=True)
    journal = open_journal(store)  # no remote state here: the store's (or home's) SQLite file
    if not isinstance(journal, SqliteJournal):
        raise RuntimeError(f"no lease backend for {type(journal).__name__}")
    return acquire(journal, run_id, purpose, store=_identity(store))


class DynamoBackend:
    """LeaseBackend over the DynamoDB lease item (conditional writes; holder = this process)."""

    def __init__(self, state: Any, store: str):
        self.connection = (id(state), store)  # the re-entrancy key
        self.state, self.store = state, store

    def _lease(self, owner: str, span: timedelta) -> Any:
        from memlife.state.lease import DynamoLease

        # rounded up: a taker watches half the TTL the item names, which must not be shorter
        # than the third of its own TTL the holder trusts a renewal for
        ttl_s = max(1, math.ceil(span.total_seconds()))
        return DynamoLease(self.state, self.store, owner, ttl_s=ttl_s)

    def lease_acquire(self, name: str, owner: str, run_id: str, purpose: str, now: datetime,
                      expires: datetime, takeover: str | None = None,
                      ) -> tuple[bool, dict[str, Any] | None]:  # fmt: skip
        # (a dead holder is taken over at expiry only: its host is not ours to inspect)
        from memlife.state.lease import LeaseHeld as DynamoHeld

        try:
            return True, self._lease(owner, expires - now).acquire(run_id, purpose)
        except DynamoHeld as exc:
            return False, exc.item

    def lease_renew(self, name: str, owner: str, now: datetime, expires: datetime,
                    run_id: str | None = None) -> bool:  # fmt: skip
        from memlife.state.lease import LeaseHeld as DynamoHeld

        try:
            self._lease(owner, expires - now).renew(run_id)
            return True
        except DynamoHeld:
            return False

    def lease_release(self, name: str, owner: str) -> None:
        self._lease(owner, ttl()).release()


def acquire(backend: LeaseBackend, run_id: str, purpose: str, store: str | None = None) -> Lease:
    """Take the store's lifecycle lease, or raise LeaseHeld naming the holder. ``store``
    (its store_identity) is what the lease fences; None: every store's writes."""
    conn = getattr(backend, "connection", backend)
    key = conn if isinstance(conn, tuple) else id(conn)
    # one taker per backend in this process; the take itself (a DynamoDB takeover watches
    # for half a TTL) holds no lock other threads' fences and releases need. Striped by the
    # store where known: two backends of one store (two spellings of MEMLIFE_STATE) must
    # take in turn, or both pass _same_store before either is held (audit 49a)
    with _TAKING[hash(store if store is not None else key) % len(_TAKING)]:
        with _HELD_LOCK:
            held = _HELD.get(key) or _same_store(store)
            if held is not None and held.thread != threading.get_ident():
                # another run of this process (a second flow run, a thread of an app) holds
                # the store's lease through its own connection: the backend knows only the
                # process, and would hand it the row; its release would then drop the first's
                raise LeaseHeld({"owner": OWNER, "run_id": held.run_id, "purpose": held.purpose,
                                 "acquired_at": "in this process"})  # fmt: skip
            if held is not None:  # this thread holds it already (erase inside hold release)
                held.depth += 1
                return held
        now, asked = utcnow(), time.monotonic()  # trusted from the asking, not the answer
        span = ttl()
        ok, other = backend.lease_acquire(NAME, OWNER, run_id, purpose, now, now + span)
        if not ok and other and dead_here(other.get("owner", "")):
            # its holder was a process on this machine that no longer exists (killed):
            # no need to wait for the expiry
            ok, other = backend.lease_acquire(NAME, OWNER, run_id, purpose, now, now + span,
                                              takeover=other["owner"])  # fmt: skip
        if not ok:
            raise LeaseHeld(other or {})
        lease = Lease(backend, run_id, purpose, span, key=key, taken_over=other, store=store,
                      _confirmed=asked)  # fmt: skip
        lease._thread = threading.Thread(target=lease._beat, name="memlife-lease", daemon=True)
        lease._thread.start()
        with _HELD_LOCK:
            _HELD[key] = lease
        return lease


def _same_store(store: str | None) -> Lease | None:
    """A lease this process holds on ``store`` through another backend connection."""
    if store is None:
        return None
    return next((h for h in _HELD.values() if h.store == store), None)


def scoped(fn: Callable[P, R]) -> Callable[P, R]:
    """Give back, when ``fn`` returns or raises, every lease taken inside it (and only those)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        # this thread's leases only: another thread's (a night of another store, taken
        # while fn ran) is not fn's to give back (audit 49a: its row went, two writers)
        me = threading.get_ident()
        with _HELD_LOCK:
            before = {k: lease.depth for k, lease in _HELD.items() if lease.thread == me}
        try:
            return fn(*args, **kwargs)
        finally:
            with _HELD_LOCK:
                mine = [(k, lease) for k, lease in _HELD.items() if lease.thread == me]
            for k, lease in mine:
                while _HELD.get(k) is lease and lease.depth > before.get(k, 0):
                    lease.release()

    return wrapper


def dead_here(owner: str) -> bool:
    """True when ``owner`` (host:pid:nonce) names a process of this host, boot and PID
    namespace that is gone. Anything else (another container, an owner written before the
    host id had more than the hostname) waits for the lease to expire."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != HOST_ID or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, not ours to signal
        return False
    return False


def live_run(journal: Any, store: object) -> str | None:
    """The run holding ``store``'s lease, read without taking it from ``journal`` (a chain
    reader: memlife.journal.open_chain_reader): None when the lease is free, expired, or
    held by a process of this host that is gone. ``receipts verify latest`` asks it: a
    night under way has advanced the chain but sealed nothing yet."""
    if hasattr(journal, "state"):  # the DynamoDB state table (memlife/state/lease.py)
        from memlife.state.dynamodb import key

        item = journal.state.get(key(f"lease#{_identity(store)}", "lease")) or {}
        if float(item.get("expires_at", {}).get("N", "0")) < time.time():
            return None
        owner, run_id = item.get("holder", {}).get("S", ""), item.get("run_id", {}).get("S")
    else:
        from memlife.journal.sqlite import has_table

        with journal.lock:
            if not has_table(journal.connection, "leases"):
                return None
            row = journal.connection.execute(
                "SELECT owner, run_id, expires_at FROM leases WHERE name=?", (NAME,)
            ).fetchone()
        if row is None or row[2] <= utcnow().isoformat():
            return None
        owner, run_id = row[0], row[1]
    return None if dead_here(owner) else run_id


@atexit.register
def _release_all() -> None:  # a normal exit (or an unhandled error) frees the lease at once
    for lease in list(_HELD.values()):
        lease.depth = 1
        lease.release()
