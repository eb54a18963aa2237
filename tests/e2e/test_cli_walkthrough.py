"""README as a new user walks it (review of the CLI, round 28): each problem the reviewer
reproduced, as a test that failed before its fix.

1. read-only commands created an empty store for a mistyped --store (eval, eval init, ops);
2. `run --namespace` without a leading '/' (or a glob/actor matching nothing) said nothing;
3. review item and run ids were cut to "rv-5…" in tables at 80 columns;
4. MEMLIFE_NAMESPACE with a mistyped placeholder stored into "/users/{user}/facts";
5. `--with-model` without a key was ignored, and an offline dry run estimated model calls
   an apply run (extractive) would never make;
6. setting errors that did not name their variable (or named a flag not given);
7. help and output details: `<bool>` after every flag, `--state`, `review list --actor`,
   `--metrics-namespace`, the policy's "(fnmatch)", "1 consolidations", `remember`'s id
   on stdout, typed `config show --json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlife.demo import generate
from memlife.stores.sqlite import SqliteStore
from tests.conftest import REPO
from tests.support.cli import invoke
from tests.support.gate import NOW, write_cases

NOW_ARG = NOW.isoformat()


def error_line(code: int, err: str, expected: int = 2) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == expected, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]


@pytest.fixture()
def offline(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``home`` with 120 demo records and no model key."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    store = SqliteStore(home / "memlife.db")
    store.put_many(list(generate(120, seed=3, anchor=NOW)))
    store.close()
    return home


# -- 1. read-only commands refuse a missing SQLite file ---------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "--cases", "CASES"],
        ["eval", "init", "-o", "OUT"],
        ["ops", "failed"],
        ["ops", "resolve", "op-1", "--decision", "dismiss"],
    ],
)
def test_read_only_commands_refuse_a_mistyped_store(
    home: Path, tmp_path: Path, args: list[str]
) -> None:
    cases = write_cases(tmp_path / "cases.yaml", [{"id": "c1", "kind": "procedure",
                        "query": "tea?", "actor_id": "u-1", "must_retrieve": [{"fact": "tea"}]}])  # fmt: skip
    args = [{"CASES": cases, "OUT": str(tmp_path / "x.yaml")}.get(a, a) for a in args]
    missing = tmp_path / "nope.db"
    code, _, err = invoke(*args, "--store", f"sqlite:///{missing}")
    assert "no such file" in error_line(code, err) and "--store" in err
    assert not missing.exists()  # no empty database made
    assert not (tmp_path / "x.yaml").exists()


# -- 2. run --namespace: unrooted refused, unmatched named ------------------------------------


def test_run_refuses_an_unrooted_namespace_glob(offline: Path) -> None:
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--namespace", "users/*/facts")
    line = error_line(code, err)
    assert "--namespace 'users/*/facts'" in line and "must start with '/'" in line


def test_run_takes_an_unrooted_glob_that_matches_a_namespace_stored_so(home: Path) -> None:
    """The session's review: a store written before the rule keeps its unrooted namespaces;
    recall reaches them, so a scoped run must too (an unrooted glob matching none is still
    refused)."""
    from memlife.model import MemoryRecord
    from tests.support.records import good

    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord.model_validate(good("m-1", namespace="notes/u-1"))])
    args = ("run", "--dry-run", "--engine", "local", "--json")
    code, out, err = invoke(*args, "--namespace", "notes/*")
    assert code == 0, err
    assert json.loads(out)["records"] == 1 and json.loads(out)["scope_unmatched"] == []
    code, _, err = invoke(*args, "--namespace", "nothere/*")
    assert "must start with '/'" in error_line(code, err)


def test_run_names_a_scope_that_matches_no_record(offline: Path) -> None:
    args = ("run", "--dry-run", "--engine", "local", "--now", NOW_ARG)
    code, out, err = invoke(*args, "--json", "--namespace", "/users/*/factz",
                            "--namespace", "/users/*/facts")  # fmt: skip
    assert code == 0, err  # a run that matched nothing still succeeds: it is said, not failed
    result = json.loads(out)
    assert result["scope_unmatched"] == [{"option": "--namespace", "value": "/users/*/factz"}]
    assert result["other_counts"]["scope_unmatched:--namespace=/users/*/factz"] == 1
    code, out, err = invoke(*args, "--json", "--actor", "nobody", "--actor", "u-000003")
    assert code == 0, err
    result = json.loads(out)
    assert result["scope_unmatched"] == [{"option": "--actor", "value": "nobody"}]
    assert result["other_counts"]["scope_unmatched:--actor=nobody"] == 1
    # within the scope: an actor that has no namespace the globs select is named too
    code, out, err = invoke(*args, "--json", "--actor", "u-000003", "--namespace", "/nowhere/**")
    assert code == 0 and json.loads(out)["records"] == 0, err
    assert len(json.loads(out)["scope_unmatched"]) == 2
    code, _, err = invoke(*args, "--namespace", "/users/*/factz")
    assert code == 0, err
    assert "warning: --namespace '/users/*/factz' matches no record in the store" in err
    with SqliteStore(offline / "memlife.db") as store:
        actor = next(iter(store.list_actors()))
        glob = "/users/*/" + store.list_namespaces(actor)[0].rsplit("/", 1)[1]
    code, _, err = invoke(*args, "--namespace", glob, "--actor", actor)
    assert code == 0 and "scope_unmatched" not in err, err


# -- 3. ids are never cut in tables -----------------------------------------------------------


@pytest.fixture()
def applied(offline: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An apply run over ``offline``: review items and an operations dataset."""
    from memlife.cli import common

    code, _, err = invoke("run", "--engine", "local", "--now", NOW_ARG)
    assert code == 0, err
    monkeypatch.setattr(common.console, "_width", None)  # the width comes from COLUMNS
    monkeypatch.setenv("COLUMNS", "80")
    return offline


def test_review_list_shows_whole_ids_at_80_columns(applied: Path) -> None:
    code, out, _ = invoke("review", "list", "--json")
    items = json.loads(out)
    assert code == 0 and items
    code, out, err = invoke("review", "list", env={"COLUMNS": "80"})
    assert code == 0, err
    assert "…" not in out
    for item in items:
        assert item["item_id"] in out and item["record_id"] in out
    code, wide, _ = invoke("review", "list", env={"COLUMNS": "200"})  # a table where it fits
    assert "┃ item" in wide and all(i["item_id"] in wide for i in items)


def test_receipts_history_shows_whole_ids_at_80_columns(applied: Path) -> None:
    import pyarrow.parquet as pq

    (dataset,) = (applied / "receipts").rglob("operations.parquet")
    op = pq.read_table(dataset).to_pylist()[0]
    code, out, err = invoke("receipts", "history", op["record_id"], env={"COLUMNS": "80"})
    assert code == 0, err
    assert op["run_id"] in out and "…" not in out
    code, out, _ = invoke("receipts", "list", env={"COLUMNS": "80"})
    assert op["run_id"] in out and "…" not in out


# -- 4. MEMLIFE_NAMESPACE: {actor} is the only placeholder ------------------------------------


@pytest.mark.parametrize(
    ("template", "named"),
    [
        ("/users/{user}/facts", "{user}"),
        ("/users/<actor>/facts", "<actor>"),
        ("/users/$ACTOR/facts", "$ACTOR"),
        ("/users/${ACTOR}/facts", "${ACTOR}"),
        ("/users/%(actor)s/facts", "%(actor)"),
    ],  # fmt: skip
)
def test_a_mistyped_namespace_placeholder_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch, template: str, named: str
) -> None:
    """Session 28: `{user}`, and templating a deploy left unexpanded (`$ACTOR`, `<actor>`,
    `%(actor)s`: the session's review), put every actor in one literal namespace."""
    monkeypatch.setenv("MEMLIFE_NAMESPACE", template)
    code, _, err = invoke("remember", "--actor", "u2", "I drink green tea.")
    line = error_line(code, err)
    assert "MEMLIFE_NAMESPACE" in line and named in line
    if (home / "memlife.db").exists():
        with SqliteStore(home / "memlife.db") as store:
            assert store.count() == 0


# -- 5. --with-model needs a model; the estimate is for the consolidator that would run -------


def test_with_model_without_a_key_is_refused(offline: Path) -> None:
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--with-model")
    line = error_line(code, err)
    assert "--with-model" in line and "ANTHROPIC_API_KEY" in line


def test_an_offline_dry_run_estimates_no_model_calls(offline: Path) -> None:
    args = ("run", "--dry-run", "--engine", "local", "--now", NOW_ARG)
    code, out, err = invoke(*args, "--json")
    assert code == 0, err
    model = json.loads(out)["model"]
    assert model["estimated_calls"] == 0 and model["estimated_input_tokens"] == 0
    assert model["apply_consolidator"] == "extractive"
    code, _, err = invoke(*args)
    assert code == 0, err
    assert "would make about" not in err and "makes no model calls" in err


# -- 6. a setting error names where the value came from ---------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MEMLIFE_STORE", "sqlit:///x.db"),
        ("MEMLIFE_RECEIPTS", "ftp://host/receipts"),
        ("MEMLIFE_EVAL_CASES", "/nope/cases.yaml"),
        ("MEMLIFE_S3_ENDPOINT_URL", "notaurl"),
    ],
)
def test_a_bad_variable_is_named(
    offline: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    code, _, err = invoke("run", "--dry-run", "--engine", "local", "--now", NOW_ARG)
    line = error_line(code, err)
    assert variable in line and "--eval-cases" not in line


def test_a_bad_flag_is_named(offline: Path, tmp_path: Path) -> None:
    code, _, err = invoke("run", "--dry-run", "--store", "sqlit:///x.db")
    assert error_line(code, err).startswith("error: --store 'sqlit:///x.db'")
    code, _, err = invoke("run", "--dry-run", "--receipts", "ftp://host/x")
    assert error_line(code, err).startswith("error: --receipts 'ftp://host/x'")
    code, _, err = invoke("run", "--dry-run", "--eval-cases", "/nope/cases.yaml")
    assert error_line(code, err).startswith("error: --eval-cases")
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    code, _, err = invoke("demo", "--records", "5", "--anchor", "notatime", "--store", store)
    assert error_line(code, err).startswith("error: --anchor 'notatime'")
    code, _, err = invoke("eval", "init", "-o", str(tmp_path / "c.yaml"), "--now", "soon")
    assert error_line(code, err).startswith("error: --now 'soon'")


# -- 7. help and output details ---------------------------------------------------------------


def test_flags_show_no_metavar_in_help() -> None:
    code, out, _ = invoke("run", "--help")
    assert code == 0
    assert "<bool>" not in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.strip().startswith("--")}
    assert lines["--dry-run"].split()[1:3] == ["Plan", "and"]  # the help follows the flag
    assert lines["--now"].split()[1] == "<str>"  # an option with a value keeps its type
    assert " ".join(out.split()).count("MEMLIFE_CLOUDWATCH_NAMESPACE") == 1
    flat = " ".join(out.split())
    assert "beside the store" not in flat and "$MEMLIFE_HOME" in flat
    code, out, _ = invoke("review", "list", "--help")
    assert "<bool>" not in out
    actor = next(ln for ln in out.splitlines() if ln.strip().startswith("--actor"))
    assert len(actor.split()) > 2  # it has help text


def test_a_repeatable_option_shows_the_type_of_one_value() -> None:
    """`--id <list[str]>` read as one list; the option takes one id each time it is given."""
    for command in (("erase",), ("hold", "place"), ("run",), ("eval", "init"), ("warm",)):
        code, out, _ = invoke(*command, "--help")
        assert code == 0 and "list[" not in out, command
    code, out, _ = invoke("erase", "--help")
    assert next(ln for ln in out.splitlines() if "--id" in ln).split()[1] == "<str>"


def test_the_default_policy_describes_glob_matching_as_it_is() -> None:
    text = (REPO / "policies" / "default.yaml").read_text()
    assert "(fnmatch)" not in text and "segment" in text


def test_remember_prints_the_id_on_stdout(home: Path) -> None:
    code, out, err = invoke("remember", "--actor", "u1", "I only drink green tea.")
    assert code == 0, err
    rid = out.strip()
    with SqliteStore(home / "memlife.db") as store:
        assert rid.startswith("m-") and store.get(rid) is not None
    code, out, err = invoke("remember", "--actor", "u1", "I only drink green tea.")
    assert code == 0 and out.strip() == rid and "already known" in err


def test_config_show_json_keeps_types(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_EMBED_THREADS", "2")
    code, out, _ = invoke("config", "show", "--json")
    shown = json.loads(out)
    assert code == 0
    assert shown["MEMLIFE_EMBED_THREADS"] == 2 and shown["MEMLIFE_TASK_RETRIES"] == 3
    assert shown["MEMLIFE_DEBUG"] is False and shown["MEMLIFE_TOKEN_ALIGNMENT"] is True
    assert shown["MEMLIFE_LEASE_TTL_SECONDS"] == 120.0
    assert isinstance(shown["MEMLIFE_HOME"], str) and shown["MEMLIFE_STATE"] is None


def test_one_is_singular() -> None:
    from memlife.cli.run import singular

    line = "gate: ...: 1 deletions (obligations) and 1 consolidations; 11 consolidations, 21 calls"
    assert singular(line) == (
        "gate: ...: 1 deletion (obligations) and 1 consolidation; 11 consolidations, 21 calls"
    )
    assert singular("about 1 calls, ~2,001 calls") == "about 1 call, ~2,001 calls"


def test_quarantine_list_shows_whole_ids_at_80_columns(home: Path) -> None:
    from memlife.model import MemoryRecord, Status
    from tests.support.records import good

    ids = [f"m-quarantined-record-with-a-long-id-{i:04d}" for i in range(3)]
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            MemoryRecord.model_validate(good(rid, status=Status.quarantined.value,
                                             namespace="/users/u-1/a-rather-long-namespace-name"))
            for rid in ids
        ])  # fmt: skip
    code, out, err = invoke("quarantine", "list", env={"COLUMNS": "80"})
    assert code == 0, err
    assert "…" not in out and all(rid in out for rid in ids), out


def test_hold_release_offers_only_classes_that_release(home: Path) -> None:
    from memlife.cli.erase import AfterRelease
    from memlife.model import RetentionClass

    assert {c.value for c in AfterRelease} == {c.value for c in RetentionClass} - {"legal_hold"}
    code, out, _ = invoke("hold", "release", "--help")
    assert code == 0 and "legal_hold" not in out and "sensitive" in out
    code, _, err = invoke("hold", "release", "--id", "m-1", "--retention-class", "legal_hold")
    assert code == 2, err
