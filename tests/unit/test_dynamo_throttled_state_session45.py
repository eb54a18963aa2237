"""Session 45 (audit 45f): a night on AgentCore whose DynamoDB state table throttles past botocore's attempts at a
point of the run, then a clean rerun, against the same night on SQLite (audit 45f, backend
parity).

The adversary is the state table: from its k-th call of one operation on, every call fails
``ThrottlingException`` / ``ProvisionedThroughputExceededException`` (injected by a botocore
event hook on the real client, as botocore raises it once its own retries are spent). The
first run must end as a clear failure or partial failure; its rerun must end ``success``
and leave the records and the receipts (record, action, outcome) SQLite's night leaves."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.awsrequest import AWSResponse
from typer.testing import CliRunner

import memlife.state as state_mod
from memlife.cli import app
from memlife.demo import generate
from memlife.state.dynamodb import DynamoState
from memlife.stores.sqlite import SqliteStore
from tests.fakes.agentcore import AgentCoreHarness, bulk_load
from tests.support.aws_state import provision, state_url
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases, operation_receipts
from tests.support.replacement_ids import REPLACEMENT, names, of_receipts, renamed

runner = CliRunner()


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


def _night(home: Path, store: str, cases: str, *extra: str) -> tuple[int, dict]:
    result = runner.invoke(app, ["run", "--engine", "local", "--now", CUTOFF.isoformat(),
                                 "--store", store, "--receipts", f"file://{home / 'receipts'}",
                                 "--eval-cases", cases, "--json", *extra])  # fmt: skip
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    try:
        return result.exit_code, json.loads(result.stdout)
    except ValueError:
        return result.exit_code, {"output": result.output[-500:]}


def _view(records: Any) -> dict[str, tuple]:
    """A replacement named by what it supersedes: its id is keyed by its store's run secret
    (tests/support/replacement_ids.py)."""
    view = {r.id: (r.status.value, r.content, r.provenance.replaced_by,
                   tuple(r.provenance.supersedes)) for r in records}  # fmt: skip
    return renamed(view, names({i: v[3] for i, v in view.items() if REPLACEMENT.fullmatch(i)}))


def _done(home: Path) -> set[tuple]:
    ops = operation_receipts(home / "receipts").values()
    ids = of_receipts(ops)
    return {renamed((o["record_id"], o["action"], o["outcome"]), ids) for o in ops}


class Throttle:
    """From the ``at``-th call of ``op`` on (or from the first put of a ``kind`` operation
    item on), every call of it is throttled."""

    def __init__(self, op: str, at: int, code: str, kind: str | None = None) -> None:
        self.op, self.at, self.code, self.kind = op, at, code, kind
        self.calls = self.thrown = 0

    def __call__(self, params: dict, **_: Any) -> tuple[AWSResponse, dict] | None:
        self.calls += 1
        if self.kind is not None and not self.thrown:
            body = json.loads(params["body"])
            items = [body.get("Item", {})]
            items += [t["Put"]["Item"] for t in body.get("TransactItems", []) if "Put" in t]
            if not any(i.get("kind", {}).get("S") == self.kind for i in items):
                return None
        elif self.calls < self.at:
            return None
        self.thrown += 1
        parsed = {"Error": {"Code": self.code, "Message": "Rate exceeded"},
                  "ResponseMetadata": {"HTTPStatusCode": 400}}  # fmt: skip
        return AWSResponse("https://dynamodb", 400, {}, None), parsed


@pytest.mark.parametrize(
    ("op", "at", "code"),
    [("TransactWriteItems", 4, "ThrottlingException"),
     ("UpdateItem", 6, "ProvisionedThroughputExceededException"),
     ("BatchGetItem", 12, "ProvisionedThroughputExceededException")],
)  # fmt: skip
def test_a_night_throttled_on_its_state_table_then_rerun_ends_as_sqlites(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    op: str, at: int, code: str,
) -> None:  # fmt: skip
    """The state table throttles for good from one point of the night on: the night fails
    (or fails its shards), and its rerun on a calm table converges on SQLite's night."""
    _throttled_then_rerun(harness, tmp_path, monkeypatch, Throttle(op, at, code))


def test_a_plan_throttled_between_a_groups_write_and_its_supersedes_makes_one_replacement(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state table throttles every call that journals a supersede operation (a PutItem
    or a transaction) from the first on: the first group's write_replacement is journaled,
    its supersedes are not (the SQLite journal plans both in one transaction). The rerun must still make one replacement per group,
    with the same records and receipts as SQLite's night, not a second one over the
    first replacement and its sources."""
    throttle = Throttle("PutItem", 0, "ThrottlingException", kind="supersede")
    _throttled_then_rerun(harness, tmp_path, monkeypatch, throttle, ("TransactWriteItems",))


def _throttled_then_rerun(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    throttle: Throttle, also: tuple[str, ...] = (),
) -> None:  # fmt: skip
    op = throttle.op
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MEMLIFE_STATE", "local")
    monkeypatch.setenv("MEMLIFE_TASK_RETRIES", "0")
    recs = list(generate(60, seed=3, anchor=ANCHOR, per_actor=30))
    cases = gate_cases(tmp_path / "x.db", recs)
    sq_home = tmp_path / "sq"
    sq_home.mkdir()
    db = SqliteStore(sq_home / "memlife.db")
    db.put_many(recs)
    db.close()
    monkeypatch.setenv("MEMLIFE_HOME", str(sq_home))
    code_sq, sq = _night(sq_home, f"sqlite:///{sq_home / 'memlife.db'}", cases)
    assert code_sq == 0 and sq["status"] == "success"

    store = harness.store()
    bulk_load(store, harness.fake, recs)
    query = {"region": "us-east-1", "endpoint_url": harness.fake.endpoint_url,
             "sidecar_table": harness.sidecar_table}  # fmt: skip
    url = f"agentcore://{harness.fake.memory_id}?{urlencode(query)}"
    surl = state_url(f"st45f-{op}-{throttle.kind}")
    provision(surl)
    made = DynamoState.__init__

    def hooked(self: DynamoState, *a: Any, **kw: Any) -> None:
        made(self, *a, **kw)
        for name in (op, *also):
            self.ddb.meta.events.register_first(f"before-call.dynamodb.{name}", throttle)

    ac_home = tmp_path / "ac"
    monkeypatch.setenv("MEMLIFE_HOME", str(ac_home))
    monkeypatch.setattr(state_mod, "_open", {})
    monkeypatch.setattr(DynamoState, "__init__", hooked)
    code1, first = _night(ac_home, url, cases, "--state", surl)
    assert throttle.thrown, "the throttle never fired"
    assert code1 != 0 or first.get("status") in ("partial_failure", "failure"), first
    monkeypatch.setattr(DynamoState, "__init__", made)
    monkeypatch.setattr(state_mod, "_open", {})
    code2, again = _night(ac_home, url, cases, "--state", surl)
    assert code2 == 0 and again["status"] == "success", again
    sq_store = SqliteStore(sq_home / "memlife.db")
    try:
        assert _view(store.iter_all()) == _view(sq_store.iter_all())
    finally:
        sq_store.close()
    assert _done(ac_home) == _done(sq_home)
