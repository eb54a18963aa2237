"""Guards left untested by the twenty-seventh audit (session 37): the CLI commands `run`,
`receipts`, `quarantine`, `ledger`, `eval` and `config` (exit codes a script reads, flags
refused by name, stored ids printed as stored: never markup nor terminal controls).
Fifteen of them failed on the code before session 37."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.audit import FileSink, ReceiptWriteError
from memlife.model import MemoryRecord, MemoryType, Status
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

NOW = "2026-12-01T02:00:00Z"
FACTS = "/users/u-1/facts"
ESC_ID = "q-\x1b[31mred"  # an ESC: a terminal would start a colour escape
CLOSE_ID = "q-[/]"  # rich reads "[/]" as a closing tag with nothing to close
BOLD_ID = "q-[bold]b"  # rich reads "[bold]" as a style and shows "q-b"


def _record(rid: str, n: int, **kw: object) -> MemoryRecord:
    fields: dict[str, object] = {
        "id": rid, "actor_id": "u-1", "namespace": FACTS, "memory_type": MemoryType.semantic,
        "content": f"Has an appointment number {n}.", "created_at": datetime(2025, 1, 1, tzinfo=UTC),
        "owner": "u-1",
    }  # fmt: skip
    fields.update(kw)
    return MemoryRecord(**fields)


def _seed(home: Path, records: list[MemoryRecord]) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    db = home / "memlife.db"
    store = SqliteStore(db)
    try:
        store.put_many(records)
    finally:
        store.close()
    return db


def _quarantined(home: Path, *ids: str) -> Path:
    since = datetime(2025, 1, 2, tzinfo=UTC)
    return _seed(
        home,
        [
            _record(rid, n, status=Status.quarantined, status_changed_at=since)
            for n, rid in enumerate(ids)
        ],
    )


def _expired(home: Path, *ids: str, actor: str = "u-1") -> Path:
    """Records past their hard expiry in an enforced namespace: an apply run deletes them."""
    gone = datetime(2025, 6, 1, tzinfo=UTC)
    return _seed(home, [_record(r, n, expires_at=gone, actor_id=actor) for n, r in enumerate(ids)])


def _apply(*extra: str) -> dict[str, object]:
    code, out, err = invoke("run", "--engine", "local", "--now", NOW, "--json", *extra)
    assert code == 0, err
    result: dict[str, object] = json.loads(out)
    return result


def _status(home: Path, rid: str) -> Status | None:
    store = SqliteStore(home / "memlife.db")
    try:
        r = store.get(rid)
        return None if r is None else r.status
    finally:
        store.close()


# -- memlife run: refusals naming the flag, exit codes ------------------------------------------
def test_run_refuses_retry_only_with_dry_run_naming_both(home: Path) -> None:
    """Attacks `if retry_only and dry_run` in `memlife/cli/run.py::run`: a dry run that is told
    to drain the retry queue must be refused (exit 2), not run as something else."""
    _expired(home, "m-1")
    code, _, err = invoke("run", "--dry-run", "--retry-only", "--engine", "local", "--now", NOW)
    assert code == 2, err
    assert "--retry-only" in err and "--dry-run" in err


def test_run_refuses_a_bad_now_naming_the_flag(home: Path) -> None:
    """Attacks the `--now` prefix of the parse_now refusal in `memlife/cli/run.py::run`."""
    _expired(home, "m-1")
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--now", "yesterday")
    assert code == 2
    assert err.startswith("error: --now"), err


def test_run_names_the_flag_of_a_mistyped_store_and_a_bad_receipts_url(
    home: Path, tmp_path: Path
) -> None:
    """Attacks `check_store(store, must_exist=True)` and `check_receipts(receipts)` in
    `memlife/cli/run.py::run`: the run's own later refusals do not say which flag was wrong."""
    _expired(home, "m-1")
    typo = tmp_path / "memlfie.db"
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--store", f"sqlite:///{typo}")
    assert code == 2 and "(from --store)" in err, err
    assert not typo.exists()
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--receipts", "ftp://host/x")
    assert code == 2 and err.startswith("error: --receipts"), err


def test_run_refuses_a_cutoff_before_any_date_it_can_compute(home: Path) -> None:
    """Attacks the missing lower bound of `--now` (`operator_config` checks only a cutoff
    ahead of the clock) in `memlife/cli/run.py::run`: a refusal naming --now, nothing written."""
    _expired(home, "m-1")
    code, _, err = invoke("run", "--engine", "local", "--now", "0001-01-03T00:00:00Z")
    assert code == 2 and "--now" in err, err
    assert not (home / "receipts" / "runs").exists()


class _CountingSink(FileSink):
    """A file sink that counts the run-day folders it is asked to list."""

    day_lists = 0

    def list(self, prefix: str):  # type: ignore[no-untyped-def]
        if prefix.startswith("runs/") and prefix.count("/") == 4:
            type(self).day_lists += 1
        return super().list(prefix)


def test_a_future_cutoff_run_lists_a_bounded_number_of_days(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks `last = max(cutoff, now)` of the day loop in
    `memlife/run_abandoned.py::seal_abandoned`, as `memlife run --allow-future-cutoff` reaches
    it: the look-around must stay a window, not every day up to the cutoff."""
    _expired(home, "m-1")
    monkeypatch.setattr(_CountingSink, "day_lists", 0)
    sink = _CountingSink(home / "receipts")
    monkeypatch.setattr("memlife.run_start.open_sink", lambda url=None: sink)
    code, _, err = invoke(
        "run", "--engine", "local", "--now", "2200-01-01T00:00:00Z", "--allow-future-cutoff"
    )
    assert code == 0, err
    assert _CountingSink.day_lists <= 60, _CountingSink.day_lists


@pytest.mark.parametrize("size", ["0", "10001"])
def test_run_bounds_its_page_size(home: Path, size: str) -> None:
    """Attacks `min=1, max=10_000` of `--page-size` in `memlife/cli/run.py::run`."""
    _expired(home, "m-1")
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--page-size", size)
    assert code == 2 and "--page-size" in err


class _OperationReceiptsDown(FileSink):
    """Operation receipts cannot be written (an outage); the run's own files can."""

    def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
        if key.startswith("operations/"):
            raise ReceiptWriteError(f"{key}: simulated outage")
        return super().put_new(key, body, content_type)


@pytest.mark.parametrize("json_out", [False, True])
def test_a_partial_run_exits_3_with_and_without_json(
    home: Path, monkeypatch: pytest.MonkeyPatch, json_out: bool
) -> None:
    """Attacks `exit_code` (`.get(status, EXIT_PARTIAL)`) and the `--json` exit in
    `memlife/cli/run.py::run`: a run whose receipts could not all be written is
    `partial_failure`, exit 3 either way (README: Exit codes), never 0 nor 1."""
    _expired(home, "m-1", "m-2")
    sink = _OperationReceiptsDown(home / "receipts")
    monkeypatch.setattr("memlife.run_start.open_sink", lambda url=None: sink)
    args = ["run", "--engine", "local", "--now", NOW] + (["--json"] if json_out else [])
    code, out, err = invoke(*args)
    assert code == 3, err
    if json_out:
        assert json.loads(out)["status"] == "partial_failure"
    else:
        assert "status: partial_failure" in err


def test_a_scope_matching_no_record_is_named_escaped_and_counted(home: Path) -> None:
    """Attacks `add_scope_unmatched` and the scope_unmatched warning of `memlife/cli/run.py::run`:
    an actor the operator pasted with a control character is shown escaped."""
    _expired(home, "m-1")
    code, _, err = invoke(
        "run", "--dry-run", "--engine", "local", "--now", NOW, "--actor", "u-\x1b[2J9"
    )
    assert code == 0, err
    assert "\x1b" not in err
    assert "x1b[2J9" in err and "scope_unmatched" in err
    code, out, err = invoke(
        "run", "--dry-run", "--engine", "local", "--now", NOW, "--actor", "u-9", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["scope_unmatched"] == [{"option": "--actor", "value": "u-9"}]
    assert result["other_counts"]["scope_unmatched:--actor=u-9"] == 1


def test_a_dry_run_names_the_consolidator_an_apply_run_would_use(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks `model_estimate` (key: anthropic, none: extractive) and the dry-run branch of
    `model_line` in `memlife/cli/run.py`: a dry run with a key set calls no model and does
    not claim that none is configured."""
    _expired(home, "m-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    code, out, err = invoke("run", "--dry-run", "--engine", "local", "--now", NOW, "--json")
    assert code == 0, err
    model = json.loads(out)["model"]
    assert model["apply_consolidator"].startswith("anthropic:") and model["calls"] == 0
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--now", NOW)
    assert code == 0 and "none configured" not in err
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--now", NOW)
    assert code == 0 and "model: none configured" in err
    code, out, err = invoke(
        "run", "--dry-run", "--engine", "local", "--now", NOW, "--no-consolidate", "--json"
    )
    assert code == 0 and json.loads(out)["model"]["apply_consolidator"] is None


def test_an_applied_run_exits_0_whatever_its_receipts_path_holds(
    home: Path, tmp_path: Path
) -> None:
    """Attacks `err_console.print(f"manifest: {result['manifest']}")` (markup on) in
    `memlife/cli/run.py::run`: the exit code must say what the run did."""
    _expired(home, "m-1")
    receipts = f"file://{tmp_path / 'receipts[/]a'}"
    code, _, err = invoke("run", "--engine", "local", "--now", NOW, "--receipts", receipts)
    assert _status(home, "m-1") is None  # the run deleted it: it finished
    assert code == 0, err
    assert "status: success" in err


def test_the_counts_table_shows_a_policy_version_as_written(home: Path, tmp_path: Path) -> None:
    """Attacks `Table(title=f"... (policy {result['policy_version']})")` in
    `memlife/cli/run.py::counts_table`."""
    import yaml

    _expired(home, "m-1")
    policy = yaml.safe_load(Path("policies/default.yaml").read_text())
    policy["version"] = "2026.[/]1"
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    code, out, err = invoke(
        "run", "--dry-run", "--engine", "local", "--now", NOW, "--policy", str(path)
    )
    assert code == 0, err
    assert "2026.[/]1" in out


# -- memlife quarantine ----------------------------------------------------------------------
def test_quarantine_restore_refuses_a_mistyped_store(home: Path, tmp_path: Path) -> None:
    """Attacks the missing `check_store(store, must_exist=True)` in
    `memlife/cli/quarantine.py::restore` (run, purge and list have it)."""
    _quarantined(home, "q-1")
    typo = tmp_path / "memlfie.db"
    code, _, err = invoke("quarantine", "restore", "q-1", "--store", f"sqlite:///{typo}")
    assert code == 2, err
    assert not typo.exists()
    assert not (home / "receipts" / "runs").exists()


@pytest.mark.parametrize("yes", [[], ["--yes"]])
def test_quarantine_purge_refuses_a_mistyped_store(
    home: Path, tmp_path: Path, yes: list[str]
) -> None:
    """Attacks `check_store(store, must_exist=True)` in `memlife/cli/quarantine.py::purge`."""
    typo = tmp_path / "memlfie.db"
    args = ["quarantine", "purge", "--older-than", "1", "--store", f"sqlite:///{typo}", *yes]
    code, _, err = invoke(*args)
    assert code == 2 and "no such file" in err and "--store" in err
    assert not typo.exists()


def test_quarantine_purge_refuses_a_bad_now_naming_the_flag(home: Path) -> None:
    """Attacks `parse_time(now)` (no option name) in `memlife/cli/quarantine.py::purge`."""
    _quarantined(home, "q-1")
    code, _, err = invoke("quarantine", "purge", "--older-than", "1", "--now", "garbage")
    assert code == 2
    assert "--now" in err, err


def test_quarantine_purge_refuses_a_reference_time_far_ahead(home: Path) -> None:
    """Attacks `at > utcnow() + MAX_AHEAD` in `memlife/cli/quarantine.py::purge`: a --now
    years ahead would make every quarantined record old enough at once."""
    _quarantined(home, "q-1")
    code, _, err = invoke(
        "quarantine", "purge", "--older-than", "30", "--now", "2999-01-01T00:00:00Z", "--yes"
    )
    assert code == 2 and "--now" in err
    assert _status(home, "q-1") is Status.quarantined


def test_quarantine_purge_without_yes_changes_nothing(home: Path) -> None:
    """Attacks `if not yes` in `memlife/cli/quarantine.py::purge`: the preview deletes nothing
    and writes no run."""
    _quarantined(home, "q-1")
    code, _, err = invoke("quarantine", "purge", "--older-than", "1")
    assert code == 0, err
    assert "would purge q-1" in err
    assert _status(home, "q-1") is Status.quarantined
    assert not (home / "receipts" / "runs").exists()


def test_quarantine_list_keeps_to_the_actor(home: Path) -> None:
    """Attacks `list_quarantined(db, actor)` in `memlife/cli/quarantine.py::list_`."""
    since = datetime(2025, 1, 2, tzinfo=UTC)
    _seed(
        home,
        [
            _record("q-1", 1, status=Status.quarantined, status_changed_at=since),
            _record(
                "q-2", 2, actor_id="u-2", namespace="/users/u-2/facts", owner="u-2",
                status=Status.quarantined, status_changed_at=since,
            ),
        ],
    )  # fmt: skip
    code, out, err = invoke("quarantine", "list", "--actor", "u-2", "--json")
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == ["q-2"]


def test_quarantine_restore_of_an_unknown_id_exits_3(home: Path) -> None:
    """Attacks `or result.get("not_found")` in `memlife/cli/quarantine.py::_report`: a
    restore that restored some ids and found others not is not a plain success."""
    _quarantined(home, "q-1")
    code, out, err = invoke("quarantine", "restore", "q-1", "q-none", "--json")
    assert code == 3, err
    assert json.loads(out)["not_found"] == ["q-none"]
    assert _status(home, "q-1") is Status.active


def test_quarantine_restore_of_an_active_record_exits_3(home: Path) -> None:
    """Attacks `result["status"] != "success"` in `memlife/cli/quarantine.py::_report`: a
    restore refused (NOT_QUARANTINED) is a partial failure, exit 3, not a success."""
    _seed(home, [_record("m-1", 1)])
    code, out, err = invoke("quarantine", "restore", "m-1", "--json")
    assert code == 3, err
    result = json.loads(out)
    assert result["status"] == "partial_failure" and not result.get("not_found")


def test_quarantine_purge_preview_prints_stored_ids_as_stored(home: Path) -> None:
    """Attacks `preview` (memlife/cli/common.py, markup on, no `printable`) as
    `memlife/cli/quarantine.py::purge` calls it for stored ids."""
    _quarantined(home, CLOSE_ID, ESC_ID)
    code, _, err = invoke("quarantine", "purge", "--older-than", "1")
    assert code == 0, err
    assert f"would purge {CLOSE_ID}" in err
    assert "\x1b" not in err and "q-\\x1b[31mred" in err


def test_quarantine_restore_reports_each_id_as_stored(home: Path) -> None:
    """Attacks the markup print of `o['record_id']` in `memlife/cli/quarantine.py::_report`."""
    _quarantined(home, BOLD_ID, ESC_ID)
    code, _, err = invoke("quarantine", "restore", BOLD_ID, ESC_ID)
    assert code == 0, err
    assert f"restore {BOLD_ID}: restored" in err
    assert "\x1b" not in err


def test_quarantine_restore_of_an_unknown_markup_id_still_exits_3(home: Path) -> None:
    """Attacks `[yellow]not found[/yellow] {rid}` in `memlife/cli/quarantine.py::_report`."""
    _quarantined(home, "q-1")
    code, _, err = invoke("quarantine", "restore", "q-1", "nope[/]")
    assert _status(home, "q-1") is Status.active  # done whatever the exit says
    assert code == 3, err
    assert "nope[/]" in err


# -- memlife receipts ------------------------------------------------------------------------
def test_receipts_verify_exits_1_when_a_deleted_record_is_back(home: Path) -> None:
    """Attacks `Exit(0 if result.ok else 1)` in `memlife/cli/receipts.py::verify` (the
    plain-text path, as a script without --json reads it)."""
    _expired(home, "m-1")
    run_id = str(_apply()["run_id"])
    assert invoke("receipts", "verify", run_id)[0] == 0
    _expired(home, "m-1")  # written back behind the journal
    code, out, _ = invoke("receipts", "verify", run_id)
    assert code == 1
    assert "DELETED_RECORD_PRESENT" in out and "m-1" in out


def test_receipts_verify_lists_a_problem_whose_id_holds_markup(home: Path) -> None:
    """Attacks the markup print of problem fields in `memlife/cli/receipts.py::verify`."""
    _expired(home, CLOSE_ID)
    run_id = str(_apply()["run_id"])
    _expired(home, CLOSE_ID)
    code, out, err = invoke("receipts", "verify", run_id)
    assert code == 1
    assert "DELETED_RECORD_PRESENT" in out and CLOSE_ID in out, err


def test_receipts_verify_escapes_control_characters_of_a_stored_id(home: Path) -> None:
    """Attacks the missing `printable` on problem fields in `memlife/cli/receipts.py::verify`."""
    _expired(home, ESC_ID)
    run_id = str(_apply()["run_id"])
    _expired(home, ESC_ID)
    code, out, _ = invoke("receipts", "verify", run_id)
    assert code == 1 and "DELETED_RECORD_PRESENT" in out
    assert "\x1b" not in out and "q-\\x1b[31mred" in out


def test_receipts_verify_latest_refuses_evidence_only(home: Path) -> None:
    """Attacks `if evidence_only and asked_latest` in `memlife/cli/receipts.py::verify`."""
    _expired(home, "m-1")
    _apply()
    code, _, err = invoke("receipts", "verify", "latest", "--evidence-only")
    assert code == 2 and "--evidence-only" in err


def test_receipts_show_of_an_unknown_run_exits_1(home: Path) -> None:
    """Attacks `fail(..., 1)` of `memlife/cli/receipts.py::show` (README: exit 1 when what
    a command names does not exist); the id is echoed escaped."""
    _expired(home, "m-1")
    _apply()
    code, _, err = invoke("receipts", "show", "run-\x1b[2J")
    assert code == 1
    assert "\x1b" not in err and "run-\\x1b[2J" in err


def test_receipts_list_refuses_a_bad_day_naming_the_flag(home: Path) -> None:
    """Attacks `_day` in `memlife/cli/receipts.py`: a full ISO time is cut to its UTC day,
    anything else is refused naming --since/--until."""
    _expired(home, "m-1")
    run_id = _apply()["run_id"]
    code, out, _ = invoke("receipts", "list", "--until", "2026-12-01T01:00:00+05:00", "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == []  # 2026-11-30 UTC
    code, out, _ = invoke("receipts", "list", "--since", "2026-11-30T23:00:00-05:00", "--json")
    assert code == 0 and [r["run_id"] for r in json.loads(out)] == [run_id]  # 2026-12-01
    code, _, err = invoke("receipts", "list", "--until", "soon")
    assert code == 2 and "--until" in err


def test_receipts_list_refuses_a_bad_for_store_naming_the_flag(home: Path) -> None:
    """Attacks the `store_url_problem` check of `memlife/cli/receipts.py::_identity`."""
    code, _, err = invoke("receipts", "list", "--for-store", "bogus://x")
    assert code == 2 and "--for-store" in err


def test_receipts_history_keeps_to_the_actor(home: Path) -> None:
    """Attacks the `--actor` filter of `memlife/cli/receipts.py::history`: two actors'
    records sharing one id are two histories."""
    _expired(home, "m-1")
    _apply()
    _seed(home, [_record("m-1", 2, actor_id="u-2", namespace="/users/u-2/facts", owner="u-2",
                         expires_at=datetime(2025, 6, 1, tzinfo=UTC))])  # fmt: skip
    code, _, err = invoke("run", "--engine", "local", "--now", "2026-12-02T02:00:00Z", "--json")
    assert code == 0, err
    code, out, _ = invoke("receipts", "history", "m-1", "--json")
    assert code == 0 and {r["actor_id"] for r in json.loads(out)} == {"u-1", "u-2"}
    code, out, _ = invoke("receipts", "history", "m-1", "--actor", "u-2", "--json")
    assert code == 0 and {r["actor_id"] for r in json.loads(out)} == {"u-2"}


def test_receipts_history_title_escapes_the_id(home: Path) -> None:
    """Attacks the unescaped `title` of `print_id_table` as
    `memlife/cli/receipts.py::history` builds it from the record id."""
    _expired(home, ESC_ID)
    _apply()
    code, out, _ = invoke("receipts", "history", ESC_ID)
    assert code == 0 and "delete" in out
    assert "\x1b" not in out


# -- memlife eval ----------------------------------------------------------------------------
def _eval_store(home: Path, *rows: tuple[str, str]) -> None:
    _seed(home, [_record(rid, n, content=text) for n, (rid, text) in enumerate(rows)])


def _cases(tmp_path: Path, case_id: str, **targets: list[str]) -> str:
    case = {"id": case_id, "query": "Is the user allergic to peanuts?", "actor_id": "u-1",
            "impact": "high", "k": 3, **targets}  # fmt: skip
    path = tmp_path / "cases.yaml"
    path.write_text(json.dumps({"cases": [case]}))  # JSON is YAML
    return str(path)


def test_eval_exits_1_when_a_gate_fails_and_0_when_all_pass(home: Path, tmp_path: Path) -> None:
    """Attacks `Exit(1 if report["blocked"] else 0)` in `memlife/cli/evaluation.py`."""
    _eval_store(home, ("m-allergy", "Is allergic to peanuts."), ("m-dog", "Has a dog."))
    code, out, err = invoke("eval", "--cases", _cases(tmp_path, "c-1", forbidden=["m-allergy"]))
    assert code == 1, err
    assert "FAIL" in out
    code, out, err = invoke(
        "eval", "--cases", _cases(tmp_path, "c-1", must_retrieve=["m-allergy"]), "--json"
    )
    assert code == 0, err
    assert json.loads(out)["blocked"] is False


def test_eval_refuses_a_mistyped_store_and_a_bad_policy(home: Path, tmp_path: Path) -> None:
    """Attacks `check_store(store, must_exist=True)` and the `PolicyError` refusal of
    `memlife/cli/evaluation.py::evaluate_cmd`: exit 2, no database created."""
    _eval_store(home, ("m-allergy", "Is allergic to peanuts."))
    cases = _cases(tmp_path, "c-1", must_retrieve=["m-allergy"])
    typo = tmp_path / "memlfie.db"
    code, _, err = invoke("eval", "--cases", cases, "--store", f"sqlite:///{typo}")
    assert code == 2 and "no such file" in err
    assert not typo.exists()
    bad = tmp_path / "policy.yaml"
    bad.write_text("version: [\n")
    code, _, err = invoke("eval", "--cases", cases, "--policy", str(bad))
    assert code == 2 and err.startswith("error:"), err


def test_eval_exit_code_does_not_depend_on_markup_in_a_case_id(home: Path, tmp_path: Path) -> None:
    """Attacks the markup print of `r["id"]` in `memlife/cli/evaluation.py::evaluate_cmd`."""
    _eval_store(home, ("m-allergy", "Is allergic to peanuts."))
    code, out, err = invoke(
        "eval", "--cases", _cases(tmp_path, "c-[/]1", must_retrieve=["m-allergy"])
    )
    assert code == 0, err
    assert "c-[/]1" in out


def test_eval_init_refuses_to_overwrite_and_bad_receipts(home: Path, tmp_path: Path) -> None:
    """Attacks `output.exists() and not force` and `check_receipts` in
    `memlife/cli/evaluation.py::init`."""
    _eval_store(home, ("m-allergy", "Is allergic to peanuts."))
    out = tmp_path / "cases.yaml"
    out.write_text("keep me\n")
    code, _, err = invoke("eval", "init", "-o", str(out))
    assert code == 2 and "--force" in err
    assert out.read_text() == "keep me\n"
    fresh = tmp_path / "fresh.yaml"
    code, _, err = invoke("eval", "init", "-o", str(fresh), "--receipts", "ftp://host/x")
    assert code == 2 and "--receipts" in err
    assert not fresh.exists()
    code, _, err = invoke("eval", "init", "-o", str(fresh), "--actors", "0")
    assert code == 2 and "--actors" in err


# -- memlife ledger --------------------------------------------------------------------------
def _trail(tmp_path: Path) -> Path:
    import gzip

    event = {
        "eventSource": "bedrock-agentcore.amazonaws.com", "eventName": "GetMemoryRecord",
        "eventTime": "2026-11-30T00:00:00Z", "requestParameters": {"memoryRecordId": "m-1"},
        "responseElements": {"memoryRecord": {"memoryRecordId": "m-1", "namespaces": [FACTS]}},
    }  # fmt: skip
    path = tmp_path / "trail" / "111_CloudTrail_us-east-1_20261130T0000Z_x.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(json.dumps({"Records": [event]}).encode()))
    return path.parent


def test_ledger_ingest_refuses_a_mistyped_store(home: Path, tmp_path: Path) -> None:
    """Attacks `check_store(url, must_exist=True)` in `memlife/cli/ledger.py::_erasures_of`:
    a typo must not become an empty store (whose erasures are none)."""
    typo = tmp_path / "memlfie.db"
    code, _, err = invoke(
        "ledger", "ingest-cloudtrail", str(_trail(tmp_path)), "--store", f"sqlite:///{typo}"
    )
    assert code == 2 and "no such file" in err
    assert not typo.exists()


def test_ledger_ingest_without_a_store_file_creates_none(home: Path, tmp_path: Path) -> None:
    """Attacks the `return None` for a missing default SQLite file in
    `memlife/cli/ledger.py::_erasures_of`: the ingest runs and creates no database."""
    code, out, err = invoke(
        "ledger", "ingest-cloudtrail", str(_trail(tmp_path)), "--ledger", str(tmp_path / "l"),
        "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["rows"] == 1
    assert not (home / "memlife.db").exists()
    code, _, err = invoke(
        "ledger", "ingest-cloudtrail", str(tmp_path / "trail"), "--ledger", str(tmp_path / "l2")
    )
    assert code == 0 and "1 files read" in err
    assert "bad event" not in err  # `more > 0`: no "... and 0 more bad events" line


# -- memlife config show ---------------------------------------------------------------------
def test_config_show_masks_the_api_key(home: Path) -> None:
    """Attacks the SecretStr mask of `Settings.shown` (memlife/settings.py) as
    `memlife/cli/config.py::show` prints it, table and JSON."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-supersecret-0123", "ANTHROPIC_AUTH_TOKEN": "tok-secret-9"}
    for args in (("config", "show"), ("config", "show", "--json")):
        code, out, err = invoke(*args, env=env)
        assert code == 0, err
        assert "supersecret" not in out and "tok-secret" not in out
        assert "**** (set)" in out


def test_config_show_prints_values_as_set(home: Path, tmp_path: Path) -> None:
    """Attacks `table.add_row(var, str(value), ...)` (markup) in `memlife/cli/config.py::show`."""
    code, out, err = invoke("config", "show", env={"MEMLIFE_HOME": "h[/]x"})
    assert code == 0, err
    assert "MEMLIFE_HOME" in out and "h[/]x" in out  # a short value: one line of its cell


def test_config_show_masks_a_password_in_the_base_url(home: Path) -> None:
    """Attacks `shown = str(value)` for URLs in `memlife/settings.py::Settings.shown`."""
    env = {"ANTHROPIC_BASE_URL": "https://user:s3cretpw@proxy.example/"}
    code, out, err = invoke("config", "show", "--json", env=env)
    assert code == 0, err
    assert "s3cretpw" not in out


@pytest.mark.parametrize("json_out", [False, True])
def test_receipts_history_with_evidence_not_read_exits_1(
    home: Path, tmp_path: Path, json_out: bool
) -> None:
    """Attacks both `if gaps: raise typer.Exit(1)` of `memlife/cli/receipts.py::history`: a
    history that shows rows but could not read another run's evidence is no full answer."""
    _expired(home, "m-1")
    _apply()
    _expired(home, "m-2")
    code, out, err = invoke("run", "--engine", "local", "--now", "2026-12-02T02:00:00Z", "--json")
    assert code == 0, err
    second = json.loads(out)["run_id"]
    (part,) = (home / "receipts").glob(f"dataset/operations/date=*/run_id={second}/part-0.parquet")
    part.unlink()
    args = ["receipts", "history", "m-1"] + (["--json"] if json_out else [])
    code, out, err = invoke(*args)
    assert code == 1
    assert "evidence not read" in err and second in err
    if json_out:
        assert [r["record_id"] for r in json.loads(out)] == ["m-1"]
    else:
        assert "delete" in out
