"""Session 46 (audit 46c): "tenants never mixed", as one differential over twin tenants.

Tenant A (actor ``u-1``) lives alone in one store and beside a twin B in another. B
collides with A wherever an implementation could confuse them: the same texts and
subjects (so the same content hashes), ids that differ from A's by case only and two ids
A takes over from B (one B erased, one B read five times before it expired), one record
held, one with a review item open, one erased; and B acts first (holds, erases, resolves
its item). Then A does the same things in both stores, through every path that takes an
actor or a namespace. What A observes must be identical: B's presence may never read,
change, count, receipt or reveal anything of A's.

Found (fixed in session 46): an erasure removes the access-ledger rows of its record
ids whatever their actor, so B's erasure of an id A once held wipes A's reads and counts
them in B's receipt (``ledger_rows_erased``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlife import Memory
from memlife.integrations.langgraph import MemlifeStore
from tests.support import run_secret
from tests.support.cli import invoke
from tests.support.records import good

NOW = "2026-03-01T00:00:00Z"
AT = datetime(2026, 2, 20, tzinfo=UTC)
POLICY = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"


def tenant(actor: str, ns: str, ids: str) -> list[dict[str, Any]]:
    """One tenant's records: a near-duplicate pair, an expired episode, a held expired
    record, a procedure without owner (a review item), a city and a job."""
    return [
        good(f"{ids}1", actor_id=actor, namespace=ns, content="Drinks only green tea, never coffee."),
        good(f"{ids}2", actor_id=actor, namespace=ns, content="Drinks only green tea and never coffee.",
             created_at="2026-01-05T10:00:00Z"),
        good(f"{ids}3", actor_id=actor, namespace=ns, subject="dentist", memory_type="episodic",
             content="Had a dentist appointment on Friday.", expires_at="2026-02-01T00:00:00Z"),
        good(f"{ids}4", actor_id=actor, namespace=ns, subject="dentist", content="Dentist is Dr. Smith.",
             retention_class="legal_hold", expires_at="2026-02-01T00:00:00Z"),
        good(f"{ids}5", actor_id=actor, namespace=ns, subject="backup", memory_type="procedural",
             owner=None, content="Back up the laptop every Sunday."),
        good(f"{ids}6", actor_id=actor, namespace=ns, subject="city", content="Lives in Lisbon."),
        good(f"{ids}7", actor_id=actor, namespace=ns, subject="job", content="Works as a nurse."),
    ]  # fmt: skip


# what names a run (its id holds the store's identity, a manual one the wall clock), where
# its files lie, and when a person acted: the two stores differ there by construction
RUN_KEYS = {"opened_run", "last_seen_run", "operation_id", "run_id", "replacement_id",
            "receipt", "manifest", "report", "report_parquet", "report_html", "previous_run",
            "seconds", "resolved_at", "at", "timestamp", "requested_by", "store"}  # fmt: skip


def plain(value: Any, new: str = "") -> Any:
    """``value`` without run and operation ids, paths and wall-clock times, and with the id
    ``remember`` drew (``new``) as ``<new>``."""
    if isinstance(value, dict):
        return {k: plain(v, new) for k, v in value.items() if k not in RUN_KEYS}
    if isinstance(value, list | tuple):
        return [plain(v, new) for v in value]
    if value == new:
        return "<new>"
    if isinstance(value, str) and value.startswith(f"{datetime.now(UTC):%Y-%m-%d}"):
        return "<now>"
    if isinstance(value, str) and value.startswith("hmac-sha256:"):  # keyed by the store's secret
        return "<keyed>"
    return value


def cli(*args: str) -> Any:
    code, out, err = invoke(*args, "--json")
    assert code == 0, (args, out, err)
    return json.loads(out)


def reads(home: Path, actor: str, ns: str, rid: str, days: list[int]) -> None:
    """Recalls of ``rid`` by ``actor`` on these February days, in the home's ledger."""
    from memlife.ledger import AccessLedger

    ledger = AccessLedger(home / "ledger")
    for day in days:
        ledger.append(actor, ns, rid, rank=1, at=datetime(2026, 2, day, tzinfo=UTC))
    ledger.flush()


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def world(root: Path, monkeypatch: pytest.MonkeyPatch, twin: list[dict[str, Any]] | None) -> dict:
    """A's observations in a store of A alone (twin None) or of A beside ``twin``."""
    home = root / "home"
    root.mkdir()
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("MEMLIFE_STORE", f"sqlite:///{home / 'memlife.db'}")
    monkeypatch.setenv("MEMLIFE_RECEIPTS", f"file://{home / 'receipts'}")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    pol = root / "policy.yaml"
    pol.write_text(
        POLICY.read_text()
        .replace('version: "2026.11-default.4"', 'version: "audit46c.1"')
        .replace("required: true ", "required: false")
    )
    policy = ("--policy", str(pol))
    ns = "/users/u-1/preferences"
    assert invoke("import", str(write(root / "a.jsonl", tenant("u-1", ns, "m-"))))[0] == 0
    run_secret.give(home / "memlife.db")  # both worlds: replacement ids compare (50c2)
    obs: dict[str, Any] = {}
    if twin:  # B goes first: reads, erases, holds, a night and a review of its own
        b, bns = twin[0]["actor_id"], twin[0]["namespace"]
        assert invoke("import", str(write(root / "b.jsonl", twin)))[0] == 0
        reads(home, b, bns, "x-1", [1, 2, 3])
        reads(home, b, bns, "y-1", [4, 5, 6, 7, 8])
        reads(home, b, bns, twin[0]["id"], [9, 10])
        cli("erase", "--actor", b, "--id", "x-1", "--yes", *policy)
        cli("hold", "place", "--actor", b, "--subject", "city", *policy)
        cli("run", "--engine", "local", "--actor", b, "--now", NOW, *policy)  # y-1 expires
        (item,) = cli("review", "list", "--actor", b)
        cli("review", "resolve", item["item_id"], "--decision", "delete", "--reviewer", "bo",
            *policy)  # fmt: skip
    # A takes the ids B's erasure and expiry freed: B's job text, B's read record's id
    later = [
        good("x-1", actor_id="u-1", namespace=ns, subject="job", content="Works as a nurse.",
             created_at="2026-01-10T10:00:00Z"),
        good("y-1", actor_id="u-1", namespace=ns, subject="sport", content="Plays tennis on Sundays.",
             created_at="2026-01-10T10:00:00Z"),
    ]  # fmt: skip
    assert invoke("import", str(write(root / "later.jsonl", later)))[0] == 0
    reads(home, "u-1", ns, "m-6", [12])
    dry = cli("run", "--dry-run", "--engine", "local", "--actor", "u-1", "--now", NOW, *policy)
    obs["dry"] = dry
    obs["dry rows"] = sorted(map(json.loads, Path(dry["report"]).read_text().splitlines()),
                             key=lambda d: d["id"])  # fmt: skip
    night = cli("run", "--engine", "local", "--actor", "u-1", "--now", NOW, *policy)
    # the embedding cache is keyed by content across actors (docs: Left): B's identical
    # texts were embedded already, a cost, not a decision
    night["other_counts"].pop("embedded")
    obs["night"] = night
    receipt = json.loads(Path(night["receipt"]).read_text())
    obs["receipt"] = {k: receipt.get(k) for k in ("counts", "ids_not_deleted", "records_found")}
    obs["review"] = cli("review", "list", "--actor", "u-1", "--all")
    (item,) = cli("review", "list", "--actor", "u-1")
    obs["resolve"] = cli("review", "resolve", item["item_id"], "--decision", "keep",
                         "--reviewer", "al", *policy)  # fmt: skip
    with Memory() as m:
        obs["recall"] = [
            (h.id, h.score, h.rank) for h in m.recall("what does she drink", actor="u-1")
        ]
        obs["recall job"] = [(h.id, h.score) for h in m.recall("nurse job", actor="u-1")]
        got = m.remember("Works as a nurse at the clinic.", actor="u-1", namespace=ns, at=AT)
        obs["remember"] = got.created, got.duplicate_of if hasattr(got, "duplicate_of") else None
        dup = m.remember("Lives in Lisbon.", actor="u-1", namespace=ns, at=AT)
        obs["remember dup"] = dup.created, dup.id
        lg = MemlifeStore(m)
        mine, theirs = ("users", "u-1", "preferences"), ("users", "U-1", "preferences")
        obs["lg search"] = sorted(
            (i.key, i.value["content"]) for i in lg.search(("users", "u-1"), limit=100)
        )
        obs["lg query"] = [(i.key, i.score) for i in lg.search(("users", "u-1"), query="green tea")]
        obs["lg get"] = [
            lg.get(mine, "M-6"),
            lg.get(mine, "m-6") is not None,
            lg.get(theirs, "m-7"),
        ]
        obs["lg list"] = lg.list_namespaces(prefix=("users", "u-1"))
    obs["hold"] = cli("hold", "place", "--actor", "u-1", "--subject", "sport", *policy)
    obs["erase preview"] = cli("erase", "--actor", "u-1", "--subject", "city", *policy)
    obs["erase"] = cli("erase", "--actor", "u-1", "--subject", "city", "--yes", *policy)
    obs["history"] = cli("receipts", "history", "x-1", "--actor", "u-1")
    obs["history m-3"] = cli("receipts", "history", "m-3", "--actor", "u-1")
    out = root / "out.jsonl"
    access = root / "access.parquet"
    assert invoke("export", "-o", str(out), "--access", str(access))[0] == 0
    mine = [r for r in map(json.loads, out.read_text().splitlines()) if r["actor_id"] == "u-1"]
    obs["export"] = sorted(mine, key=lambda r: (r["id"], r["content"]))
    import pyarrow.parquet as pq

    rows = pq.read_table(access).to_pylist()
    obs["access"] = sorted(
        (r["record_id"], r["accessed_at"].year == 2026 and r["accessed_at"].month < 4)
        for r in rows if r["actor_id"] == "u-1"
    )  # fmt: skip
    return plain(obs, got.id)


def test_tenant_a_sees_the_same_with_or_without_its_twin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B (actor ``U-1``, ids ``M-1``...) shares A's texts, subjects and hashes, erases its
    job, holds its city and runs its own night first. Every observation of A must be the
    same as in a store where A is alone."""
    alone = world(tmp_path / "alone", monkeypatch, None)
    twin = tenant("U-1", "/users/U-1/preferences", "M-")
    twin[6]["id"] = "x-1"  # B's job: erased, its id then taken by A
    twin[2]["id"] = "y-1"  # B's expired episode, read five times: its id then taken by A
    beside = world(tmp_path / "beside", monkeypatch, twin)
    for key in alone:
        assert beside[key] == alone[key], key


def test_another_actors_erasure_of_a_reused_id_leaves_this_actors_reads(
    home: Path, tmp_path: Path
) -> None:
    """A's episode k expires and a night deletes it; its reads stay in A's access ledger
    (only an erasure rewrites it). B then takes the id k and erases its own record. B's
    erasure must remove B's reads only: A's rows stay, and B's receipt counts none of them."""
    from memlife.ledger import AccessLedger

    a = good("k", actor_id="u-1", namespace="/users/u-1/episodes", memory_type="episodic",
             content="Went hiking on Sunday.", expires_at="2026-02-15T00:00:00Z")  # fmt: skip
    assert invoke("import", str(write(tmp_path / "a.jsonl", [a])))[0] == 0
    reads(home, "u-1", "/users/u-1/episodes", "k", [1, 2, 3])
    night = cli("run", "--engine", "local", "--now", NOW)
    assert night["lifecycle"]["deleted"] == 1
    b = good("k", actor_id="U-1", namespace="/users/U-1/episodes", content="Plays chess.")
    assert invoke("import", str(write(tmp_path / "b.jsonl", [b])))[0] == 0
    erased = cli("erase", "--actor", "U-1", "--id", "k", "--yes")
    assert erased["counts"]["ledger_rows_erased"] == 0  # B never read its k
    assert len(AccessLedger(home / "ledger").read(actor_id="u-1")) == 3
