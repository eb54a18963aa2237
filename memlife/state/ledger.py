"""The access ledger on S3: the same Hive layout as the local one, under the state prefix.

::

    {prefix}/ledger/date=YYYY-MM-DD/part-<uuid>.parquet         appends (one object per flush)
    {prefix}/ledger/date=YYYY-MM-DD/part-c-<sha>.parquet        a compaction of small parts
    {prefix}/ledger/date=YYYY-MM-DD/part-ct-<sha>.parquet       a CloudTrail log file's rows
    {prefix}/ledger/date=YYYY-MM-DD/part-r-<sha>.parquet        an erasure's rewrite of a part
    {prefix}/ledger/_ingested/cloudtrail/<sha256>               CloudTrail files already read

Every online worker flushes its own small parts, so a day collects many; :meth:`compact`
folds a day's parts into one, and each nightly apply run does so for the days before its
cutoff (:func:`compact_closed_days`, count ``ledger_parts_compacted``). A file that replaces others (compaction, erasure rewrite)
names them in its Parquet metadata (``memlife.replaces``) and is written *before* they are
deleted: a crash in between leaves both, and readers skip the replaced ones, so no access
is ever counted twice nor lost. Athena / DuckDB read the prefix as a dataset.
"""

from __future__ import annotations

import hashlib
import io
import json
import uuid
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from botocore.exceptions import ClientError

from memlife.ledger import SCHEMA, AccessLedger, names_matter
from memlife.ledger_parts import REPLACING, conform, settled
from memlife.state.dynamodb import DynamoState

REPLACES = b"memlife.replaces"
SMALL_BYTES = 16 << 20  # parts below this are worth folding together


class S3AccessLedger(AccessLedger):
    def __init__(self, state: DynamoState, *, flush_rows: int = 1000) -> None:
        base = state.settings.parquet_prefix
        super().__init__(Path("/nonexistent-s3-ledger"), flush_rows=flush_rows)
        self.state = state
        self.bucket = state.settings.parquet_bucket
        self.prefix = f"{base}/ledger" if base else "ledger"
        self.url = f"s3://{self.bucket}/{self.prefix}"
        self._replaces_of: dict[str, set[str]] = {}  # a loaded part -> the parts it replaces

    # -- storage primitives ------------------------------------------------------------------
    def _put(
        self, key: str, table: pa.Table, replaces: Iterable[str] = (), *, new_only: bool = False
    ) -> bool:
        """Write one part; ``new_only``: create-only (If-None-Match), False when it exists."""
        # what the replaced parts replaced too, as the local ledger's _write_replacing does
        names = set(replaces)
        names |= set().union(*(self._replaces_of.get(k, set()) for k in list(names)))
        meta = {REPLACES: json.dumps(sorted(names)).encode()} if names else {}
        buf = io.BytesIO()
        pq.write_table(table.replace_schema_metadata(meta or None), buf, compression="zstd")
        extra = {"IfNoneMatch": "*"} if new_only else {}
        try:
            self.state.s3.put_object(Bucket=self.bucket, Key=key, Body=buf.getvalue(),
                                     ContentType="application/vnd.apache.parquet", **extra)  # fmt: skip
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if new_only and (
                exc.response["Error"]["Code"] == "PreconditionFailed" or status == 412
            ):
                return False
            raise
        return True

    def _write_day(self, day: str, table: pa.Table) -> None:
        self._put(f"{self.prefix}/date={day}/part-{uuid.uuid4().hex}.parquet", table)

    def _write_named(self, day: str, name: str, table: pa.Table) -> None:
        self._put(f"{self.prefix}/date={day}/{name}", table)  # a put replaces the object

    def _objects(self, day: str | None = None) -> list[tuple[str, int]]:
        prefix = f"{self.prefix}/date={day}/" if day else f"{self.prefix}/date="
        out = []
        for page in self.state.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            out += [(o["Key"], o["Size"]) for o in page.get("Contents", [])
                    if o["Key"].endswith(".parquet")]  # fmt: skip
        return sorted(out)

    def files(self) -> list[str]:
        return [k for k, _ in self._objects()]

    def _load(self, keys: Iterable[str]) -> dict[str, tuple[pa.Table, set[str]]]:
        out = {}
        for k in keys:
            body = self.state.s3.get_object(Bucket=self.bucket, Key=k)["Body"].read()
            try:
                table = pq.read_table(pa.BufferReader(body))
                meta = table.schema.metadata or {}
                # columns by name: another tool's file (reordered, an extra or missing
                # column, a null actor) raised on cast in every night and erasure
                rows = conform(table, SCHEMA)
            except (OSError, pa.ArrowInvalid, ValueError) as exc:  # named, left out (as local)
                warnings.warn(f"access ledger: unreadable part {k}: {exc}", RuntimeWarning, 2)
                continue
            replaced = set(json.loads(meta[REPLACES])) if REPLACES in meta else set()
            out[k] = (rows, replaced)
            self._replaces_of[k] = replaced
        return out

    @staticmethod
    def _live(loaded: dict[str, tuple[pa.Table, set[str]]]) -> dict[str, pa.Table]:
        """Files not replaced by another (a crash may leave both: the replacement wins)."""
        gone = set().union(*(r for _, r in loaded.values())) if loaded else set()
        return {k: t for k, (t, _) in loaded.items() if k not in gone}

    def _footer_replaces(self, key: str) -> set[str]:
        """The parts ``key`` replaces, read from its Parquet footer (two ranged reads)."""
        get = self.state.s3.get_object
        tail = get(Bucket=self.bucket, Key=key, Range="bytes=-8")["Body"].read()
        size = int.from_bytes(tail[:4], "little") + 8
        footer = get(Bucket=self.bucket, Key=key, Range=f"bytes=-{size}")["Body"].read()
        try:
            meta = pq.read_schema(pa.BufferReader(footer)).metadata or {}
        except (OSError, pa.ArrowInvalid):  # not a footer: names nothing (as _load, unread)
            return set()
        return set(json.loads(meta[REPLACES])) if REPLACES in meta else set()

    def _delete(self, keys: Iterable[str]) -> None:
        for k in keys:
            self.state.s3.delete_object(Bucket=self.bucket, Key=k)

    def _marker_key(self, name: str) -> str:
        return f"{self.prefix}/_ingested/cloudtrail/{hashlib.sha256(name.encode()).hexdigest()}"

    def _ingested(self, name: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.state.s3.head_object(Bucket=self.bucket, Key=self._marker_key(name))
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return False
            raise

    def _mark_ingested(self, name: str) -> None:
        self.state.s3.put_object(Bucket=self.bucket, Key=self._marker_key(name), Body=name.encode())

    # -- reading ---------------------------------------------------------------------------------
    def read(self, actor_id: str | None = None, since: datetime | None = None) -> pa.Table:
        self.flush()
        first = "" if since is None else f"{self.prefix}/date={since.astimezone(UTC).date()}"
        tables = settled(lambda: [k for k in self.files() if k >= first], self._load_listed)
        if not tables:
            return SCHEMA.empty_table()
        table = pa.concat_tables(tables)
        if actor_id is not None:
            table = table.filter(pc.equal(table.column("actor_id"), actor_id))
        if since is not None:
            ts = pa.scalar(since.astimezone(UTC), type=SCHEMA.field("accessed_at").type)
            table = table.filter(pc.greater_equal(table.column("accessed_at"), ts))
        return table

    def _load_listed(self, keys: list[str]) -> list[pa.Table]:
        """The live parts' rows; a part deleted since it was listed is a FileNotFoundError,
        so :func:`settled` lists again: another worker rewrote it (a compaction, an erasure,
        an online scrub), its replacement put first. The night's read failed (audit 51d)."""
        try:
            return list(self._live(self._load(keys)).values())
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                raise FileNotFoundError(f"access ledger part gone since listed: {exc}") from exc
            raise

    def dataset(self, parts: Any = None) -> Any:  # pragma: no cover - a local dataset only
        raise TypeError(f"the S3 ledger is read with read(); query {self.url} with DuckDB/Athena")

    # -- erasure and compaction ----------------------------------------------------------------
    # -- erase (AccessLedger.erase: the buffer and the loop are the base's) ----------------------
    def _parts(self) -> Iterator[tuple[str, pa.Table]]:
        yield from self._live(self._load(self.files())).items()

    def _sweep(self) -> None:
        """Delete the parts another part replaces (what a crash between a replacement's put
        and its sources' delete left; erase runs it first, under the lease). Without it
        the local ledger's sweep ran on a folder that does not exist: an erasure that
        rewrote the replacement (deleting it) brought the replaced parts back to every
        reader, erased rows included, and a crashed erasure's old part stayed for good."""
        loaded = self._load(self.files())
        gone = set().union(*(r for _, r in loaded.values())) if loaded else set()
        if stale := sorted(k for k in loaded if k in gone):
            self._delete(stale)

    def _replace_part(self, part: str, rest: pa.Table) -> None:
        # names the part it replaces (a crash before the delete leaves both), even when
        # empty where the name matters: a killed ingest's rerun puts that part again.
        # Named after that part, create-only: an erasure and an online worker's scrub of it
        # (ledger_ingest.write_checked) may rewrite one part at once, and two fresh names
        # left two live copies (every other read counted twice, each keeping what the other
        # erased). The loser keeps, of the winner's rows, only those it kept too.
        day, name = part.rsplit("/", 2)[-2:]
        if rest.num_rows or names_matter(name) or self._replaces_of.get(part):
            digest = hashlib.sha256(part.encode()).hexdigest()[:32]
            target = f"{self.prefix}/{day}/{REPLACING}{digest}.parquet"
            if not self._put(target, rest, [part], new_only=True):
                self._fold_into(target, rest)
            else:
                # written, yet the name may have been freed: a loser rewrote the winner's
                # copy and deleted it. Then ours is already named replaced by that rewrite
                # and no reader sees it; our erasure must hold in the rewrite (audit 49r2)
                digest = hashlib.sha256(target.encode()).hexdigest()[:32]
                self._fold_into(f"{self.prefix}/{day}/{REPLACING}{digest}.parquet", rest)
        self._delete([part])

    def _fold_into(self, key: str, rest: pa.Table) -> None:
        """Rewrite ``key`` keeping only the rows ``rest`` keeps too; gone: nothing to do."""
        try:
            won = self._load([key]).get(key)
        except ClientError as exc:
            if exc.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return
            raise
        if won is not None and (both := _kept_by_both(won[0], rest)).num_rows < won[0].num_rows:
            self._replace_part(key, both)

    def compact(
        self, min_files: int = 2, small_bytes: int = SMALL_BYTES, before: str | None = None
    ) -> dict[str, int]:
        """Fold each day's small parts into one file; returns {day: parts folded}.
        ``before`` (YYYY-MM-DD): only the days before it."""
        self.flush()
        by_day: dict[str, list[str]] = {}
        big: dict[str, list[str]] = {}
        for key, size in self._objects():
            day = key.rsplit("/", 2)[-2].removeprefix("date=")
            if before is not None and day >= before:
                continue
            into = by_day if size < small_bytes else big
            into.setdefault(key.rsplit("/", 2)[-2], []).append(key)
        done: dict[str, int] = {}
        with self._lock:
            for day, keys in sorted(by_day.items()):
                if len(keys) < min_files:
                    continue
                # a compaction killed while deleting its sources left a big folded part
                # naming the rest: folded again, their rows counted twice (the local ledger
                # sweeps first); they are swept, from the big parts' footers alone
                named = set().union(*(self._footer_replaces(k) for k in big.get(day, [])))
                if stale := [k for k in keys if k in named]:
                    self._delete(stale)
                    keys = [k for k in keys if k not in named]
                    if len(keys) < min_files:
                        continue
                # a part that does not read is named and left where it is (as the local
                # ledger leaves it): folded and deleted, it was gone for good (audit 50h)
                loaded = self._load(keys)
                if len(keys := sorted(loaded)) < min_files:
                    continue
                live = self._live(loaded)
                sources = sorted(live)
                name = hashlib.sha256("\n".join(sources).encode()).hexdigest()[:32]
                table = pa.concat_tables([live[k] for k in sources])
                self._put(f"{self.prefix}/{day}/part-c-{name}.parquet", table, keys)
                self._delete(keys)
                done[day.removeprefix("date=")] = len(keys)
        return done


def _kept_by_both(won: pa.Table, ours: pa.Table) -> pa.Table:
    """The rows of ``won`` that ``ours`` keeps too, each as often as both hold it: two
    rewrites of one part, each dropping its own erased rows, agree on what both keep."""
    kept = Counter(zip(*(ours.column(n).to_pylist() for n in SCHEMA.names), strict=True))
    mask = []
    for row in zip(*(won.column(n).to_pylist() for n in SCHEMA.names), strict=True):
        mask.append(kept[row] > 0)
        kept[row] -= 1
    return won.filter(pa.array(mask, type=pa.bool_()))


def compact_closed_days(state: DynamoState, cutoff: datetime) -> int:
    """The nightly apply run's housekeeping (pipeline.finish_run): fold the small parts of
    every day before the cutoff's. Online workers still append to the cutoff's day; an
    erasure rewrites parts only under the store's lease, which the nightly run holds, so
    the two never interleave. Returns the number of parts folded."""
    day = cutoff.astimezone(UTC).date().isoformat()
    return sum(S3AccessLedger(state).compact(before=day).values())
