"""Differential: the same CLI operations on SQLite and on AgentCore (fake data plane behind
real boto3, moto DynamoDB sidecar) must leave the same records, receipts (by action and
outcome) and review items."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.demo import generate
from memlife.faults import InjectedFault, inject
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue.base import item_id
from memlife.stores.sqlite import SqliteStore
from tests.fakes.agentcore import AgentCoreHarness, bulk_load
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases, operation_receipts

runner = CliRunner()


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


WALL = (
    "2026-11-30"  # the runs' clocks are fixed before this; a manual command stamps the wall clock
)


def wall(rec: dict) -> dict:
    """A time a manual command stamped from the wall clock differs between two sides: 'WALL'."""
    for k in ("created_at", "last_verified_at", "last_accessed_at"):
        if rec.get(k) and rec[k] > WALL:
            rec[k] = "WALL"
    return rec


class Pair:
    """One SQLite store and one AgentCore memory, each with its own MEMLIFE_HOME."""

    def __init__(self, harness: AgentCoreHarness, tmp: Path, mp: pytest.MonkeyPatch) -> None:
        self.mp, self.tmp = mp, tmp
        self.codes: list[tuple] = []
        self.alias: dict[str, str] = {}  # AgentCore's id of a remembered fact -> SQLite's
        self.ac_store = harness.store()
        self.fake = harness.fake
        q = {
            "region": "us-east-1",
            "endpoint_url": harness.fake.endpoint_url,
            "sidecar_table": harness.sidecar_table,
        }
        self.side = {
            "sq": (tmp / "sq", f"sqlite:///{tmp / 'sq' / 'memlife.db'}"),
            "ac": (tmp / "ac", f"agentcore://{harness.fake.memory_id}?{urlencode(q)}"),
        }
        (tmp / "sq").mkdir()
        (tmp / "ac").mkdir()

    def seed(self, records: list[MemoryRecord]) -> None:
        db = SqliteStore(self.tmp / "sq" / "memlife.db")
        db.put_many(records)
        db.close()
        bulk_load(self.ac_store, self.fake, records)

    def cli(self, side: str, *args: str, receipts: bool = True) -> dict:
        home, url = self.side[side]
        self.mp.setenv("MEMLIFE_HOME", str(home))
        extra = ["--store", url]
        if receipts:
            extra += ["--receipts", f"file://{home / 'receipts'}"]
        result = runner.invoke(app, [*args, *extra, "--json"])
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        try:
            out = json.loads(result.stdout)
        except ValueError:
            out = result.output.strip()
        self.codes.append((side, args[:2], result.exit_code))
        return out

    def both(self, *args: str, receipts: bool = True) -> tuple[Any, Any]:
        """The same command on both sides; a replacement named by its SQLite id goes to
        AgentCore by its own (ids are keyed by each store's run secret)."""
        a = self.cli("sq", *args, receipts=receipts)
        theirs = {v: k for k, v in self.alias.items() if k.startswith("r-")}
        b = self.cli("ac", *(theirs.get(x, x) for x in args), receipts=receipts)
        assert self.codes[-1][2] == self.codes[-2][2], (a, b)
        return a, b

    def _raw(self, side: str) -> dict[str, dict]:
        if side == "sq":
            db = SqliteStore(self.tmp / "sq" / "memlife.db")
            try:
                return {r.id: wall(json.loads(r.to_json())) for r in db.iter_all()}
            finally:
                db.close()
        return {r.id: wall(json.loads(r.to_json())) for r in self.ac_store.iter_all()}

    def records(self, side: str) -> dict[str, dict]:
        if side == "sq":
            return self._raw("sq")
        self.match_replacements()
        out = {}
        for d in self._raw("ac").values():
            d["id"] = self.alias.get(d["id"], d["id"])
            prov = d["provenance"]
            prov["replaced_by"] = self.alias.get(prov["replaced_by"], prov["replaced_by"])
            prov["supersedes"] = [self.alias.get(x, x) for x in prov["supersedes"]]
            out[d["id"]] = d
        return out

    def _groups(self, side: str) -> dict[str, set[str]]:
        """Each replacement -> the records it supersedes: those the store holds, and those
        its receipts name (a replacement since deleted, withdrawn or erased)."""
        out = {i: set(r["provenance"]["supersedes"]) for i, r in self._raw(side).items()
               if i.startswith("r-") and r["provenance"]["supersedes"]}  # fmt: skip
        for o in operation_receipts(self.side[side][0] / "receipts").values():
            if o["action"] == "supersede" and o["replacement_id"]:
                out.setdefault(o["replacement_id"], set()).add(o["record_id"])
        return out

    def match_replacements(self) -> None:
        """A replacement's id is keyed by its store's run secret (group_plan.consolidation_key):
        the two sides name the same merge differently. Paired by what they supersede (their
        sources, a replacement among them by its pair), one replacement to a group on each
        side: anything else is compared as it is, and so differs."""
        sq: dict[frozenset[str], str] = {}
        for i, members in self._groups("sq").items():
            assert sq.setdefault(frozenset(members), i) == i, ("one group, two replacements", i)
        ac = self._groups("ac")
        while True:  # a replacement superseding a replacement: paired once its source is
            new = {i: sq[k] for i, m in ac.items() if i not in self.alias
                   and (k := frozenset(self.alias.get(x, x) for x in m)) in sq}  # fmt: skip
            if not new:
                return
            self.alias.update(new)

    def done(self, side: str) -> set[tuple]:
        self.match_replacements()
        ops = operation_receipts(self.side[side][0] / "receipts")
        name = self.alias.get if side == "ac" else (lambda x, y: x)
        return {
            (name(o["record_id"], o["record_id"]), o["action"], o["outcome"],
             name(o["replacement_id"], o["replacement_id"]) if o["replacement_id"] else None)
            for o in ops.values()
        }  # fmt: skip

    def assert_same(self) -> None:
        sq, ac = self.records("sq"), self.records("ac")
        assert set(ac) == set(sq)
        diff = {
            i: {k: (sq[i][k], ac[i][k]) for k in sq[i] if sq[i][k] != ac[i][k]}
            for i in sq
            if sq[i] != ac[i]
        }
        assert diff == {}
        assert self.done("ac") == self.done("sq")


@pytest.fixture()
def pair(harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pair:
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return Pair(harness, tmp_path, monkeypatch)


def demo(n: int = 120, seed: int = 3) -> list[MemoryRecord]:
    return list(generate(n, seed=seed, anchor=ANCHOR, per_actor=40))


def night(pair: Pair, cases: str, now: str = CUTOFF.isoformat()) -> tuple[dict, dict]:
    return pair.both("run", "--engine", "local", "--now", now, "--eval-cases", cases)


def review_items(pair: Pair, side: str) -> dict[str, tuple]:
    """By item id; an item about a replacement under the id its SQLite pair's item has (an
    item's id is made from its record's)."""
    items = pair.cli(side, "review", "list", "--all", receipts=False)
    keep = ("record_id", "reason", "pair_id", "state", "decision", "content_sha256", "nights")
    name = (lambda x: pair.alias.get(x, x) if x else x) if side == "ac" else (lambda x: x)
    out = {}
    for i in items:
        iid, rid = i["item_id"], i["record_id"]
        scope = (i["reason"], i["actor_id"], i["namespace"])
        if name(rid) != rid and iid == item_id(rid, *scope):
            iid = item_id(name(rid), *scope)
        row = {k: (name(i[k]) if k in ("record_id", "pair_id") else i[k]) for k in keep}
        out[iid] = tuple(row.values())
    return out


def check(pair: Pair) -> None:
    pair.assert_same()
    assert review_items(pair, "ac") == review_items(pair, "sq")


def test_reviews_holds_erasures_and_a_second_night(pair: Pair) -> None:
    """Every operator command after a night, then a second night: both stores alike."""
    recs = demo()
    pair.seed(recs)
    cases = gate_cases(pair.tmp / "x.db", recs)
    sq, ac = night(pair, cases)
    assert sq["lifecycle"] == ac["lifecycle"]
    check(pair)
    items = pair.cli("sq", "review", "list", receipts=False)

    singles = [i for i in items if not i["pair_id"]]
    pairs_ = [i for i in items if i["pair_id"]]
    seen: set[str] = set()
    singles = [i for i in singles if not (i["record_id"] in seen or seen.add(i["record_id"]))]
    for item, decision in zip(singles, ("keep", "verify", "delete", "dispute"), strict=False):
        a, b = pair.both(
            "review", "resolve", item["item_id"], "--decision", decision, "--reviewer", "rv@x"
        )
        check(pair)
    if pairs_:
        it = pairs_[0]
        a, b = pair.both(
            "review",
            "resolve",
            it["item_id"],
            "--decision",
            "supersede",
            "--reviewer",
            "rv@x",
            "--by",
            it["pair_id"],
        )
        check(pair)
    # holds, erasures (by id, by subject, --inferred), a held record deferred then released
    active = {i: r for i, r in pair.records("sq").items() if r["status"] == "active"}
    ids = sorted(active)
    held = ids[0]
    by_id = next(i for i in ids[1:] if active[i]["actor_id"] == active[held]["actor_id"])
    other = next(r for i, r in sorted(active.items()) if r["actor_id"] != active[held]["actor_id"])
    a, b = pair.both("hold", "place", "--id", held)
    check(pair)
    a, b = pair.both(
        "erase", "--actor", active[held]["actor_id"], "--id", held, "--id", by_id, "--yes"
    )
    check(pair)
    if other.get("subject"):
        a, b = pair.both(
            "erase",
            "--actor",
            other["actor_id"],
            "--subject",
            other["subject"],
            "--inferred",
            "--yes",
        )
        check(pair)
    a, b = pair.both("hold", "release", "--id", held)
    check(pair)
    sq, ac = night(pair, cases, (CUTOFF + timedelta(days=1)).isoformat())
    assert sq["lifecycle"] == ac["lifecycle"]
    check(pair)


def test_import_update_and_remember_between_two_nights(pair: Pair) -> None:
    """An import --update (a held record too, a superseded one) and online remembers
    between two nights: both stores alike after each step."""
    recs = demo(80, seed=7)
    pair.seed(recs)
    cases = gate_cases(pair.tmp / "x.db", recs)
    sq, ac = night(pair, cases)
    assert sq["lifecycle"] == ac["lifecycle"]
    check(pair)
    now = pair.records("sq")
    sup = sorted(i for i, r in now.items() if r["status"] == "superseded")[:1]
    act = sorted(i for i, r in now.items() if r["status"] == "active")[:3]
    pair.both("hold", "place", "--id", act[0])
    check(pair)
    lines = []
    for i in act + sup:
        r = dict(pair.records("sq")[i])
        r["content"] = r["content"].rstrip(".") + " on weekdays."
        r["expires_at"] = (CUTOFF + timedelta(days=1, hours=6)).isoformat().replace("+00:00", "Z")
        lines.append(json.dumps(r))
    src = pair.tmp / "upd.jsonl"
    src.write_text("\n".join(lines) + "\n")
    a, b = pair.both("import", str(src), "--update")
    check(pair)
    a, b = pair.both("import", str(src), "--update", "--allow-held")
    check(pair)
    actor = now[act[1]]["actor_id"]
    for fact in ("Prefers aisle seats on long flights.", "Prefers aisle seats on long flights."):
        a, b = pair.both("remember", fact, "--actor", actor, "--subject", "seat", receipts=False)
        pair.alias[b["id"]] = a["id"]
        check(pair)
    a, b = pair.both(
        "remember",
        "Prefers window seats on long flights.",
        "--actor",
        actor,
        "--subject",
        "seat",
        receipts=False,
    )
    pair.alias[b["id"]] = a["id"]
    check(pair)
    sq, ac = night(pair, cases, (CUTOFF + timedelta(days=2)).isoformat())
    assert sq["lifecycle"] == ac["lifecycle"], (sq["lifecycle"], ac["lifecycle"])
    pair.match_replacements()
    check(pair)


@pytest.mark.parametrize("point", ["after_supersede", "after_delete", "before_receipt"])
def test_a_killed_night_and_its_rerun(pair: Pair, point: str) -> None:
    """A night killed at a fault point on both stores, then run again: the same records,
    receipts and review items."""
    recs = demo()
    pair.seed(recs)
    cases = gate_cases(pair.tmp / "x.db", recs)
    for side in ("sq", "ac"):
        home, url = pair.side[side]
        pair.mp.setenv("MEMLIFE_HOME", str(home))
        config = RunConfig(dry_run=False, now=CUTOFF, store=url, eval_cases=cases,
                           receipts=f"file://{home / 'receipts'}")  # fmt: skip
        with inject(point), pytest.raises(InjectedFault):
            run_local(config)
    pair.assert_same()
    sq, ac = night(pair, cases)
    assert sq["lifecycle"] == ac["lifecycle"], (sq["lifecycle"], ac["lifecycle"])
    assert sq["status"] == ac["status"] == "success"
    check(pair)


def test_erasing_a_source_of_a_held_replacement_then_releasing_it(pair: Pair) -> None:
    """A replacement is held, one of its sources erased (the rebuild deferred), the hold
    released (the rebuild done), a --pending erase, then a night: both stores alike."""
    recs = demo()
    pair.seed(recs)
    cases = gate_cases(pair.tmp / "x.db", recs)
    night(pair, cases)
    check(pair)
    now = pair.records("sq")
    rep = next(
        r for i, r in sorted(now.items())
        if i.startswith("r-") and len(r["provenance"]["supersedes"]) >= 3
    )  # fmt: skip
    src = rep["provenance"]["supersedes"][0]
    pair.both("hold", "place", "--id", rep["id"])
    check(pair)
    a, b = pair.both("erase", "--actor", rep["actor_id"], "--id", src, "--yes")
    check(pair)
    a, b = pair.both("hold", "release", "--id", rep["id"])
    pair.match_replacements()
    check(pair)
    a, b = pair.both("erase", "--actor", rep["actor_id"], "--subject", rep["subject"], "--yes")
    check(pair)
    sq, ac = night(pair, cases, (CUTOFF + timedelta(days=1)).isoformat())
    assert sq["lifecycle"] == ac["lifecycle"], (sq["lifecycle"], ac["lifecycle"])
    check(pair)
