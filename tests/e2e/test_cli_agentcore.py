"""``--store agentcore://MEMORY_ID?region=..&endpoint_url=..`` on every CLI command that takes
``--store``: the fake AgentCore data plane behind real boto3, moto DynamoDB for the sidecar.
Each command opens the store from the URL alone, as it would in production."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.demo import generate
from tests.fakes.agentcore import AgentCoreHarness
from tests.support.lifecycle import ANCHOR, CUTOFF, gate_cases

runner = CliRunner()


@pytest.fixture(scope="module")
def harness() -> Iterator[AgentCoreHarness]:
    h = AgentCoreHarness()
    yield h
    h.close()


@pytest.fixture()
def env(harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMLIFE_HOME", str(home))
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    harness.store().close = lambda: None  # type: ignore[method-assign]  # fresh memory + sidecar
    query = {
        "region": "us-east-1",
        "endpoint_url": harness.fake.endpoint_url,
        "sidecar_table": harness.sidecar_table,
    }
    url = f"agentcore://{harness.fake.memory_id}?{urlencode(query)}"
    return {
        "url": url,
        "fake": harness.fake,
        "home": home,
        "tmp": tmp_path,
        "receipts": f"file://{home / 'receipts'}",
    }


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout


def test_import_dry_run_export_round_trip(env: dict) -> None:
    records = list(generate(120, seed=5, anchor=ANCHOR))
    src = env["tmp"] / "in.jsonl"
    src.write_text("".join(r.to_json() + "\n" for r in records))
    code, out = cli("import", str(src), "--store", env["url"], "--json")
    assert code == 0, out
    result = json.loads(out)
    assert (result["imported"], result["invalid"], result["conflicts"]) == (120, [], [])
    fake = env["fake"]
    assert len(fake.records) == 120 and fake.ops("create")
    state = copy.deepcopy(fake.records)

    code, out = cli(
        "run",
        "--dry-run",
        "--engine",
        "local",
        "--now",
        CUTOFF.isoformat(),
        "--store",
        env["url"],
        "--receipts",
        env["receipts"],
        "--json",
    )
    assert code == 0, out
    summary = json.loads(out)
    assert summary["mode"] == "dry_run" and summary["status"] == "success"
    assert summary["records"] == 120 and summary["counts"]["retain"] < 120
    assert fake.records == state, "a dry run changes nothing in AgentCore"
    assert not fake.ops("update") and not fake.ops("delete")

    dst = env["tmp"] / "out.jsonl"
    code, out = cli("export", "--store", env["url"], "-o", str(dst))
    assert code == 0, out
    exported = {d["id"]: d for d in map(json.loads, dst.read_text().splitlines())}
    assert exported == {r.id: json.loads(r.to_json()) for r in records}


def test_every_store_command_takes_an_agentcore_url(env: dict) -> None:
    url, fake = env["url"], env["fake"]
    code, out = cli(
        "demo", "-n", "100", "--seed", "3", "--anchor", ANCHOR.isoformat(), "--store", url, "--json"
    )
    assert code == 0, out
    assert json.loads(out)["records"] == 100 and len(fake.records) == 100
    assert json.loads(out)["store"].startswith(f"agentcore://{fake.memory_id}?")

    # an apply run, then its evidence verified against AgentCore and the journal beside it
    cases = gate_cases(env["home"] / "x.db", generate(100, seed=3, anchor=ANCHOR))  # the same demo
    code, out = cli(
        "run",
        "--engine",
        "local",
        "--now",
        CUTOFF.isoformat(),
        "--store",
        url,
        "--receipts",
        env["receipts"],
        "--eval-cases",
        cases,
        "--json",
    )
    assert code == 0, out
    run = json.loads(out)
    assert run["mode"] == "apply" and run["status"] == "success"
    assert run["lifecycle"]["superseded"] > 0 and run["lifecycle"]["consolidated"] > 0
    assert len(fake.records) == 100 + run["lifecycle"]["consolidated"] - run["lifecycle"]["deleted"]
    assert (env["home"] / "journal.db").exists()
    code, out = cli(
        "receipts", "verify", run["run_id"], "--store", url, "--receipts", env["receipts"], "--json"
    )
    assert code == 0, out
    assert json.loads(out)["ok"] is True
    code, out = cli(
        "run",
        "--retry-only",
        "--engine",
        "local",
        "--now",
        CUTOFF.isoformat(),
        "--store",
        url,
        "--receipts",
        env["receipts"],
        "--json",
    )
    assert code == 0 and json.loads(out)["mode"] == "retry", out

    # the online library
    code, out = cli(
        "remember",
        "Prefers aisle seats on long flights.",
        "--actor",
        "u-cli",
        "--subject",
        "seat",
        "--store",
        url,
        "--json",
    )
    assert code == 0, out
    remembered = json.loads(out)
    assert remembered["created"] is True
    code, out = cli("recall", "which seat on a plane", "--actor", "u-cli", "--store", url, "--json")
    assert code == 0, out
    assert [h["id"] for h in json.loads(out)][:1] == [remembered["id"]]

    # quarantine and erasure
    code, out = cli("quarantine", "list", "--store", url, "--json")
    assert code == 0 and json.loads(out) == [], out
    code, out = cli(
        "erase",
        "--actor",
        "u-cli",
        "--subject",
        "seat",
        "--store",
        url,
        "--receipts",
        env["receipts"],
        "--yes",
        "--json",
    )
    assert code == 0, out
    assert fake.record_by_memlife_id(remembered["id"]) is None
    code, out = cli("recall", "which seat on a plane", "--actor", "u-cli", "--store", url, "--json")
    assert code == 0 and json.loads(out) == [], out


def test_a_bad_agentcore_url_is_a_clear_error(env: dict) -> None:
    result = runner.invoke(app, ["export", "--store", env["url"] + "&regoin=eu-west-1"])
    assert result.exit_code != 0
    assert "unknown parameter" in str(result.exception) + result.output
