"""The access ledger: who read which memory when, as day-partitioned Parquet files.

Layout (hive partitioning, readable by pyarrow.dataset, DuckDB, Athena, Spark)::

    <root>/date=YYYY-MM-DD/part-<uuid>.parquet      rows of SCHEMA, day of accessed_at (UTC)
    <root>/date=YYYY-MM-DD/part-ct-<sha256>.parquet one CloudTrail log file's rows of the day
    <root>/_ingested/cloudtrail/<sha256>            markers: CloudTrail log files already read,
                                                    by full key (before: by base name), and
                                                    the days of each (memlife/ledger_ingest.py;
                                                    the events are read by memlife.cloudtrail)

``root`` defaults to ``$MEMLIFE_HOME/ledger``. Rows are ``{actor_id, namespace, record_id,
accessed_at, rank, query_sha256}``: the query is kept only as its sha256 (it says which
hits came from one query without keeping what the user asked). Appends are buffered and
written on :meth:`AccessLedger.flush`: also when the buffer reaches ``flush_rows``, when its
oldest row is ``flush_seconds`` old (a timer thread, started per burst), on close and at
interpreter exit. A process killed (SIGKILL) before a flush loses at most that window: the
ledger feeds scoring, it is not an audit trail. Files are written under a dot-name and renamed, so readers never
see half a file.

Nightly scoring reads :meth:`AccessLedger.actor_stats` (every read's time, up to the run's
cutoff) and folds it into the planning views by actor and record id, counting only reads
since each record's creation (memlife/ledger_merge.py). The store's own ``access_count``
never includes ledger hits (recall does not write counts back to the store), so the merge
adds counts; if counts are ever persisted back into the store, the merge must start after
the last persisted read.

Erasure calls :meth:`AccessLedger.erase`: the files holding those record ids are rewritten
without their rows.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import re
import threading
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from memlife import cloudtrail, ledger_ingest
from memlife.cloudtrail import IngestReport as IngestReport  # re-exported
from memlife.cloudtrail import actor_from_namespace as actor_from_namespace  # re-exported
from memlife.ledger_merge import ActorStats, reads_by_record
from memlife.ledger_parts import (
    REPLACES,
    REPLACING,
    access_problem,
    live_parts,
    readable,
    replaced,
    settled,
)
from memlife.model import utcnow
from memlife.settings import settings
from memlife.text import query_sha256 as query_sha256  # re-exported

SCHEMA = pa.schema(
    [
        pa.field("actor_id", pa.string(), nullable=False),
        pa.field("namespace", pa.string(), nullable=False),
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("accessed_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("rank", pa.int32()),  # 1 = best hit; null for a direct read (GetMemoryRecord)
        pa.field("query_sha256", pa.string()),  # null when there was no query
    ]
)
_PARTITION = ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive")
_DATASET_SCHEMA = SCHEMA.append(pa.field("date", pa.string()))

AccessStats = dict[str, tuple[datetime, int]]  # record_id -> (last accessed, count)


def default_root() -> Path:
    return settings().home / "ledger"


@dataclass(frozen=True)
class Access:
    actor_id: str
    namespace: str
    record_id: str
    accessed_at: datetime
    rank: int | None = None
    query_sha256: str | None = None


def cloudtrail_accesses(
    event: Mapping[str, Any],
    actor_resolver: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> tuple[list[Access], str | None]:
    """Ledger rows for one AgentCore read event, and why there are none (or None)."""
    hits, why = cloudtrail.read_hits(event, actor_resolver)
    return [Access(*hit) for hit in hits], why


def names_matter(part: str) -> bool:
    """Whether an emptied part must leave an empty one naming it: an ingest's part (a rerun
    of a killed ingest writes it again under the same name) or one that names others (they
    may include one). A part of appended rows has a fresh name and nothing to keep."""
    return part.startswith((REPLACING, ledger_ingest.PART))


class AccessLedger:
    """Buffered writer and reader of the access ledger (thread-safe)."""

    def __init__(
        self,
        root: str | Path | None = None,
        *,
        flush_rows: int = 1000,
        flush_seconds: float | None = 30.0,
    ) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.flush_rows = flush_rows
        # a long-lived agent's accesses reach the nightly run within this (None: never by age)
        self.flush_seconds = flush_seconds
        self._buffer: list[Access] = []
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._stores: list[Any] = []  # whose erasures this ledger's writes honour
        _LIVE.add(self)  # flushed at interpreter exit, if still buffering

    def watch_erasures(self, store: Any, watch: bool = True) -> None:
        """Rows of records ``store``'s erasures removed are not written, and rows an erasure
        committed while they were being written are scrubbed after (its own scrub read the
        files before they existed): a buffered access outlives no erasure."""
        with self._lock:  # one entry per watcher: one's end leaves the others' watch
            if watch:
                self._stores.append(store)
            elif (
                at := next((i for i, s in enumerate(self._stores) if s is store), None)
            ) is not None:
                del self._stores[at]

    # -- writing ---------------------------------------------------------------------------
    def append(
        self,
        actor_id: str,
        namespace: str,
        record_id: str,
        *,
        rank: int | None = None,
        query_sha256: str | None = None,
        at: datetime | None = None,
    ) -> None:
        """Buffer one access; ``query_sha256`` is a hash (see :func:`query_sha256`), never text."""
        if query_sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", query_sha256):
            raise ValueError("query_sha256 must be a sha256 hex digest, not query text")
        if problem := access_problem(actor_id, namespace, record_id, rank):  # else buffered,
            raise ValueError(problem)  # it failed every later flush of this process
        when = (at or utcnow()).astimezone(UTC)
        self.extend([Access(actor_id, namespace, record_id, when, rank, query_sha256)])

    def extend(self, rows: Iterable[Access]) -> None:
        with self._lock:
            self._buffer.extend(rows)
            if len(self._buffer) >= self.flush_rows:
                self.flush()
            elif self._buffer and self.flush_seconds is not None:  # armed again after a failure
                self._start_timer(self.flush_seconds)

    def _start_timer(self, seconds: float) -> None:
        """One daemon timer per burst (not per row); it holds only a weak reference, so an
        unused ledger is still collected, and never keeps the process alive."""
        if self._timer is not None and self._timer.is_alive():
            return
        timer = threading.Timer(seconds, _flush_weak, args=(weakref.ref(self),))
        timer.daemon = True
        self._timer = timer
        timer.start()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._buffer)

    def flush(self) -> int:
        """Write buffered rows, one new file per day touched; returns rows written. A day
        that fails goes back to the buffer with the days after it, never the days written."""
        with self._lock:
            rows, self._buffer = self._buffer, []

        def put_back(rest: list[Access]) -> None:
            with self._lock:  # not written: back in front of what came meanwhile
                self._buffer[:0] = rest

        watched = list({id(s): s for s in self._stores}.values())  # each store once
        written, _ = ledger_ingest.write_checked(self, rows, watched, self._write_new, put_back)
        return len(written)

    def _write_new(self, day: str, rows: list[Access]) -> bool:
        self._write_day(day, _table(rows))
        return True

    def add_rows(self, table: pa.Table) -> int:
        """Rows already in the ledger's schema (an import), one new part per day touched."""
        if table.num_rows == 0:
            return 0
        days = pc.strftime(table["accessed_at"], "%Y-%m-%d")
        for day in sorted(set(days.to_pylist())):
            self._write_day(day, table.filter(pc.equal(days, day)))
        return int(table.num_rows)

    def _write_day(self, day: str, table: pa.Table) -> None:
        """One new part file in the day's partition (S3AccessLedger: one object)."""
        self._write_file(self.root / f"date={day}", table)

    def _write_named(self, day: str, name: str, table: pa.Table) -> None:
        """The part ``name`` of the day's partition, replaced if there (S3AccessLedger too)."""
        self._write_file(self.root / f"date={day}", table, name)

    def _ingested(self, name: str) -> bool:
        return self._marker(name).exists()

    def _mark_ingested(self, name: str) -> None:
        marker = self._marker(name)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(name + "\n", encoding="utf-8")

    def _marker(self, name: str) -> Path:
        return self.root / "_ingested" / "cloudtrail" / hashlib.sha256(name.encode()).hexdigest()

    @staticmethod
    def _write_file(folder: Path, table: pa.Table, name: str | None = None) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        name = name or f"part-{uuid.uuid4().hex}.parquet"
        tmp = folder / f".{name}.tmp"  # dot-names are invisible to dataset discovery
        pq.write_table(table, tmp)
        final = folder / name
        os.replace(tmp, final)
        return final

    def close(self) -> None:
        self.flush()

    def __del__(self) -> None:
        # a ledger dropped unclosed (a Memory never closed) still writes what it holds
        if getattr(self, "_buffer", None):
            _flush_weak(weakref.ref(self))

    def __enter__(self) -> AccessLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------
    def files(self) -> Sequence[Path | str]:
        """The stored parts, day by day: file paths here, object keys in the S3 ledger."""
        return self._paths()

    def _paths(self) -> list[Path]:
        """The live parts (memlife/ledger_parts.py)."""
        return live_parts(self.root)

    def _sweep(self) -> None:
        """Remove the parts another one replaces (what a crash left; under the lease)."""
        if self.root.is_dir():
            every = sorted(self.root.glob("date=*/part-*.parquet"))
            for stale in replaced([p for p in every if readable(p)]):
                stale.unlink(missing_ok=True)

    @staticmethod
    def _write_replacing(folder: Path, table: pa.Table, parts: Sequence[Path]) -> None:
        """A part that replaces ``parts`` (named in its metadata), written, then theirs
        removed: a crash in between leaves both, and readers skip the replaced ones. It also
        names what they replaced: an ingest killed between its part and its day marker
        writes that part again on its rerun, and after two rewrites of it (two erasures,
        two compactions) nothing named it any more, so its rows counted twice."""
        names = sorted({p.name for p in parts} | {q.name for q in replaced(parts)})
        digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:32]
        name = f"{REPLACING}{digest}.parquet"
        tmp = folder / f".{name}.tmp"
        pq.write_table(table.replace_schema_metadata({REPLACES: json.dumps(names).encode()}), tmp)
        os.replace(tmp, folder / name)
        for p in parts:
            p.unlink(missing_ok=True)

    def compact(
        self, min_files: int = 2, small_bytes: int = 16 << 20, before: str | None = None
    ) -> dict[str, int]:
        """Fold each day's parts into one; ``before`` (YYYY-MM-DD): only the days before it
        (online processes still append to today's). A long-lived agent writes a part per
        burst of recalls and every night reads them all: 4,000 parts took 5 s to read.
        Parts of ``small_bytes`` or more stay as they are. Returns {day: parts folded}."""
        self.flush()
        done: dict[str, int] = {}
        with self._lock:
            self._sweep()
            by_day: dict[Path, list[Path]] = {}
            for p in self._paths():
                day = p.parent.name.removeprefix("date=")
                if (before is None or day < before) and p.stat().st_size < small_bytes:
                    by_day.setdefault(p.parent, []).append(p)
            for folder, parts in sorted(by_day.items()):
                if len(parts) < min_files:
                    continue
                table = pa.concat_tables([pq.read_table(p, schema=SCHEMA) for p in parts])
                self._write_replacing(folder, table, parts)
                done[folder.name.removeprefix("date=")] = len(parts)
        return done

    def dataset(self, parts: Sequence[Path] | None = None) -> ds.Dataset:
        return ds.dataset(
            [str(p) for p in (self._paths() if parts is None else parts)],
            schema=_DATASET_SCHEMA,
            format="parquet",
            partitioning=_PARTITION,
            partition_base_dir=str(self.root),
        )

    def read(self, actor_id: str | None = None, since: datetime | None = None) -> pa.Table:
        """Ledger rows (buffered ones flushed first), optionally for one actor / since a time."""
        self.flush()
        if not self.files():
            return SCHEMA.empty_table()
        flt = None
        if actor_id is not None:
            flt = pc.field("actor_id") == actor_id
        if since is not None:
            since = since.astimezone(UTC)
            cond = (pc.field("date") >= since.date().isoformat()) & (
                pc.field("accessed_at") >= pa.scalar(since, type=SCHEMA.field("accessed_at").type)
            )
            flt = cond if flt is None else flt & cond
        # a part rewritten by another process between the listing and the read: list again
        return settled(self._paths, lambda ps: self.dataset(ps).to_table(SCHEMA.names, flt))

    def access_stats(
        self, actor_id: str | None = None, since: datetime | None = None
    ) -> AccessStats:
        """``{record_id: (last accessed_at, number of accesses)}`` over the ledger (every
        actor's rows under one id add up: scoring reads :meth:`actor_stats`)."""
        return {rid: got for (rid,), got in self._stats(("record_id",), actor_id, since).items()}

    def actor_stats(self, until: datetime | None = None) -> ActorStats:
        """``{(actor_id, record_id): every read's time}``: what nightly scoring merges (an
        id another actor's removed record had is not this one's, and a record counts only
        the reads since its creation). ``until``: reads after it are left out, so a rerun
        of a night reads what its first run read."""
        table = self.read().select(["actor_id", "record_id", "accessed_at"])
        if until is not None:
            at = pa.scalar(until.astimezone(UTC), type=SCHEMA.field("accessed_at").type)
            table = table.filter(pc.less_equal(table.column("accessed_at"), at))
        return reads_by_record(table)

    def _stats(
        self, keys: tuple[str, ...], actor_id: str | None, since: datetime | None
    ) -> dict[tuple[str, ...], tuple[datetime, int]]:
        table = self.read(actor_id, since)
        if table.num_rows == 0:
            return {}
        agg = table.group_by(list(keys)).aggregate(
            [("accessed_at", "max"), ("accessed_at", "count")]
        )
        cols = zip(*(agg.column(k).to_pylist() for k in keys), strict=True)
        last = agg.column("accessed_at_max").to_pylist()
        count = agg.column("accessed_at_count").to_pylist()
        return {
            tuple(k): (t.astimezone(UTC), int(c)) for k, t, c in zip(cols, last, count, strict=True)
        }

    # -- erasure ---------------------------------------------------------------------------
    def erase(self, record_ids: Iterable[str], actor_id: str | None = None) -> int:
        """Remove every row of these records (buffer and files); returns rows removed.
        ``actor_id``: that actor's rows only (an id may be another actor's record too: an
        erasure of one tenant's record never touches another's reads).

        Only files that hold one of the ids are rewritten (new file written, then the old
        one removed); a file left empty is removed, or left as an empty part where its
        name must stay known (:func:`names_matter`).
        """
        ids = set(record_ids)
        if not ids:
            return 0
        removed = 0
        with self._lock:
            self._sweep()  # a replaced part a crash left behind holds the rows too
            kept = [r for r in self._buffer
                    if r.record_id not in ids or actor_id not in (None, r.actor_id)]  # fmt: skip
            removed += len(self._buffer) - len(kept)
            self._buffer = kept
            id_array = pa.array(sorted(ids), type=pa.string())
            for part, table in self._parts():
                hit = pc.is_in(table.column("record_id"), value_set=id_array)
                if actor_id is not None:
                    hit = pc.and_(hit, pc.equal(table.column("actor_id"), actor_id))
                n_hit = pc.sum(hit).as_py() or 0
                if not n_hit:
                    continue
                self._replace_part(part, table.filter(pc.invert(hit)))
                removed += n_hit
        return removed

    # The storage under erase (the S3 ledger overrides these two: object keys, not paths).
    def _parts(self) -> Iterator[tuple[str, pa.Table]]:
        """Each stored part with its rows."""
        for path in self._paths():
            yield str(path), pq.read_table(path, schema=SCHEMA)

    def _replace_part(self, part: str, rest: pa.Table) -> None:
        """``rest`` takes the place of ``part``: written first, then the old part goes. It
        names the part it replaces (a crash before the unlink leaves both) and what that one
        replaced, even when empty: an ingest killed before its day marker writes its part
        again on the rerun, and a removed part named it no more."""
        path = Path(part)
        if rest.num_rows or names_matter(path.name):
            self._write_replacing(path.parent, rest, [path])
        else:
            path.unlink()

    # -- CloudTrail ------------------------------------------------------------------------
    def ingest_cloudtrail(
        self,
        source: str | Path,
        *,
        actor_resolver: Callable[[Mapping[str, Any]], str | None] | None = None,
        s3_client: Any = None,
        force: bool = False,
        store: Any = None,
    ) -> IngestReport:
        """Read AgentCore memory reads from CloudTrail data-event log files into the ledger.

        ``source`` is a local folder (searched recursively) or ``s3://bucket/prefix``
        (boto3; ``s3_client`` overrides the default client). Files are the gzipped JSON
        objects CloudTrail delivers (``{"Records": [...]}``); ``.json`` files are read too.
        A log file already ingested is skipped (a marker per full key, ``s3://bucket/key``
        or the file's absolute path, under ``_ingested/cloudtrail``; a marker an earlier
        version wrote by base name still counts, so nothing read then is read twice)
        unless ``force``. A file that does not read, and an event of the wrong shape, is
        skipped and named (``bad_files``, ``bad_events``, a warning); the rest is read. A
        bad file is not marked: it is named again each time until it is replaced.

        Each row is written once, whatever fails (memlife/ledger_ingest.py): a file's rows
        go to one part per day named after the file, so a rerun after a failure part way
        replaces the days it wrote; ``force`` rewrites a day only while the file's own part
        holds it (a day a compaction or an erasure folded elsewhere, or an earlier version
        wrote, is left as it is: ``already_written_rows``). Rows of records an erasure of
        ``store`` (or of a store :meth:`watch_erasures` watches) removed are not written
        (``erased_rows``: a count, never an id).

        Assumptions (see :func:`cloudtrail_accesses`): only ``GetMemoryRecord`` and
        ``RetrieveMemoryRecords`` from ``bedrock-agentcore.amazonaws.com`` count; the actor
        is ``requestParameters.actorId`` when present, else taken from the namespace
        (``/actors/<id>`` or ``/users/<id>`` segments, AgentCore's usual templates), else
        ``actor_resolver(event)``; ``userIdentity`` is the calling role, not the end user,
        and is never used as the actor. RetrieveMemoryRecords rows come from
        ``responseElements.memoryRecordSummaries`` (rank = position, 1-based); when
        CloudTrail did not log the response the event is skipped (``no_record_ids``).
        """
        stores = [*{id(s): s for s in self._stores if s is not store}.values(),
                  *([store] if store else [])]  # fmt: skip
        return ledger_ingest.ingest(
            self, str(source), stores, _table, actor_resolver, s3_client, force
        )

    def cloudtrail_ingested(self, key: str) -> bool:
        """Whether the log file at ``key`` was ingested: marked by its full key, or by its
        base name (the marker of versions before full keys)."""
        return self._ingested(key) or self._ingested(cloudtrail.legacy_name(key))


def _table(rows: Sequence[Access | cloudtrail.ReadHit]) -> pa.Table:
    columns = ("actor_id", "namespace", "record_id", "accessed_at", "rank", "query_sha256")
    return pa.Table.from_pydict({c: [getattr(r, c) for r in rows] for c in columns}, SCHEMA)


_LIVE: weakref.WeakSet[AccessLedger] = weakref.WeakSet()


def _flush_weak(ref: weakref.ref[AccessLedger]) -> None:
    ledger = ref()
    if ledger is not None:
        try:
            ledger.flush()
        except Exception as exc:  # a timer thread has no caller: say so, keep the rows
            warnings.warn(f"access ledger flush failed: {exc!r}", RuntimeWarning, stacklevel=1)


@atexit.register
def _flush_all_at_exit() -> None:
    """A Memory never closed (or an agent stopped by SIGTERM/exit) keeps its accesses."""
    for ledger in list(_LIVE):
        if ledger.pending:
            _flush_weak(weakref.ref(ledger))
