"""Audit 43b (session 43): glob characters other than '*' in a namespace a new record is given.

`remember` refuses a '*' in a namespace ("it would read as a glob where a policy or a
reader meets it"), but takes '?' and '[...]', and the importer takes all three. Every
namespace selector reads them as a pattern: the namespace `remember` stores for actor
"[u]1" (``/users/[u]1/facts``, the default template) selects actor u1's shard as a run's
``--namespace`` (and as `review list --namespace`), never its own. Either such a namespace
is refused at the door, naming the field, or a selector spelled as it is stored reaches
that tenant only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlife.api import Memory
from memlife.errors import InputError
from tests.support.cli import invoke


def scoped_dry_run(namespace: str) -> set[tuple[str, str]]:
    """(actor, record id) of every record a dry run scoped to ``namespace`` planned."""
    code, out, err = invoke("run", "--dry-run", "--engine", "local", "--namespace", namespace,
                            "--json")  # fmt: skip
    assert code == 0, err
    report = Path(json.loads(out)["report"]).read_text().splitlines()
    return {(row["actor_id"], row["id"]) for row in map(json.loads, report)}


@pytest.mark.parametrize("actor", ["[u]1", "u?"])
def test_a_namespace_remember_stores_is_refused_or_selects_only_its_own_tenant(
    home: Path, actor: str
) -> None:
    """u1 and the look-alike actor each remember under the default /users/{actor}/facts.
    A run scoped to the look-alike's namespace, spelled as stored, must plan its record
    only, never u1's; or remember refuses the namespace by name, as it refuses '*'."""
    with Memory() as m:
        m.remember("I collect stamps.", actor="u1")
        try:
            theirs = m.remember("I collect stamps.", actor=actor)
        except InputError as exc:
            assert "namespace" in str(exc)
            return
        namespace = m.store.get(theirs.id).namespace
    assert scoped_dry_run(namespace) == {(actor, theirs.id)}


@pytest.mark.parametrize("namespace", ["/users/[u]1/facts", "/users/u?/facts", "/users/*/facts"])
def test_an_imported_glob_namespace_is_refused_or_selects_only_itself(
    home: Path, tmp_path: Path, namespace: str
) -> None:
    """The importer takes a new record's namespace as `remember` should: one that reads
    as a glob is an invalid line naming the field, or a selector spelled as stored reaches
    that record and no other tenant's."""
    line = {"memory_type": "semantic", "content": "I collect stamps.",
            "created_at": "2026-01-02T10:00:00Z"}  # fmt: skip
    rows = [{**line, "id": "m-u1", "actor_id": "u1", "namespace": "/users/u1/facts"},
            {**line, "id": "m-x", "actor_id": "x", "namespace": namespace}]  # fmt: skip
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = invoke("import", str(src))
    if "1 invalid line" in out + err:
        assert "namespace" in out + err
        return
    assert code == 0, err
    assert scoped_dry_run(namespace) == {("x", "m-x")}


@pytest.mark.parametrize("label", ["u?", "[u]1", "*"])
def test_a_langgraph_put_under_a_glob_label_is_refused(tmp_path: Path, label: str) -> None:
    """The LangGraph adapter writes without `remember`'s checks: a put under the label "u?"
    stored ``/users/u?/prefs``, which every selector reads as a pattern (u1's namespace
    too). Refused, naming the namespace, and nothing stored."""
    pytest.importorskip("langgraph.store.base")
    from langgraph.store.base import InvalidNamespaceError

    from memlife.integrations.langgraph import MemlifeStore

    store = MemlifeStore(Memory(f"sqlite:///{tmp_path / 'lg.db'}", ledger=tmp_path / "ledger"))
    with pytest.raises(InvalidNamespaceError, match="glob character"):
        store.put(("users", label, "prefs"), "k", {"content": "Likes tea."})
    assert store.search(("users",)) == []
