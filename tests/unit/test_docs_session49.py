"""Audit 49x4 (session 49: the documentation tells the truth), held against the code.

1. docs/receipts.md is where a compliance reviewer reads what a receipt's codes mean
   (README points there for "reason codes"). It explained the planning and execution codes,
   but none of the error codes a receipt carries as a failed shard's or a failure's `code`
   (`memlife.errors.Reason`: STORE_ERROR, THROTTLED, CORRUPT_RECORD, ...), none of the
   consolidation rejections counted under `model.rejections` (UNKNOWN_SOURCE,
   ADDITIVE_NOT_UPDATE, ...), several per-operation failure codes and reasons in
   `ids_not_deleted` (SHARD_STOPPED, SOURCE_KEPT, GATE_NOT_CONFIGURED, ...), and two of
   `receipts verify`'s problem codes (RUN_NOT_FOUND, EVIDENCE_UNREADABLE).
2. Ids are never cut in tables (docs/adversarial-review.md, session 28: "id columns never
   cut"): `memlife eval` cut case ids to "pref-u-000003…" at 80 columns, and `receipts
   show` broke the run id in two in its title.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from memlife.errors import Reason
from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
RECEIPTS_MD = REPO / "docs" / "receipts.md"
CODE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,}")
# modules whose codes reach receipts: operations, consolidation, stores, the run's steps,
# manual runs, review decisions and verification (the import report and the gate's
# verdict have their own pages: README "The record contract", docs/evaluation.md)
SCOPE = (
    "apply/**/*.py", "consolidate/*.py", "stores/**/*.py", "tombstones.py", "run_*.py",
    "erase*.py", "quarantine.py", "review_queue/*.py", "holds.py", "evidence*.py",
    "review.py", "receipts*.py",
)  # fmt: skip


def _documented(text: str, codes: set[str]) -> set[str]:
    return {c for c in codes if f"`{c}`" in text}


def _module_constants() -> dict[str, set[str]]:
    """Module-level ``NAME = "VALUE"`` strings of memlife, by name."""
    out: dict[str, set[str]] = {}
    for path in (REPO / "memlife").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                if isinstance(node.value.value, str):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            out.setdefault(target.id, set()).add(node.value.value)
    return out


def _values(node: ast.AST, consts: dict[str, set[str]]) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name):
        return consts.get(node.id, set())
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return {node.attr} if node.value.id == "Reason" else set()
    if isinstance(node, ast.IfExp):
        return _values(node.body, consts) | _values(node.orelse, consts)
    if isinstance(node, ast.BoolOp):
        return set().union(*(_values(v, consts) for v in node.values))
    return set()


def receipt_codes() -> set[str]:
    """Codes the code writes where a receipt carries them: an ItemFailure's code, a
    ConsolidationError's, a ``"code"``/``"reason"`` entry, and a ``code``/``why``/``reason``
    variable, in the modules of SCOPE (verification problems are read apart, below)."""
    consts = _module_constants()
    files = sorted({p for pattern in SCOPE for p in (REPO / "memlife").glob(pattern)})
    found: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            vals: set[str] = set()
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                if name == "ItemFailure" and len(node.args) >= 2:
                    vals = _values(node.args[1], consts)
                elif name == "ConsolidationError" and node.args:
                    vals = _values(node.args[0], consts)
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value in ("code", "reason"):
                        vals |= _values(value, consts)
            elif isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id in ("code", "why", "reason")
                       for t in node.targets):  # fmt: skip
                    vals = _values(node.value, consts)
            found |= {v for v in vals if CODE.fullmatch(v)}
    return found


def verify_codes() -> set[str]:
    """Problem and note codes `receipts verify` names (``v.problem("CODE", ...)``)."""
    found: set[str] = set()
    for path in (REPO / "memlife").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("problem", "note"):
                if node.args and isinstance(node.args[0], ast.Constant):
                    if isinstance(node.args[0].value, str) and CODE.fullmatch(node.args[0].value):
                        found.add(node.args[0].value)
    return found


# -- 1. every code a receipt carries is explained in docs/receipts.md -------------------------


def test_the_scanners_find_the_codes_they_are_for() -> None:
    """Control: the scan is not vacuous (a code of each kind, documented before and after)."""
    found = receipt_codes()
    assert {"STALE_PRECONDITION", "ID_EXISTS", "HOLD_PLACED_SINCE", "RECORD_MISSING"} <= found
    assert {"UNGROUNDED_CLAIM", "ADDITIVE_NOT_UPDATE", "SHARD_STOPPED", "SOURCE_KEPT"} <= found
    assert {"COUNTS_MISMATCH", "DATASET_PART_MISSING", "RUN_NOT_FOUND"} <= verify_codes()
    text = RECEIPTS_MD.read_text()
    assert _documented(text, {"STALE_PRECONDITION", "COUNTS_MISMATCH"}) == {
        "STALE_PRECONDITION", "COUNTS_MISMATCH"
    }  # fmt: skip


def test_every_error_code_is_explained_in_receipts_md() -> None:
    """A failed shard's `code`, a failure's `code`: a Reason (THROTTLED, CORRUPT_RECORD, ...).
    None of the 37 was in docs/receipts.md."""
    text = RECEIPTS_MD.read_text()
    codes = {r.value for r in Reason}
    assert sorted(codes - _documented(text, codes)) == []


def test_every_code_a_receipt_carries_is_explained_in_receipts_md() -> None:
    """ItemFailure codes (SCOPE_CHANGED, NO_PAYLOAD, ...), consolidation rejections counted in
    `model.rejections` (ADDITIVE_NOT_UPDATE, DROPPED_FACT, ...) and `ids_not_deleted`
    reasons (SHARD_STOPPED, SOURCE_KEPT, GATE_NOT_CONFIGURED)."""
    text = RECEIPTS_MD.read_text()
    codes = receipt_codes()
    assert sorted(codes - _documented(text, codes)) == []


def test_every_verify_problem_code_is_explained_in_receipts_md() -> None:
    text = RECEIPTS_MD.read_text()
    codes = verify_codes()
    assert sorted(codes - _documented(text, codes)) == []


def test_a_real_receipts_codes_are_all_explained(home: Path) -> None:
    """README's first commands (demo, then an apply run, the default policy: no evaluation
    set): every code the run receipt carries in `ids_not_deleted`, `failures`, failed shards
    and `model.rejections` is one docs/receipts.md explains."""
    assert invoke("demo", "--records", "300", "--seed", "7")[0] == 0
    code, _, err = invoke("run", "--engine", "local")
    assert code == 0, err
    (path,) = (home / "receipts").rglob("runs/*/*/*/*-apply-*/receipt.json")
    receipt = json.loads(path.read_text())
    codes = {e["reason"] for e in receipt["ids_not_deleted"]}
    codes |= {f["code"] for f in receipt["failures"]}
    codes |= {s["code"] for s in receipt["shards"]["failed"]}
    codes |= set(receipt["model"]["rejections"])
    assert codes, receipt["ids_not_deleted"]  # the default policy withholds judgements
    text = RECEIPTS_MD.read_text()
    assert sorted(codes - _documented(text, codes)) == []


# -- 2. ids are never cut in tables -----------------------------------------------------------


LONG_CASE = "proc-u-000000-router-reset-steps-must-stay"


@pytest.fixture()
def narrow(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store of demo records and a console 80 columns wide (COLUMNS, as a terminal)."""
    from memlife.cli import common

    assert invoke("demo", "--records", "120", "--seed", "7")[0] == 0
    monkeypatch.setattr(common.console, "_width", None)  # the width comes from COLUMNS
    monkeypatch.setenv("COLUMNS", "80")
    return home


def _cases(home: Path, tmp_path: Path) -> str:
    from memlife.stores.sqlite import SqliteStore

    store = SqliteStore(home / "memlife.db")
    try:
        rec = next(r for r in store.iter_all() if r.status.value == "active")
    finally:
        store.close()
    path = tmp_path / "cases.yaml"
    case = {
        "id": LONG_CASE,
        "query": "What are the steps?",
        "actor_id": rec.actor_id,
        "forbidden": [f"{rec.id}-never-written"],
    }  # passes: no gate fails, exit 0
    path.write_text(json.dumps({"cases": [case, {**case, "id": LONG_CASE + "-2"}]}))
    return str(path)


def test_eval_shows_whole_case_ids_at_80_columns(narrow: Path, tmp_path: Path) -> None:
    cases = _cases(narrow, tmp_path)
    code, out, err = invoke("eval", "--cases", cases, env={"COLUMNS": "80"})
    assert code == 0, out + err
    assert LONG_CASE in out and f"{LONG_CASE}-2" in out and "…" not in out


def test_eval_shows_whole_case_ids_where_they_fit(narrow: Path, tmp_path: Path) -> None:
    """Control: on a wide terminal the ids were whole before and stay so."""
    cases = _cases(narrow, tmp_path)
    code, out, err = invoke("eval", "--cases", cases, env={"COLUMNS": "200"})
    assert code == 0, out + err
    assert LONG_CASE in out and f"{LONG_CASE}-2" in out and "…" not in out


def test_receipts_show_prints_the_run_id_whole_at_80_columns(narrow: Path) -> None:
    code, out, err = invoke("run", "--engine", "local", "--json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    code, out, err = invoke("receipts", "show", run_id, env={"COLUMNS": "80"})
    assert code == 0, err
    assert run_id in out and "deleted" in out


# -- guards: what the audit checked and found true, kept true ---------------------------------


def _cli_options() -> dict[tuple[str, ...], set[str]]:
    """Every command path (``("receipts", "verify")``) with its option names; a group that
    runs on its own (``eval --cases``) is a path too."""
    from memlife.cli import COMMANDS, load_command

    out: dict[tuple[str, ...], set[str]] = {}

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        opts = {
            name
            for p in getattr(cmd, "params", [])
            if p.param_type_name == "option"
            for name in (*p.opts, *p.secondary_opts)
        }
        out[path] = opts
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, (*path, name))

    for name in COMMANDS:
        walk(load_command(name), (name,))
    return out


def _doc_command_lines() -> list[tuple[str, str]]:
    """(file, text) of each `memlife ...` in a code span or a shell block of the docs."""
    out = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text()
        spans = re.findall(r"`([^`\n]*memlife [^`\n]*)`", text)
        for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S):
            spans += [ln.split("  #")[0] for ln in block.splitlines() if "memlife " in ln]
        out += [(path.name, s) for s in spans]
    return out


def test_every_flag_the_docs_give_a_command_is_one_it_takes() -> None:
    """README and docs/*.md: `memlife CMD [SUB] ... --flag` names an option CMD SUB has."""
    options = _cli_options()
    wrong = []
    for name, span in _doc_command_lines():
        for m in re.finditer(r"memlife ([a-z-]+)(?: ([a-z-]+))?([^|;&`]*)", span):
            cmd, sub, rest = m.groups()
            path = (cmd, sub) if (cmd, sub) in options else (cmd,)
            if path not in options:
                continue  # prose ("memlife keeps ..."), not a command
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                if flag not in options[path] | {"--help"}:
                    wrong.append(f"{name}: {' '.join(path)} {flag}")
    assert wrong == []


def test_every_deploy_only_variable_is_listed_in_orchestration_md() -> None:
    """README "Settings": the deployment-only MEMLIFE_ variables memlife accepts but never
    reads are listed in docs/orchestration.md."""
    from memlife.settings import DEPLOY_ONLY

    text = (REPO / "docs" / "orchestration.md").read_text()
    assert [v for v in DEPLOY_ONLY if v not in text] == []
