"""Side tables of a run: quarantine snapshots, pending erasures, erasure tombstones.

Two backends with one interface: :class:`SqliteSideTables` (the store's own file, or a
file under ``$MEMLIFE_HOME`` for other stores without ``MEMLIFE_STATE``) and
:class:`DynamoSideTables` (the state table, layout in memlife/state/dynamodb.py). None of
them holds memory content: snapshots keep status and provenance (ids, hashes, versions),
tombstones keep ids and hashes, pending erasures keep ids and scope.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from botocore.exceptions import ClientError

from memlife.model import MemoryRecord, content_sha256, utcnow
from memlife.state.dynamodb import DynamoState, is_conditional_failure, key

Snapshot = tuple[str, str | None, str]  # status, status_changed_at, provenance JSON
PENDING_KEYS = ("record_id", "actor_id", "namespace", "operation_id", "run_id", "requested_at")

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS quarantine_snapshots (
    record_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    status_changed_at TEXT,
    provenance TEXT NOT NULL,
    taken_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pending_erasures (
    record_id TEXT PRIMARY KEY,
    actor_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    operation_id TEXT NOT NULL,   -- the FAILED(LEGAL_HOLD) erase operation that deferred it
    run_id TEXT NOT NULL,
    requested_at TEXT NOT NULL
);
"""


class SqliteSideTables:
    def __init__(self, connection: sqlite3.Connection, lock: AbstractContextManager[Any]) -> None:
        self.connection, self.lock = connection, lock
        with lock:
            connection.executescript(SQLITE_SCHEMA)

    # quarantine snapshots
    def put_snapshot(self, record_id: str, snap: Snapshot, taken_at: str) -> None:
        with self.lock:
            self.connection.execute(
                "INSERT OR REPLACE INTO quarantine_snapshots VALUES (?, ?, ?, ?, ?)",
                (record_id, *snap, taken_at),
            )

    def snapshots(self, ids: Sequence[str]) -> dict[str, Snapshot]:
        out: dict[str, Snapshot] = {}
        with self.lock:
            for rid in ids:
                row = self.connection.execute(
                    "SELECT status, status_changed_at, provenance FROM quarantine_snapshots "
                    "WHERE record_id=?", (rid,),
                ).fetchone()  # fmt: skip
                if row:
                    out[rid] = (row[0], row[1], row[2])
        return out

    def forget_snapshots(self, ids: Sequence[str]) -> None:
        with self.lock:
            self.connection.executemany(
                "DELETE FROM quarantine_snapshots WHERE record_id=?", [(i,) for i in ids]
            )

    # pending erasures
    def add_pending(self, row: dict[str, str]) -> None:
        with self.lock:
            # the first deferral of a record stands; a row of another actor or namespace is
            # stale (its record went another way and the id was taken again): replaced
            self.connection.execute(
                "INSERT INTO pending_erasures VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(record_id)"
                " DO UPDATE SET actor_id=excluded.actor_id, namespace=excluded.namespace,"
                " operation_id=excluded.operation_id, run_id=excluded.run_id,"
                " requested_at=excluded.requested_at"
                " WHERE actor_id != excluded.actor_id OR namespace != excluded.namespace",
                tuple(row[k] for k in PENDING_KEYS),
            )

    def pending(self, actor_id: str | None = None) -> list[dict[str, Any]]:
        sql = f"SELECT {', '.join(PENDING_KEYS)} FROM pending_erasures"
        args: tuple[str, ...] = ()
        if actor_id:
            sql, args = sql + " WHERE actor_id=?", (actor_id,)
        with self.lock:
            rows = self.connection.execute(
                sql + " ORDER BY requested_at, record_id", args
            ).fetchall()
        return [dict(zip(PENDING_KEYS, r, strict=True)) for r in rows]

    def forget_pending(self, ids: Sequence[str]) -> list[str]:
        with self.lock:
            ops = [r[0] for i in ids for r in self.connection.execute(
                "SELECT operation_id FROM pending_erasures WHERE record_id=?", (i,))]  # fmt: skip
            self.connection.executemany(
                "DELETE FROM pending_erasures WHERE record_id=?", [(i,) for i in ids]
            )
        return ops


class DynamoSideTables:
    """The same tables as items of the state table."""

    def __init__(self, state: DynamoState) -> None:
        self.state = state

    # quarantine snapshots: qsnap#{record id} / snap
    def put_snapshot(self, record_id: str, snap: Snapshot, taken_at: str) -> None:
        item = {**key(f"qsnap#{record_id}", "snap"), "status": {"S": snap[0]},
                "provenance": {"S": snap[2]}, "taken_at": {"S": taken_at}}  # fmt: skip
        if snap[1] is not None:
            item["status_changed_at"] = {"S": snap[1]}
        self.state.ddb.put_item(TableName=self.state.table, Item=item)

    def snapshots(self, ids: Sequence[str]) -> dict[str, Snapshot]:
        items = self.state.batch_get([key(f"qsnap#{i}", "snap") for i in ids])
        return {
            i["pk"]["S"][6:]: (i["status"]["S"], i.get("status_changed_at", {}).get("S"),
                               i["provenance"]["S"])
            for i in items
        }  # fmt: skip

    def forget_snapshots(self, ids: Sequence[str]) -> None:
        # one BatchWriteItem naming a key twice is a ValidationException (SQLite takes it)
        self.state.batch_write(deletes=[key(f"qsnap#{i}", "snap") for i in dict.fromkeys(ids)])

    # pending erasures: perase / record id
    def add_pending(self, row: dict[str, str]) -> None:
        item = {**key("perase", row["record_id"])}
        item.update({k: {"S": row[k]} for k in PENDING_KEYS if k != "record_id"})
        try:  # the first deferral stands; another actor's or namespace's row is stale
            self.state.ddb.put_item(
                TableName=self.state.table, Item=item,
                ConditionExpression="attribute_not_exists(pk) OR actor_id <> :a OR #ns <> :n",
                ExpressionAttributeNames={"#ns": "namespace"},
                ExpressionAttributeValues={":a": item["actor_id"], ":n": item["namespace"]},
            )  # fmt: skip
        except ClientError as exc:
            if not is_conditional_failure(exc):
                raise

    def pending(self, actor_id: str | None = None) -> list[dict[str, Any]]:
        rows = []
        for i in self.state.query("perase"):
            row = {"record_id": i["sk"]["S"]} | {k: i[k]["S"] for k in PENDING_KEYS[1:]}
            if not actor_id or row["actor_id"] == actor_id:
                rows.append(row)
        return sorted(rows, key=lambda r: (r["requested_at"], r["record_id"]))

    def forget_pending(self, ids: Sequence[str]) -> list[str]:
        ids = list(dict.fromkeys(ids))  # a repeated key fails BatchWriteItem as a whole
        items = self.state.batch_get([key("perase", i) for i in ids])
        self.state.batch_write(deletes=[key("perase", i) for i in ids])
        return [i["operation_id"]["S"] for i in items]


class DynamoTombstones:
    """Erasure tombstones in the state table (the SqliteStore tombstone methods' interface).

        Per tombstone: ``tomb#{actor}`` / ``id#{record}`` (the row, for listing),
        ``tomb#{actor}`` / ``sha#{hash}`` and ``norm#{hash}`` (content checks), and
        ``tombid#{record}`` / ``t`` (kept for older readers; source checks read the actor's own
    ``id#{record}`` row); ``tombactors`` lists actors.
        The check runs right before a write (no shared transaction with AgentCore: see
        docs/erasure.md), as for the file-based tombstones of non-SQLite stores.
    """

    def __init__(self, state: DynamoState) -> None:
        self.state = state
        self.lock = threading.RLock()

    def add_tombstones(self, rows: Sequence[tuple[str, str, str, str | None]]) -> int:
        from memlife.stores.sqlite import ERASED_AGAIN_MAX, erased_again

        at = utcnow().isoformat()
        new = 0
        for actor, rid, sha, norm in rows:
            row = {**key(f"tomb#{actor}", f"id#{rid}"), "record_id": {"S": rid},
                   "content_sha256": {"S": sha}, "erased_at": {"S": at}}  # fmt: skip
            if norm:
                row["norm_sha256"] = {"S": norm}
            marks = [key(f"tomb#{actor}", f"sha#{sha}"), key(f"tombid#{rid}", "t"),
                     key("tombactors", actor)]  # fmt: skip
            if norm:
                marks.append(key(f"tomb#{actor}", f"norm#{norm}"))
            self.state.batch_write(puts=marks)  # the checks see it before the listing does
            # the id erased before with another text (the id reused): this one under
            # erased_again's name, so the listing keeps both (the marks refuse both already)
            name = rid
            for _ in range(ERASED_AGAIN_MAX):
                item = {**row, **key(f"tomb#{actor}", f"id#{name}"), "record_id": {"S": name}}
                try:
                    self.state.ddb.put_item(TableName=self.state.table, Item=item,
                                            ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
                    new += 1
                    break
                except ClientError as exc:
                    if not is_conditional_failure(exc):
                        raise
                was = self.state.ddb.get_item(
                    TableName=self.state.table,
                    Key=key(f"tomb#{actor}", f"id#{name}"),
                    ConsistentRead=True,
                ).get("Item", {})
                if was.get("content_sha256", {}).get("S") == sha:
                    break  # this very tombstone: idempotent
                name = erased_again(name, sha)  # taken by another text: the next name
        return new

    def tombstones(self, actor_id: str | None = None) -> list[dict[str, str | None]]:
        actors = [actor_id] if actor_id is not None else sorted(
            i["sk"]["S"] for i in self.state.query("tombactors"))  # fmt: skip
        out: list[dict[str, str | None]] = []
        for actor in actors:
            for i in self.state.query(
                f"tomb#{actor}", KeyConditionExpression="#h = :h AND begins_with(sk, :p)",
                ExpressionAttributeValues={":p": {"S": "id#"}},
            ):  # fmt: skip
                out.append({"actor_id": actor, "record_id": i["record_id"]["S"],
                            "content_sha256": i["content_sha256"]["S"],
                            "norm_sha256": i.get("norm_sha256", {}).get("S"),
                            "erased_at": i["erased_at"]["S"]})  # fmt: skip
        return sorted(out, key=lambda t: (t["actor_id"], t["record_id"]))

    def _erased_before(self, r: MemoryRecord) -> bool:
        """The erased record itself under an older text (stores/sqlite.py _ERASED_BEFORE):
        its id's tombstone was written after it was created."""
        from memlife.stores.sqlite import erased_before_args, erased_since

        actor, rid, created = erased_before_args(r)
        # its names: the id's own and erased_again's ("m-1#<sha>": the id reused, erased again)
        items = self.state.query(
            f"tomb#{actor}", KeyConditionExpression="#h = :h AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={":lo": {"S": f"id#{rid}"}, ":hi": {"S": f"id#{rid}$"}},
        )  # fmt: skip
        own, again = f"id#{rid}", f"id#{rid}#"  # BETWEEN also reads "id#m-1!": not its names
        rows = [(i["record_id"]["S"], i["content_sha256"]["S"], i["erased_at"]["S"])
                for i in items if i["sk"]["S"] == own or i["sk"]["S"].startswith(again)]  # fmt: skip
        return erased_since(rid, created, rows)

    def tombstone_refusal(self, r: MemoryRecord, sources: Sequence[str] = ()) -> str | None:
        from memlife.stores.sqlite import tombstone_norms

        pk = f"tomb#{r.actor_id}"
        shas = {r.provenance.content_sha256 or content_sha256(r.content), content_sha256(r.content)}
        keys = [key(pk, f"sha#{s}") for s in shas]
        keys += [key(pk, f"norm#{norm}") for norm in tombstone_norms(r.content)]
        if self.state.batch_get(keys) or self._erased_before(r):
            return "ERASED_CONTENT"
        # the actor's own tombstone rows (written before add_tombstones returns, so before
        # the erasure selects): an id another actor's erasure freed may be taken again
        if sources and self.state.batch_get([key(pk, f"id#{s}") for s in sources]):
            return "ERASED_SOURCE"
        return None


def side_tables(store: object) -> SqliteSideTables | DynamoSideTables:
    """The store's SQLite file; else the AWS state backend; else $MEMLIFE_HOME/quarantine.db."""
    from memlife.state import uses_remote_state
    from memlife.state.local import side_connection

    remote = uses_remote_state(store)
    if remote is not None:
        return remote.part("side", DynamoSideTables)
    conn, lock = side_connection(store, "quarantine.db", SQLITE_SCHEMA, "quarantine_snapshots")
    return SqliteSideTables(conn, lock)
