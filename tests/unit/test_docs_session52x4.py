"""Audit 52x4 (session 52: the documentation tells the truth), held against the real CLI.

docs/receipts.md is where a compliance reviewer reads what a receipt means ("The codes a
receipt can carry besides the planning and execution codes above ... held against the
code"). Followed against real evidence:

1. Every consolidation's operation receipts carry `CONSOLIDATION` (the `write_replacement`)
   and `SURVIVOR` (the supersede of the member the replacement is built around), and every
   erasure of a second copy of a text carries `SAME_CONTENT`: none was explained anywhere.
   Audit 49x4's scan reads codes only where they are an `ItemFailure`'s, a dict's "code" or
   a plain `code =` assignment; codes reaching receipts another way were missed too:
   `GATE_UNCOVERED` (`ids_not_deleted`, by a tuple assignment), `REPLACEMENT_NOT_WRITTEN`
   (`failures`, through `end_terminally`), `ERASURE_REBUILD`, `TAINTED_REPLACEMENT`,
   `ERASURE_DEFERRED` (reason lists of erase operations), `NATIVE_ACTOR_UNKNOWN` (a store
   error's `code=`), and a review run's `refused` (`ALREADY_RESOLVED`, `DISPUTED_MEANWHILE`).
2. The receipt's `model` section was documented as "(calls, tokens, rejections)": there is
   no `tokens`; the keys are `input_tokens`, `output_tokens`, `answers_reused` (and a dry
   run's `estimated_calls`, `estimated_input_tokens`).
3. A manual run's manifest and receipt (`erase`, `hold place`, ...) were described nowhere:
   the manifest's `mode` was documented as `dry_run`, `apply` or `retry` (a manual run
   writes `manual:erase`, `manual:hold_place`, ...), its `record_ids` were named nowhere,
   nor the receipt's `operations`, `erased`, `held`, `not_found`, ...
4. docs/receipts.md said `tests/unit/test_docs_audit49x4.py` holds its code list against
   the code: no such file (it is `test_docs_session49.py`).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from tests.support.cli import invoke
from tests.unit.test_docs_session49 import CODE, SCOPE, _module_constants, _values

REPO = Path(__file__).resolve().parents[2]
RECEIPTS_MD = REPO / "docs" / "receipts.md"


def _undocumented(codes: set[str]) -> list[str]:
    text = RECEIPTS_MD.read_text()
    return sorted(c for c in codes if f"`{c}`" not in text)


def _lines(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _record(rid: str, namespace: str, subject: str, content: str, day: int) -> dict[str, str]:
    return {"id": rid, "actor_id": "u1", "namespace": namespace, "memory_type": "semantic",
            "subject": subject, "content": content, "owner": "team",
            "created_at": f"2026-01-0{day}T10:00:00Z"}  # fmt: skip


def _operation_codes(home: Path) -> set[str]:
    return {
        code
        for path in (home / "receipts" / "operations").glob("*.json")
        for code in json.loads(path.read_text())["reason_codes"]
    }


# -- 1. the codes real evidence carries --------------------------------------------------------


def test_a_consolidations_receipts_carry_only_explained_codes(home: Path, tmp_path: Path) -> None:
    """Two copies of one statement in a namespace deletion is not enforced in (the default
    policy merges them without an evaluation set): README's first apply run."""
    notes = "/teams/t1/notes"
    src = _lines(tmp_path / "in.jsonl", [
        _record("a1", notes, "tea", "Drinks only green tea.", 2),
        _record("a2", notes, "tea", "Drinks only green tea.", 3),
    ])  # fmt: skip
    assert invoke("import", str(src))[0] == 0
    code, _, err = invoke("run", "--engine", "local", "--now", "2026-02-01T00:00:00Z")
    assert code == 0, err
    codes = _operation_codes(home)
    assert {"CONSOLIDATION", "SURVIVOR", "EXACT_DUPLICATE"} <= codes  # a merge happened
    assert _undocumented(codes) == []


def test_an_erasures_receipts_carry_only_explained_codes(home: Path, tmp_path: Path) -> None:
    """docs/evaluation.md "Erasure": another record of the actor with the same folded text
    goes too; its receipt says why."""
    src = _lines(tmp_path / "in.jsonl", [
        _record("a1", "/users/u1/facts", "tea", "Drinks only green tea.", 2),
        _record("a2", "/users/u1/notes", "drinks", "drinks only green tea", 3),
    ])  # fmt: skip
    assert invoke("import", str(src))[0] == 0
    code, _, err = invoke("erase", "--actor", "u1", "--id", "a1", "--yes")
    assert code == 0, err
    codes = _operation_codes(home)
    assert "ERASURE_REQUEST" in codes and len(codes) == 2
    assert _undocumented(codes) == []


def wider_receipt_codes() -> set[str]:
    """Codes reaching receipts in the ways audit 49x4's scan does not read: a reason list
    given to ``new_op``, ``end_terminally``'s code, a ``code=`` keyword, a tuple assigned to
    ``code``/``why``/``reason``, a manual run's ``extra["refused"]``, a consolidation role
    (``roles[...] =``), an erasure's rule (``plan.why[...] =``, ``_rule``'s returns)."""
    consts = _module_constants()
    extra = ("run_commit.py", "group_plan.py")
    files = sorted({p for pat in (*SCOPE, *extra) for p in (REPO / "memlife").glob(pat)})
    found: set[str] = set()
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            vals: set[str] = set()
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name == "new_op":
                    for arg in node.args:
                        if isinstance(arg, ast.List):
                            vals |= {v for e in arg.elts for v in _values(e, consts)}
                if name == "end_terminally" and len(node.args) >= 3:
                    vals |= _values(node.args[2], consts)
                for kw in node.keywords:
                    if kw.arg == "code":
                        vals |= _values(kw.value, consts)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        for name_node, value in zip(t.elts, node.value.elts, strict=False):
                            if getattr(name_node, "id", "") in ("code", "why", "reason"):
                                vals |= _values(value, consts)
                    elif isinstance(t, ast.Subscript):
                        base = t.value
                        label = getattr(base, "attr", getattr(base, "id", ""))
                        key = t.slice.value if isinstance(t.slice, ast.Constant) else None
                        # plan.why[...] (the erasure's rule), not a preview's why[...]
                        planned = label == "why" and isinstance(base, ast.Attribute)
                        if (label, key) == ("extra", "refused") or label == "roles" or planned:
                            vals |= _values(node.value, consts)
            elif isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "roles":
                if isinstance(node.value, ast.Dict):  # roles = {survivor.id: SURVIVOR}
                    vals |= {v for e in node.value.values for v in _values(e, consts)}
            elif isinstance(node, ast.FunctionDef) and node.name == "_rule":
                for ret in ast.walk(node):
                    if isinstance(ret, ast.Return) and ret.value is not None:
                        vals |= _values(ret.value, consts)
            found |= {v for v in vals if CODE.fullmatch(v)}
    return found


def test_the_wider_scan_finds_the_codes_it_is_for() -> None:
    """Control: the scan is not vacuous (each way in, a code already documented before)."""
    found = wider_receipt_codes()
    assert {
        "DERIVED_REPLACEMENT",
        "HOLD_RELEASED",
        "LEGAL_HOLD_PLACED",
        "SOURCE_OF_ERASED",
    } <= found
    assert {"GATE_UNCOVERED", "REPLACEMENT_NOT_WRITTEN", "ALREADY_RESOLVED", "SURVIVOR"} <= found
    assert {"NATIVE_ACTOR_UNKNOWN", "TAINTED_REPLACEMENT", "SAME_CONTENT"} <= found
    assert "STILL_HELD" not in found  # a preview's word, never in a receipt


def test_every_code_the_wider_scan_finds_is_explained_in_receipts_md() -> None:
    assert _undocumented(wider_receipt_codes()) == []


# -- 2. the receipt's model section, by its keys ----------------------------------------------


def test_a_receipts_model_keys_are_the_documented_ones(home: Path) -> None:
    assert invoke("demo", "--records", "60", "--seed", "7")[0] == 0
    code, _, err = invoke("run", "--engine", "local", "--dry-run")
    assert code == 0, err
    (path,) = (home / "receipts").rglob("runs/*/*/*/*-dry-*/receipt.json")
    model = json.loads(path.read_text())["model"]
    assert {"calls", "input_tokens", "estimated_calls"} <= set(model)
    text = RECEIPTS_MD.read_text()
    assert sorted(k for k in model if f"`{k}`" not in text) == []


# -- 3. a manual run's manifest and receipt ---------------------------------------------------


def test_a_manual_runs_manifest_and_receipt_are_documented(home: Path, tmp_path: Path) -> None:
    src = _lines(tmp_path / "in.jsonl", [
        _record("a1", "/users/u1/facts", "tea", "Drinks only green tea.", 2),
        _record("a2", "/users/u1/facts", "city", "Lives in Oslo.", 3),
    ])  # fmt: skip
    assert invoke("import", str(src))[0] == 0
    assert invoke("hold", "place", "--id", "a2")[0] == 0
    assert invoke("erase", "--actor", "u1", "--id", "a1", "--yes")[0] == 0
    text = RECEIPTS_MD.read_text()
    folders = sorted((home / "receipts").glob("runs/*/*/*/manual-*"))
    assert len(folders) == 2
    missing = set()
    for folder in folders:
        manifest = json.loads((folder / "manifest.json").read_text())
        receipt = json.loads((folder / "receipt.json").read_text())
        assert manifest["mode"].startswith("manual:")
        missing |= {manifest["mode"]} - {m for m in [manifest["mode"]] if f"`{m}`" in text}
        missing |= {k for k in (*manifest, *receipt) if f"`{k}`" not in text}
        missing |= {k for op in receipt["operations"] for k in op if f"`{k}`" not in text}
    assert sorted(missing) == []


# -- 4. the files the docs name ---------------------------------------------------------------


def test_every_test_file_the_docs_name_exists() -> None:
    named = set()
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        named |= set(re.findall(r"tests/[A-Za-z0-9_/]+\.py", path.read_text()))
    assert named  # control: the docs do name test files
    assert sorted(n for n in named if not (REPO / n).exists()) == []
