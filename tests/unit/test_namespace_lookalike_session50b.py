"""Audit 50b: a new namespace that prints as another one.

Session 48 (audit d) and 49 (audit i) refused record ids and actors that print as another
(decomposed ``jose\\u0301`` beside ``jos\\u00e9``, a zero-width space, fullwidth letters):
two keys, one look. The namespace, the other half of every shard key, took all of them:
``/users/u1/sant\\u00e9`` and its decomposed form, or ``/users/u1/facts`` with a zero-width
space, were imported (every path) and remembered as namespaces of their own. A policy rule,
``run --namespace``, ``review list --namespace`` or recall's filter, written as the
namespace prints, reaches only one of them: an ``enforce_deletion_in`` or TTL rule for
``/users/*/sant\\u00e9`` never applies to the decomposed twin. They are now refused for new
records by field, as ids and actors are; stored ones stay readable.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from memlife.errors import NamespaceError
from memlife.namespaces import glob_match
from memlife.online.inputs import namespace_arg
from tests.support.records import good
from tests.unit.test_guards_session36b import PATH_IDS, PATHS, run_import, write

COMPOSED = "/users/u1/sant\u00e9"
LOOKALIKES = [
    unicodedata.normalize("NFD", COMPOSED),  # prints as COMPOSED
    "/users/u1/facts\u200b",  # zero-width space: prints as /users/u1/facts
    "/users/u1/\u2060facts",  # word joiner
]
PLAIN = [COMPOSED, "/users/u1/facts", "/users/u1/my facts", "/users/\u5de5\u7a0b\u5e08/notes"]


def _line(rid: str, namespace: str, ascii_only: bool) -> str:
    d = good(rid, actor_id="u1", namespace=namespace, content=f"I like tea number {rid}.")
    return json.dumps(d, ensure_ascii=ascii_only)


def test_a_policy_glob_reaches_only_the_form_it_is_written_in() -> None:
    """Control, why a lookalike matters: the rule written as the namespace prints."""
    assert glob_match("/users/*/sant\u00e9", COMPOSED)
    assert not glob_match("/users/*/sant\u00e9", LOOKALIKES[0])
    assert not glob_match("/users/*/facts", LOOKALIKES[1])


@pytest.mark.parametrize("ascii_only", [True, False], ids=["escaped", "utf8"])
@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_a_namespace_that_prints_as_another_is_refused_by_line_and_field(
    home: Path, tmp_path: Path, kw: dict[str, Any], ascii_only: bool
) -> None:
    lines = [_line(f"m-{i}", ns, ascii_only) for i, ns in enumerate(LOOKALIKES)]
    lines.append(_line("m-ok", COMPOSED, ascii_only))
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "f.jsonl", lines), **kw)
    assert ids == {"m-ok"}
    assert {(e.line, e.record_id, e.field) for e in rep.invalid} == {
        (i + 1, f"m-{i}", "namespace") for i in range(len(LOOKALIKES))
    }


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_plain_namespaces_of_any_script_are_imported(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """Control: composed accents, spaces inside, other scripts stay importable."""
    lines = [_line(f"m-{i}", ns, False) for i, ns in enumerate(PLAIN)]
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "f.jsonl", lines), **kw)
    assert not rep.invalid
    assert ids == {f"m-{i}" for i in range(len(PLAIN))}


def test_remember_refuses_a_namespace_that_prints_as_another() -> None:
    for ns in LOOKALIKES:
        with pytest.raises(NamespaceError):
            namespace_arg(ns)


def test_remember_takes_plain_namespaces() -> None:
    """Control."""
    for ns in PLAIN:
        assert namespace_arg(ns) == ns
