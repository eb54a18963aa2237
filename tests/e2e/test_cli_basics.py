"""The CLI as a new user meets it: fast help, one-line errors, safe defaults, auto engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from memlife import __version__
from memlife.cli import COMMANDS
from memlife.model import Status
from memlife.stores.sqlite import SqliteStore
from tests.conftest import REPO
from tests.support.cli import invoke

FIXED_NOW = "2026-11-01T00:00:00Z"


def one_line_error(code: int, err: str, expected_code: int = 2) -> str:
    # the engine line is the run's first word, not part of the error
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("engine: ")]
    assert code == expected_code, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in err
    return lines[0]


def write_records(path: Path, n: int = 13) -> None:
    from memlife.demo import generate

    with SqliteStore(path) as store:
        store.put_many(list(generate(n, seed=3)))


# -- fast help, version, the command table ---------------------------------------------------


def test_version() -> None:
    code, out, _ = invoke("--version")
    assert code == 0 and out.strip() == f"memlife {__version__}"


def test_help_lists_every_command_without_loading_them() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); sys.argv = ['memlife', '--help']\n"
        "from memlife.cli import main\n"
        "try: main()\nexcept SystemExit: pass\n"
        "heavy = [m for m in ('memlife.pipeline', 'memlife.model', 'pydantic', 'numpy', 'prefect',"
        " 'pyarrow', 'rich') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    ).stdout
    assert "HEAVY=\n" in out or out.rstrip().endswith("HEAVY=")
    for name in COMMANDS:
        assert f"  {name} " in out


def test_command_table_matches_the_modules() -> None:
    """COMMANDS (what --help shows without importing) is what the modules register."""
    from importlib import import_module

    holder = typer.Typer()
    for module in sorted({m for m, _ in COMMANDS.values()}):
        import_module(module).register(holder)
    group = typer.main.get_command(holder)
    fix = "update COMMANDS in memlife/cli/__init__.py"
    assert sorted(group.commands) == sorted(COMMANDS), fix
    for name, cmd in group.commands.items():
        assert (cmd.help or "").strip().splitlines()[0] == COMMANDS[name][1], f"{name}: {fix}"


def test_subcommand_help_and_unknown_command() -> None:
    code, out, _ = invoke("receipts", "--help")
    assert code == 0 and "verify" in out and "list" in out
    code, _, err = invoke("no-such-command")
    assert code == 2 and "Traceback" not in err


# -- one-line errors, nothing created ---------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["export"],
        ["recall", "--actor", "u1", "tea"],
        ["run", "--dry-run"],
        ["quarantine", "list"],
        ["receipts", "verify", "r-1"],
        ["erase", "--actor", "u1", "--subject", "tea"],
    ],
)
def test_mistyped_store_path_is_refused(home: Path, tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "typo" / "memlfie.db"
    code, _, err = invoke(*args, "--store", f"sqlite:///{missing}")
    assert "no such file" in one_line_error(code, err)
    assert not missing.exists() and not missing.parent.exists()  # no empty database made


@pytest.mark.parametrize(
    "store", ["mysql://db/x", "memlife.db", "sqlite://relative.db", "sqlite:///"]
)
def test_bad_store_url_is_one_line(home: Path, store: str) -> None:
    code, _, err = invoke("run", "--dry-run", "--store", store)
    one_line_error(code, err)


def test_bad_receipts_url_is_one_line(home: Path) -> None:
    write_records(home / "memlife.db")
    code, _, err = invoke("run", "--dry-run", "--receipts", "ftp://host/x")
    assert "receipts" in one_line_error(code, err)


def test_policy_typo_is_one_line(home: Path, tmp_path: Path) -> None:
    write_records(home / "memlife.db")
    code, _, err = invoke("run", "--dry-run", "--policy", "policies/defualt.yaml")
    assert "not found" in one_line_error(code, err)
    bad = tmp_path / "bad.yaml"
    text = (REPO / "policies" / "default.yaml").read_text()
    bad.write_text(text.replace("version:", "verison:", 1))
    code, _, err = invoke("run", "--dry-run", "--policy", str(bad))
    one_line_error(code, err)


def test_since_typo_is_one_line(home: Path) -> None:
    code, _, err = invoke("receipts", "list", "--since", "lastweek")
    assert "lastweek" in one_line_error(code, err)


def test_chat_without_a_key_is_one_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    code, _, err = invoke("chat", "--actor", "u1", input="hello\n")
    assert "ANTHROPIC_API_KEY" in one_line_error(code, err)


def test_unexpected_exception_is_one_line(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_records(home / "memlife.db")

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk on fire\nsecond line")

    monkeypatch.setattr("memlife.cli.run.run_local", boom)
    code, _, err = invoke("run", "--dry-run", "--engine", "local")
    assert one_line_error(code, err, 1) == "error: OSError: disk on fire second line"
    monkeypatch.setenv("MEMLIFE_DEBUG", "1")
    with pytest.raises(OSError):
        invoke("run", "--dry-run", "--engine", "local")


# -- safe defaults ----------------------------------------------------------------------------


def test_demo_refuses_a_store_with_records(home: Path) -> None:
    code, _, err = invoke("demo", "--records", "20")
    assert code == 0, err
    code, _, err = invoke("demo", "--records", "20")
    assert "already holds records" in one_line_error(code, err)
    with SqliteStore(home / "memlife.db") as store:
        assert store.count() == 20
    code, _, err = invoke("demo", "--records", "20", "--seed", "8", "--force")
    assert code == 0, err


def test_demo_force_never_overwrites_a_hold_nor_writes_erased_content_back(home: Path) -> None:
    """Session 27 review: `demo --force` upserted by id, so a second demo dropped a legal
    hold and brought an erased record back, active, with no receipt (invariants 1, 2, 11).
    It now inserts only, as an import does."""
    code, _, err = invoke("demo", "--records", "30", "--seed", "7")
    assert code == 0, err
    with SqliteStore(home / "memlife.db") as store:
        held, erased = [r for r in store.iter_all() if r.status is Status.active][:2]
    code, _, err = invoke("hold", "place", "--id", held.id)
    assert code == 0, err
    code, _, err = invoke("erase", "--actor", erased.actor_id, "--id", erased.id, "--yes")
    assert code == 0, err
    with SqliteStore(home / "memlife.db") as store:
        after_erase = sorted((r.id, r.content) for r in store.iter_all())
    code, _, err = invoke("demo", "--records", "30", "--seed", "7", "--force", "--json")
    assert code == 0, err
    with SqliteStore(home / "memlife.db") as store:
        kept = store.get(held.id)
        assert kept is not None and kept.retention_class.value == "legal_hold"
        assert store.get(erased.id) is None
        assert sorted((r.id, r.content) for r in store.iter_all()) == after_erase


def test_purge_previews_without_yes(home: Path) -> None:
    write_records(home / "memlife.db", 5)
    with SqliteStore(home / "memlife.db") as store:
        ids = [r.id for r in store.iter_all()][:2]
        store.set_status(ids, Status.quarantined)
    later = "2099-01-01T00:00:00Z"
    code, out, err = invoke("quarantine", "purge", "--older-than", "0", "--now", later, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["preview"] and sorted(doc["ids"]) == sorted(ids)
    with SqliteStore(home / "memlife.db") as store:
        assert store.count() == 5  # nothing deleted
    code, _, err = invoke("quarantine", "purge", "--older-than", "0", "--now", later, "--yes")
    assert code == 2 and "ahead" in err  # a purge never runs on a clock far in the future
    code, _, err = invoke("quarantine", "purge", "--older-than", "0", "--yes")
    with SqliteStore(home / "memlife.db") as store:
        assert store.count() == 3, err


def test_erase_previews_and_reports_no_match(home: Path) -> None:
    code, out, err = invoke(
        "remember", "--actor", "u1", "--subject", "beverage", "I only drink green tea.", "--json"
    )
    assert code == 0, err
    rid = json.loads(out)["id"]
    code, out, err = invoke("erase", "--actor", "u1", "--subject", "beverage", "--json")
    assert code == 0 and json.loads(out)["ids"] == [rid], err
    with SqliteStore(home / "memlife.db") as store:
        assert store.get(rid) is not None  # preview only
    code, _, err = invoke("erase", "--actor", "u1", "--subject", "no-such-subject", "--yes")
    assert "nothing matched" in err and code == 1
    code, _, err = invoke("erase", "--actor", "u1", "--subject", "beverage", "--yes")
    assert code == 0, err
    with SqliteStore(home / "memlife.db") as store:
        assert store.get(rid) is None


def test_an_erase_that_matches_nothing_exits_1_and_runs_nothing(home: Path) -> None:
    """Session 28 review: the preview of an erase matching nothing exited 0, and with
    --yes a manual run wrote a "success" receipt before the "nothing matched" error."""
    code, _, err = invoke("remember", "--actor", "u1", "--subject", "beverage", "Drinks tea.")
    assert code == 0, err
    runs = home / "receipts" / "runs"
    before = sorted(runs.rglob("receipt.json")) if runs.exists() else []
    for yes in ([], ["--yes"]):
        code, _, err = invoke("erase", "--actor", "u1", "--subject", "no-such-subject", *yes)
        assert code == 1 and "nothing matched" in err, (yes, code, err)
        code, _, err = invoke("erase", "--actor", "u1", "--id", "m-nope", *yes)
        assert code == 1 and "nothing matched" in err, (yes, code, err)
        assert "success" not in err
    code, out, _ = invoke("erase", "--actor", "u1", "--subject", "nope", "--json")
    assert code == 1 and json.loads(out)["count"] == 0
    after = sorted(runs.rglob("receipt.json")) if runs.exists() else []
    assert after == before  # no manual run was started for nothing


# -- the engine is chosen, and said ------------------------------------------------------------


def test_prefect_api_detection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlife.cli.common import prefect_api_url

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.delenv("PREFECT_PROFILES_PATH", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    assert prefect_api_url() is None
    (tmp_path / "profiles.toml").write_text(
        'active = "prod"\n[profiles.local]\n[profiles.prod]\nPREFECT_API_URL = "http://p:4200/api"\n'
    )
    assert prefect_api_url() == "http://p:4200/api"
    monkeypatch.setenv("PREFECT_PROFILE", "local")
    assert prefect_api_url() is None
    monkeypatch.setenv("PREFECT_API_URL", "http://env:4200/api")
    assert prefect_api_url() == "http://env:4200/api"


def test_dry_run_on_a_small_store_is_local(home: Path, tmp_path: Path) -> None:
    """13 records, no Prefect API configured: the local engine, no temporary server (which
    alone used to cost 35 s). Its CPU time is bench/bounds.py's figure."""
    write_records(home / "memlife.db", 13)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")  # no profile with an API
    exe = Path(sys.executable).parent / "memlife"
    res = subprocess.run(
        [str(exe), "run", "--dry-run", "--now", FIXED_NOW],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "engine: local" in res.stderr and "no Prefect API configured" in res.stderr
    assert "13" in res.stdout  # the total row of the table


def test_hold_place_names_ids_not_found_and_already_held(home: Path) -> None:
    """Session 28 review: `hold place --id m-nope` printed only "held: -" (exit 3), and a
    second place of a held id printed "held: ..." again."""
    code, out, err = invoke("remember", "--actor", "u1", "Drinks tea.", "--json")
    assert code == 0, err
    rid = json.loads(out)["id"]
    code, _, err = invoke("hold", "place", "--id", rid)
    assert code == 0 and f"held: {rid}" in err, err
    code, _, err = invoke("hold", "place", "--id", rid, "--id", "m-nope")
    assert code == 3, err
    assert "held: -" in err and f"already held: {rid}" in err and "not found: m-nope" in err


def test_a_hold_on_ids_that_do_not_exist_writes_no_receipt_and_exits_1(home: Path) -> None:
    """Session 29 walk-through: `hold place --id m-nope` wrote a `success` receipt for a hold
    on nothing (exit 3), one a reviewer could cite; "not found" now exits 1 everywhere."""
    code, out, err = invoke("remember", "--actor", "u1", "Drinks tea.", "--json")
    assert code == 0, err
    code, out, _ = invoke("receipts", "list", "--json")
    before = json.loads(out) if code == 0 else []
    for verb in ("place", "release"):
        code, _, err = invoke("hold", verb, "--id", "m-nope", "--id", "m-nope-2")
        line = one_line_error(code, err, expected_code=1)
        assert "no record has id m-nope, m-nope-2" in line, line
    code, _, err = invoke("hold", "place", "--actor", "u1", "--subject", "no such subject")
    assert "has subject 'no such subject'" in one_line_error(code, err, expected_code=1)
    code, _, err = invoke("review", "resolve", "rv-nope", "--decision", "keep", "--reviewer", "r")
    assert "review item rv-nope: not found" in one_line_error(code, err, expected_code=1)
    code, out, _ = invoke("receipts", "list", "--json")
    assert (json.loads(out) if code == 0 else []) == before  # no run was started


def test_an_engine_chosen_explicitly_is_still_named(home: Path) -> None:
    """Session 29 walk-through: `--engine local` printed no engine line, so a log of a run
    started with the option did not say which engine ran it."""
    write_records(home / "memlife.db", 3)
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--now", FIXED_NOW)
    assert code == 0, err
    assert "engine: local (--engine)" in err, err
