"""Session 46 (audit 46g): "tenants never mixed" for twin NAMESPACES of one actor (audit 46c did twin
actors), on the embedded SQLite store.

Namespace A (``/users/u-1/facts``) lives alone in one store, and beside twins in another:
``/users/u-1/facts2`` (A's name is a prefix of it) and ``/users/u-1/facts/old`` (a child
of A's path). The twins hold A's texts and subjects (so A's content hashes) under ids
that differ by case only (SQLite's id is the whole key); one of a twin's records is held,
one has a review item open, one is erased, and the twin runs its own scoped night first.
Then A does the same things in both stores through every command that takes a namespace
scope (a night and a dry run with ``--namespace``, ``review list --namespace``, recall in
one namespace, remember into one). What A observes must be identical.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlife import Memory
from tests.support import run_secret
from tests.support.cli import invoke
from tests.support.records import good
from tests.unit.test_twin_tenants_session46 import NOW, plain, reads, write

AT = datetime(2026, 2, 20, tzinfo=UTC)
POLICY = Path(__file__).resolve().parents[2] / "policies" / "default.yaml"
NS = "/users/u-1/facts"
TWINS = ("/users/u-1/facts2", "/users/u-1/facts/old")


def shard(ns: str, ids: str, job: str = "Works as a nurse.") -> list[dict[str, Any]]:
    """One namespace's records: a near-duplicate pair, an expired episode, a held expired
    record, a procedure without owner (a review item), a city and a job."""
    return [
        good(f"{ids}1", namespace=ns, content="Drinks only green tea, never coffee."),
        good(f"{ids}2", namespace=ns, content="Drinks only green tea and never coffee.",
             created_at="2026-01-05T10:00:00Z"),
        good(f"{ids}3", namespace=ns, subject="dentist", memory_type="episodic",
             content="Had a dentist appointment on Friday.", expires_at="2026-02-01T00:00:00Z"),
        good(f"{ids}4", namespace=ns, subject="dentist", content="Dentist is Dr. Smith.",
             retention_class="legal_hold", expires_at="2026-02-01T00:00:00Z"),
        good(f"{ids}5", namespace=ns, subject="backup", memory_type="procedural",
             owner=None, content="Back up the laptop every Sunday."),
        good(f"{ids}6", namespace=ns, subject="city", content="Lives in Lisbon."),
        good(f"{ids}7", namespace=ns, subject="job", content=job),
    ]  # fmt: skip


def cli(*args: str) -> Any:
    code, out, err = invoke(*args, "--json")
    assert code == 0, (args, out, err)
    return json.loads(out)


def world(root: Path, monkeypatch: pytest.MonkeyPatch, twins: bool) -> dict[str, Any]:
    """A's observations in a store of A alone, or of A beside its twin namespaces."""
    home = root / "home"
    root.mkdir()
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.setenv("MEMLIFE_STORE", f"sqlite:///{home / 'memlife.db'}")
    monkeypatch.setenv("MEMLIFE_RECEIPTS", f"file://{home / 'receipts'}")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    pol = root / "policy.yaml"
    pol.write_text(
        POLICY.read_text()
        .replace('version: "2026.11-default.4"', 'version: "audit46g.1"')
        .replace("required: true ", "required: false")
    )
    policy = ("--policy", str(pol))
    assert invoke("import", str(write(root / "a.jsonl", shard(NS, "m-"))))[0] == 0
    run_secret.give(home / "memlife.db")  # both worlds: replacement ids compare (50c2)
    if twins:  # the twins go first: reads, an erasure, a hold, nights and a review of their own
        for n, tns in enumerate(TWINS):
            p = f"{'MN'[n]}-"
            rows = shard(tns, p, job=f"Works as a teacher {n}.")  # an erasure is the actor's
            assert invoke("import", str(write(root / f"t{n}.jsonl", rows)))[0] == 0
            reads(home, "u-1", tns, f"{p}6", [1, 2, 3, 4, 5])
            cli("erase", "--actor", "u-1", "--id", f"{p}7", "--yes", *policy)
            cli("hold", "place", "--id", f"{p}6", *policy)
            cli("run", "--engine", "local", "--namespace", tns, "--now", NOW, *policy)
            (item,) = cli("review", "list", "--namespace", tns)
            cli("review", "resolve", item["item_id"], "--decision", "verify", "--reviewer", "bo",
                *policy)  # fmt: skip
    reads(home, "u-1", NS, "m-6", [12])
    scope = ("--namespace", NS)
    obs: dict[str, Any] = {}
    dry = cli("run", "--dry-run", "--engine", "local", *scope, "--now", NOW, *policy)
    obs["dry"] = dry
    obs["dry rows"] = sorted(map(json.loads, Path(dry["report"]).read_text().splitlines()),
                             key=lambda d: d["id"])  # fmt: skip
    night = cli("run", "--engine", "local", *scope, "--now", NOW, *policy)
    night["other_counts"].pop("embedded")  # the cache is keyed by content (docs: Left)
    obs["night"] = night
    receipt = json.loads(Path(night["receipt"]).read_text())
    obs["receipt"] = {k: receipt.get(k) for k in ("counts", "ids_not_deleted", "records_found")}
    obs["review"] = cli("review", "list", *scope, "--all")
    (item,) = cli("review", "list", *scope)
    obs["resolve"] = cli("review", "resolve", item["item_id"], "--decision", "keep",
                         "--reviewer", "al", *policy)  # fmt: skip
    with Memory() as m:
        obs["recall"] = [(h.id, h.score, h.rank) for h in
                         m.recall("what does she drink", actor="u-1", namespace=NS)]  # fmt: skip
        obs["recall city"] = [(h.id, h.score) for h in
                              m.recall("where does she live", actor="u-1", namespace=NS)]  # fmt: skip
        got = m.remember("Works as a cook.", actor="u-1", namespace=NS, at=AT)
        obs["remember"] = got.created
        dup = m.remember("Lives in Lisbon.", actor="u-1", namespace=NS, at=AT)
        obs["remember dup"] = dup.created, dup.id
    obs["hold"] = cli("hold", "place", "--id", "m-6", *policy)
    obs["history"] = cli("receipts", "history", "m-3", "--actor", "u-1")
    out = root / "out.jsonl"
    assert invoke("export", "-o", str(out))[0] == 0
    mine = [r for r in map(json.loads, out.read_text().splitlines()) if r["namespace"] == NS]
    obs["export"] = sorted(mine, key=lambda r: (r["id"], r["content"]))
    return plain(obs, got.id if got.created else "")


def test_namespace_a_sees_the_same_with_or_without_its_twins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twins of A's namespace (its name a prefix of one, its path the parent of the other)
    share A's texts, subjects and hashes, hold, erase, review and run their own scoped
    nights first. Everything A's namespace-scoped commands observe must be the same as in a
    store where A's namespace is alone."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    alone = world(tmp_path / "alone", monkeypatch, twins=False)
    beside = world(tmp_path / "beside", monkeypatch, twins=True)
    for key in alone:
        assert beside[key] == alone[key], key
