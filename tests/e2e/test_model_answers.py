"""A dry run's model answers serve the apply run after it (memlife/consolidate/answers.py).

Real SDK against the local Messages API server, real MiniLM, SQLite store. The server
answers "duplicate" while the dry run asks and "complement" afterwards, so an apply run
that asked again would keep apart what the dry run showed merged. Each guarantee is
attacked: a changed member, a tampered kept answer, an erasure after the dry run and an
erasure racing it (the kept answer holds the record's words).
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.answers import KEEP_DAYS
from memlife.consolidate.prompts import TOOL_NAME
from memlife.erase import erase
from memlife.faults import InjectedFault, inject
from memlife.model import Status
from memlife.pipeline import RunConfig, run_local
from memlife.policy import DEFAULT_POLICY
from memlife.stores.base import BatchResult, ItemFailure
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, tool_use_reply
from tests.support.gate import ACTOR, NOW, rec

MARKER = "zqx-answer-canary"
RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)
DOG_1 = rec("m-dog-1", "facts", f"Has a dog named Rex ({MARKER}).", subject="pet", age=60)
DOG_2 = rec("m-dog-2", "facts", f"Has a dog named Rex ({MARKER}).", subject="pet", age=30)
DOG_CASE = {"id": "dog", "query": "What is the dog called?", "actor_id": ACTOR,
            "must_retrieve": [{"fact": "Rex"}], "k": 3}  # fmt: skip


def records_of(body: dict[str, Any]) -> dict[str, str]:
    text = body["messages"][0]["content"]
    text = text if isinstance(text, str) else "".join(b.get("text", "") for b in text)
    return {rid: content for _, rid, content in RECORD.findall(text)}


@pytest.fixture()
def env(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> dict[str, Any]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    home.mkdir()
    store = SqliteStore(home / "memlife.db")
    store.put_many([DOG_1, DOG_2])
    store.close()
    state: dict[str, Any] = {"relation": "duplicate", "during_call": None}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if state["during_call"] is not None:
            state["during_call"]()
        recs = records_of(body)
        newest = sorted(recs)[-1]
        return tool_use_reply(TOOL_NAME, {
            "summary": recs[newest], "claims": [recs[newest]], "confidence": 0.9,
            "source_ids": sorted(recs), "relation": state["relation"],
        })  # fmt: skip

    messages_server.set_handler(answer)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps(DOG_CASE) + "\n")
    return {"home": home, "server": messages_server, "cases": str(cases), "state": state}


def night(env: dict[str, Any], day: int, *, dry: bool = False) -> tuple[dict[str, Any], int]:
    sent = len(env["server"].message_requests)
    summary = run_local(RunConfig(
        dry_run=dry, with_model=dry, now=NOW + timedelta(days=day), eval_cases=env["cases"],
        policy=DEFAULT_POLICY,
    ))  # fmt: skip
    return summary.other, len(env["server"].message_requests) - sent


def status(home: Path) -> dict[str, Status]:
    store = SqliteStore(home / "memlife.db")
    try:
        return {r.id: r.status for r in store.iter_all() if r.id.startswith("m-")}
    finally:
        store.close()


def kept(home: Path) -> list[tuple[str, str]]:
    """(actor, output JSON) of every answer kept in the dry runs' file."""
    path = home / "embeddings.db"
    if not path.exists():
        return []
    con = sqlite3.connect(path)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "model_answers" not in tables:
            return []
        return list(con.execute("SELECT actor_id, output FROM model_answers"))
    finally:
        con.close()


def test_the_apply_run_merges_what_the_dry_run_was_answered(env: dict[str, Any]) -> None:
    dry, calls = night(env, 0, dry=True)
    assert calls == 1 and len(kept(env["home"])) == 1
    _, calls = night(env, 0, dry=True)
    assert calls == 0  # a second dry run reads the answer (and leaves it)
    env["state"]["relation"] = "complement"  # what a fresh call would say now
    applied, calls = night(env, 0)
    assert calls == 0 and applied["model_answers_reused"] == 1
    st = status(env["home"])
    assert Status.superseded in (st["m-dog-1"], st["m-dog-2"])  # merged, as the dry run showed
    assert len(kept(env["home"])) == 1  # kept for its week: a crashed apply run's rerun


@pytest.mark.parametrize("point", ["after_stage", "after_gate"])
def test_an_apply_run_that_crashed_finds_the_answer_again(env: dict[str, Any], point: str) -> None:
    night(env, 0, dry=True)
    env["state"]["relation"] = "complement"
    with inject(point), pytest.raises(InjectedFault):
        night(env, 0)
    rerun, calls = night(env, 0)
    assert calls == 0 and rerun["model_answers_reused"] == 1
    assert Status.superseded in status(env["home"]).values()


def test_a_changed_member_is_asked_again(env: dict[str, Any]) -> None:
    night(env, 0, dry=True)
    store = SqliteStore(env["home"] / "memlife.db")
    store.put_many([DOG_2.model_copy(update={"content": f"Has a beagle named Rex ({MARKER})."})])
    store.close()
    env["state"]["relation"] = "complement"
    applied, calls = night(env, 0)
    assert calls == 1 and "model_answers_reused" not in applied
    assert set(status(env["home"]).values()) == {Status.active}  # the fresh answer: apart


def test_a_tampered_answer_is_checked_as_a_fresh_one(env: dict[str, Any]) -> None:
    night(env, 0, dry=True)
    ((_, output),) = kept(env["home"])
    forged = json.loads(output)
    forged["summary"] = forged["claims"][0] = "Has a dog named Rex and a cat named Tom."
    con = sqlite3.connect(env["home"] / "embeddings.db")
    con.execute("UPDATE model_answers SET output=?", (json.dumps(forged),))
    con.commit()
    con.close()
    applied, calls = night(env, 0)
    assert calls == 0  # the kept answer was used, and refused
    assert applied.get("consolidation_rejected") == 1  # grounding: "Tom" is in no record
    assert set(status(env["home"]).values()) == {Status.active}
    assert kept(env["home"]) == []  # refused: the group's retry asks the model afresh


def test_an_erasure_takes_the_kept_answer_with_the_records(env: dict[str, Any]) -> None:
    night(env, 0, dry=True)
    ((_, output),) = kept(env["home"])
    assert MARKER in output  # the answer holds the record's words
    store = SqliteStore(env["home"] / "memlife.db")
    try:
        assert erase(store, ACTOR, ids=["m-dog-1"], now=NOW)["erased"]
    finally:
        store.close()
    assert kept(env["home"]) == []
    left = [p.name for p in env["home"].rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]  # fmt: skip
    assert left == []


def test_an_erasure_racing_the_dry_run_leaves_no_answer_behind(env: dict[str, Any]) -> None:
    # A dry run takes no lease: the erasure runs while the model answers, finds no answer
    # to drop yet, and the dry run keeps one just after. It looks for a tombstone after
    # its batch's writes (erase_sweep's order) and drops the actor's answers.
    def erase_now() -> None:
        env["state"]["during_call"] = None
        store = SqliteStore(env["home"] / "memlife.db")
        try:
            assert erase(store, ACTOR, ids=["m-dog-1"], now=NOW)["erased"]
        finally:
            store.close()

    env["state"]["during_call"] = erase_now
    _, calls = night(env, 0, dry=True)
    assert calls == 1
    assert kept(env["home"]) == []


def leftovers(home: Path) -> list[str]:
    return [p.name for p in home.rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]


def test_an_erasure_finished_by_erase_pending_takes_the_answer(env: dict[str, Any]) -> None:
    night(env, 0, dry=True)
    store = SqliteStore(env["home"] / "memlife.db")
    try:
        with inject("after_delete"), pytest.raises(InjectedFault):
            erase(store, ACTOR, ids=["m-dog-1", "m-dog-2"], now=NOW)
        erase(store, None, pending=True, now=NOW)  # a later attempt finishes it
    finally:
        store.close()
    assert kept(env["home"]) == [] and leftovers(env["home"]) == []


def test_an_erasure_the_night_retries_takes_the_answer(
    env: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    night(env, 0, dry=True)
    real = SqliteStore.delete_many
    throttled = lambda self, ids, **kw: BatchResult(
        failed=[ItemFailure(i, "THROTTLED") for i in ids]
    )  # noqa: E731
    monkeypatch.setattr(SqliteStore, "delete_many", throttled)
    store = SqliteStore(env["home"] / "memlife.db")
    try:
        erase(store, ACTOR, ids=["m-dog-1", "m-dog-2"], now=NOW)  # retryable: queued
    finally:
        store.close()
    monkeypatch.setattr(SqliteStore, "delete_many", real)
    night(env, 2)  # the apply run drains the retry queue with the store's own cache
    assert status(env["home"]) == {}
    assert kept(env["home"]) == [] and leftovers(env["home"]) == []


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection's write transaction on ``path`` (a VACUUM, a dry run elsewhere),
    held until the block ends (at most a minute)."""
    ready, done = threading.Event(), threading.Event()

    def hold() -> None:
        con = sqlite3.connect(path, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        ready.set()
        done.wait(60)
        con.execute("ROLLBACK")
        con.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    ready.wait()
    try:
        yield
    finally:
        done.set()
        thread.join()


def test_a_locked_answer_file_never_fails_the_apply_run(env: dict[str, Any]) -> None:
    # the kept answer is forged, so the apply run refuses it and tries to drop it, while
    # another writer holds the file: the run reads past the lock (WAL), waits 2 s at most
    # to write, and finishes; the answer stays (refused again, never merged)
    night(env, 0, dry=True)
    path = env["home"] / "embeddings.db"
    ((_, output),) = kept(env["home"])
    forged = {**json.loads(output), "summary": "Has a dog named Tom.", "claims": ["Has a dog named Tom."]}  # fmt: skip
    con = sqlite3.connect(path)
    con.execute("UPDATE model_answers SET output=?", (json.dumps(forged),))
    con.commit()
    con.close()
    with write_locked(path):  # the whole run long
        applied, calls = night(env, 0)
    assert calls == 0 and applied.get("consolidation_rejected") == 1
    assert set(status(env["home"]).values()) == {Status.active}


def test_a_locked_answer_file_never_fails_the_dry_run(env: dict[str, Any]) -> None:
    path = env["home"] / "embeddings.db"
    night(env, 0, dry=True)  # the file and its tables exist; the next dry run keeps anew
    con = sqlite3.connect(path)
    con.execute("DELETE FROM model_answers")
    con.commit()
    con.close()
    locked = write_locked(path)
    env["state"]["during_call"] = lambda: (
        env["state"].update(during_call=None),
        locked.__enter__(),
    )
    try:
        _, calls = night(env, 0, dry=True)  # reads its own answers past the lock, keeps none
    finally:
        locked.__exit__(None, None, None)
    assert calls == 1 and kept(env["home"]) == []


def test_answers_past_the_keeping_time_leave_the_file(env: dict[str, Any]) -> None:
    night(env, 0, dry=True)
    con = sqlite3.connect(env["home"] / "embeddings.db")
    con.execute("UPDATE model_answers SET answered_at = answered_at - ?", (KEEP_DAYS * 86400 + 60,))
    con.commit()
    con.close()
    _, calls = night(env, 0)
    assert calls == 1 and kept(env["home"]) == []


def test_the_cli_says_what_the_apply_run_reused(env: dict[str, Any]) -> None:
    from typer.testing import CliRunner

    from memlife.cli import app

    base = ["run", "--engine", "local", "--now", NOW.isoformat(), "--eval-cases", env["cases"]]
    dry = CliRunner().invoke(app, [*base, "--dry-run", "--with-model"])
    assert dry.exit_code == 0, dry.stderr
    applied = CliRunner().invoke(app, base)
    assert applied.exit_code == 0, applied.stderr
    assert "model: 0 calls; 1 answer reused from a dry run" in applied.stderr
    page = next(line.split(": ", 1)[1] for line in applied.stderr.splitlines()
                if line.startswith("report page: "))  # fmt: skip
    html = Path(page.removeprefix("file://")).read_text()
    assert "answers reused from a dry run" in html


def test_the_prefect_flow_reuses_the_dry_runs_answers(
    env: dict[str, Any], prefect_harness: Any
) -> None:
    # under Prefect the consolidator is wrapped to hold a slot of the model-call limit
    # (flows/limits.LimitedConsolidator): the kept answer must reach it through the wrap
    import flows.nightly as nightly_mod

    base = dict(now=NOW, eval_cases=env["cases"], policy=DEFAULT_POLICY)
    sent = len(env["server"].message_requests)
    nightly_mod.nightly(RunConfig(dry_run=True, with_model=True, **base))
    assert len(env["server"].message_requests) == sent + 1
    env["state"]["relation"] = "complement"
    result = nightly_mod.nightly(RunConfig(dry_run=False, **base))
    assert len(env["server"].message_requests) == sent + 1  # no call: the dry run's answer
    assert result["model"]["answers_reused"] == 1
    assert Status.superseded in status(env["home"]).values()


def test_reuse_can_be_switched_off(env: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_REUSE_MODEL_ANSWERS", "false")
    _, calls = night(env, 0, dry=True)
    assert calls == 1 and kept(env["home"]) == []  # nothing kept
    env["state"]["relation"] = "complement"
    applied, calls = night(env, 0)
    assert calls == 1 and "model_answers_reused" not in applied
    assert set(status(env["home"]).values()) == {Status.active}  # the fresh answer: apart
