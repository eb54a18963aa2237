"""Audit 49i: an imported actor that looks like another one.

Every other door holds an actor to :func:`memlife.online.inputs.actor_arg`: ``remember``,
``recall`` and, since audit 49d, a LangGraph ``put`` refuse "u1 ", " u1" and the fullwidth
"\\uff551", each a second u1 that ``memlife erase --actor u1`` never finds (the adapter's
comment says import refuses them too). The import refused only invisible characters and
text not in NFC: such lines were imported, on every path. Then ``memlife recall`` refused
that actor, and every LangGraph search with a query over a prefix covering it (``("users",)``:
every tenant) raised InputError. The import now refuses them by line and field
(``actor_id``), never quoting the actor, and imports the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memlife.errors import InputError
from memlife.online.inputs import actor_arg
from tests.support.records import good
from tests.unit.test_guards_session36b import PATH_IDS, PATHS, run_import, write

LOOKALIKES = ["u1 ", " u1", "\uff551", "u1\u3000"]  # u1\u3000: invisible_at refused it already
PLAIN = ["u1", "user 1", "Zo\u00eb", "acme/alice@example.com", "\u5de5\u7a0b\u5e08-7"]


def _line(rid: str, actor: str, ascii_only: bool = True) -> str:
    d = good(rid, actor_id=actor, namespace=f"/users/{actor}/facts", content="I like tea.")
    return json.dumps(d, ensure_ascii=ascii_only)


def test_remember_refuses_every_lookalike_and_takes_every_plain_actor() -> None:
    """Control: the rule the import is held to (actor_arg; '/' only because remember
    builds a namespace from the actor, which an imported line writes out itself)."""
    for label in LOOKALIKES:
        with pytest.raises(InputError, match="actor"):
            actor_arg(label)
    for label in PLAIN:
        assert label == "acme/alice@example.com" or actor_arg(label) == label


@pytest.mark.parametrize("ascii_only", [True, False], ids=["escaped", "utf8"])
@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_an_actor_that_looks_like_another_is_refused_by_line_and_field(
    home: Path, tmp_path: Path, kw: dict[str, Any], ascii_only: bool
) -> None:
    lines = [_line(f"m-{i}", a, ascii_only) for i, a in enumerate(LOOKALIKES)]
    lines.append(_line("m-ok", "u2", ascii_only))
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "f.jsonl", lines), **kw)
    assert ids == {"m-ok"}
    assert {(e.line, e.record_id, e.field) for e in rep.invalid} == {
        (i + 1, f"m-{i}", "actor_id") for i in range(len(LOOKALIKES))
    }
    assert all(label.strip() not in e.reason for e in rep.invalid for label in LOOKALIKES)


@pytest.mark.parametrize("kw", PATHS, ids=PATH_IDS)
def test_plain_actors_are_imported_on_every_path(
    home: Path, tmp_path: Path, kw: dict[str, Any]
) -> None:
    """Control: spaces inside, any script, and AgentCore's '/' (its actor ids allow it)."""
    lines = [_line(f"m-{i}", a, ascii_only=i % 2 == 0) for i, a in enumerate(PLAIN)]
    rep, ids = run_import(tmp_path / "s.db", write(tmp_path / "f.jsonl", lines), **kw)
    assert rep.invalid == [] and ids == {f"m-{i}" for i in range(len(PLAIN))}


def test_an_imported_lookalike_never_breaks_another_tenants_search(
    home: Path, tmp_path: Path
) -> None:
    pytest.importorskip("langgraph.store.base")
    from memlife import Memory
    from memlife.integrations.langgraph import MemlifeStore

    src = write(tmp_path / "f.jsonl", [_line("m-1", "u1 "), _line("m-2", "u2")])
    run_import(home / "memlife.db", src, workers=0)
    lg = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    try:
        found = lg.search(("users",), query="tea")
    finally:
        lg.memory.close()
    assert [(i.namespace, i.key) for i in found] == [(("users", "u2", "facts"), "m-2")]
