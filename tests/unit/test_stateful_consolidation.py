"""Stateful model of consolidation through the model (session 40).

Real components only: the SQLite store, the nightly apply run (``run_local``) with the
Anthropic consolidator picked from the environment, the real ``anthropic`` SDK against the
local Messages API fake (tests/fakes/messages_api.py), the real MiniLM embedder and the
project's grounding. The fake model's answer to each group is drawn by Hypothesis from a
hostile space, per actor and per night, and built from the request the run really sent.

Model: the records each of two actors (same subject, own namespace) was given, which are
held (legal_hold), which were erased (their text kept as "erased"), and a log of every
request the fake model saw (actor, ids and texts sent, the answer kind, whether the answer
was faithful: the newest sent text verbatim, every sent id named).

Rules: add a record to an actor's group (its usual text, or a newer "update" text); add a
held record; add a record and erase it at once (its text becomes "erased"); run a night
(cutoff advances; each actor's answer kind drawn: faithful, duplicated ids, ungrounded
clause, changed number, other actor's id/text, unknown id, held id, empty/blank/very long
text, erased text, invalid JSON, wrong schema, text instead of a tool call, wrong tool,
two tool calls, stop_reason max_tokens/refusal/end_turn, HTTP 429/500/529/400, a 200 error
body), optionally crashing at a fault point; rerun the same night (same cutoff) with a
fresh draw of answers.

Invariants: held records never superseded or changed and never a replacement's source;
originals are never lost or rewritten and a superseded one points to an existing
replacement that names it; a replacement's sources are records of its own actor and
namespace, all sent in one request of the run, and its text is verbatim the text of one
of its sources (independent oracle: every faithful answer is verbatim) and holds no erased
text; a night whose answer for an actor is not faithful writes no replacement for that
actor and leaves every record it sent active and unchanged; each failure is counted in
the receipt and the other actor's faithful group still consolidates; each id is a source
of at most one replacement, and a rerun of a completed night changes nothing; receipts
(JSON, Parquet, HTML) hold no record text, no erased text and no text the model answered.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from memlife.consolidate.prompts import TOOL_NAME
from memlife.erase import erase
from memlife.faults import InjectedFault, inject
from memlife.model import MemoryRecord, RetentionClass, Source, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import (
    MessagesServer,
    Reply,
    invalid_request_error,
    overloaded_error,
    rate_limit_error,
    raw_reply,
    server_error,
    text_reply,
    tool_use_reply,
)

T0 = datetime(2026, 3, 22, 9, tzinfo=UTC)
ACTORS = ("u-1", "u-2")
TEXTS = {
    "u-1": ("I drink 3 cups of black coffee every morning.",
            "I now drink 4 cups of black coffee every morning."),
    "u-2": ("I take 2 sugars in my green tea after lunch.",
            "I now take 1 sugar in my green tea after lunch."),
}  # fmt: skip
SECRETS = {
    "u-1": "My gym locker code is 8812 at the Denver club.",
    "u-2": "My bank PIN is 5590 for the Lisbon account.",
}
INVENTED = " The user also owes money to loan sharks in Zurich."
RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)
FAITHFUL = ("faithful", "dup_ids")
KINDS = (
    *FAITHFUL, "ungrounded", "numbers", "other_id", "unknown_id", "held_id", "other_outdated",
    "unknown_outdated", "empty",
    "blank", "long", "erased_text", "other_text", "invalid_json", "wrong_schema",
    "text_only", "wrong_tool", "two_calls", "max_tokens", "refusal", "end_turn",
    "http_429", "http_500", "http_529", "http_400", "error_200",
)  # fmt: skip
RETRYABLE = ("http_429", "http_500", "http_529", "invalid_json", "error_200")
POINTS = ("after_stage", "after_journal_write", "after_replacement_write", "after_supersede",
          "after_commit_groups", "before_receipt")  # fmt: skip
# half the answers faithful, so that nights write replacements; a crash one night in three
ANSWER = st.one_of(st.sampled_from(FAITHFUL), st.sampled_from(KINDS))
CRASH = st.one_of(st.none(), st.none(), st.sampled_from(POINTS))
EXAMPLES = int(os.environ.get("STATEFUL_EXAMPLES", "8"))
NO_RETRY = {"x-should-retry": "false"}  # the SDK's own back-off would cost seconds


@dataclass
class Sent:
    """One request the fake model answered."""

    actor: str
    texts: dict[str, str]  # id -> text, as the prompt carried it
    kind: str
    summary: str | None  # the summary answered, where there was one
    night: int


def _tool(out: dict[str, Any], **kw: Any) -> Reply:
    return tool_use_reply(TOOL_NAME, out, **kw)


def _bumped(text: str) -> str:
    return re.sub(r"\d+", lambda m: str(int(m.group()) + 5), text)


class ConsolidationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="memlife-stateful-cons-"))
        self.home = self.tmp / "home"
        self.home.mkdir()
        self.server = MessagesServer().start()
        self.saved = {k: os.environ.get(k) for k in self._env()}
        os.environ.update(self._env())
        for k in ("MEMLIFE_EVAL_CASES", "MEMLIFE_STORE", "MEMLIFE_RECEIPTS", "MEMLIFE_FAULT"):
            self.saved.setdefault(k, os.environ.pop(k, None))
        self.originals: dict[str, MemoryRecord] = {}
        self.held: set[str] = set()
        self.erased: dict[str, str] = {}  # id -> its text
        self.sent: list[Sent] = []
        self.lock = threading.Lock()
        self.kinds: dict[str, str] = {}
        self.actor_of: dict[str, str] = {}
        self.night = 0
        self.seq = 0
        self.blocked: set[str] = set()  # actors whose group may be backing off
        self.dirty = False
        self.receipt: dict[str, Any] | None = None
        self.server.set_handler(self._answer)

    def _env(self) -> dict[str, str]:
        return {
            "MEMLIFE_HOME": str(self.home),
            "ANTHROPIC_API_KEY": "sk-ant-fake",
            "ANTHROPIC_BASE_URL": self.server.base_url,
        }

    def teardown(self) -> None:
        self.server.stop()
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the fake model -------------------------------------------------------------------
    def _answer(self, body: dict[str, Any]) -> Reply:
        texts = {rid: c for _, rid, c in RECORD.findall(body["messages"][0]["content"])}
        owners = {i.split("-0")[0] if not i.startswith("r-") else self.actor_of.get(i)
                  for i in texts}  # fmt: skip
        actor = next(a for a in ACTORS if a in owners)
        kind = self.kinds.get(actor, "http_500")
        reply, summary = self._build(kind, actor, texts)
        with self.lock:
            self.sent.append(Sent(actor, texts, kind, summary, self.night))
        return reply

    def _build(self, kind: str, actor: str, texts: dict[str, str]) -> tuple[Reply, str | None]:
        ids = list(texts)
        newest = list(texts.values())[-1]  # oldest first in the prompt
        keep = [i for i, c in texts.items() if c == newest]
        old = [i for i in ids if i not in keep]
        out: dict[str, Any] = {"summary": newest, "claims": [newest], "confidence": 0.9,
                               "source_ids": keep, "relation": "update" if old else "duplicate",
                               "outdated_ids": old}  # fmt: skip
        other = next(a for a in ACTORS if a != actor)
        other_ids = [i for i, r in self.originals.items() if r.actor_id == other]
        my_held = [i for i in self.held if self.originals[i].actor_id == actor]

        def said(text: str) -> tuple[Reply, str]:
            return _tool({**out, "summary": text, "claims": [text]}), text

        err: dict[str, Callable[[], Reply]] = {
            "invalid_json": lambda: raw_reply('{"type": "message", "content": [', status=200),
            "wrong_schema": lambda: _tool({"summary": 5, "ids": ids, "confidence": "high"}),
            "text_only": lambda: text_reply(json.dumps(out)),
            "wrong_tool": lambda: tool_use_reply("record_memory", out),
            "two_calls": lambda: tool_use_reply(TOOL_NAME, out, more=[(TOOL_NAME, out)]),
            "max_tokens": lambda: _tool(out, stop_reason="max_tokens"),
            "refusal": lambda: text_reply("I can't help with that.", stop_reason="refusal"),
            "end_turn": lambda: _tool(out, stop_reason="end_turn"),
            "http_429": lambda: _no_retry(rate_limit_error(0.0)),
            "http_500": lambda: _no_retry(server_error()),
            "http_529": lambda: _no_retry(overloaded_error()),
            "http_400": lambda: invalid_request_error("messages: request rejected"),
            "error_200": lambda: raw_reply(
                json.dumps(
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    }
                )
            ),  # fmt: skip
        }
        if kind in err:
            return err[kind](), None
        if kind == "faithful":
            return _tool(out), newest
        if kind == "dup_ids":
            return _tool({**out, "source_ids": keep + keep[::-1]}), newest
        if kind == "ungrounded":
            return said(newest + INVENTED)
        if kind == "numbers":
            return said(_bumped(newest))
        if kind in ("other_id", "unknown_id", "held_id"):
            extra = {"other_id": other_ids[:1], "held_id": my_held[:1]}.get(kind) or ["zz-404"]
            return _tool({**out, "source_ids": keep + extra}), newest
        if kind in ("other_outdated", "unknown_outdated"):  # an id to retire, not its group's
            extra = (other_ids[:1] if kind == "other_outdated" else []) or ["zz-404"]
            return _tool({**out, "relation": "update", "outdated_ids": old + extra}), newest
        if kind == "empty":
            return said("")
        if kind == "blank":
            return said("   ")
        if kind == "long":
            return said(" ".join([newest] * 60))
        if kind == "erased_text":
            return said(f"{newest} {SECRETS[actor]}")
        assert kind == "other_text", kind
        return said(TEXTS[other][0])

    # -- rules ----------------------------------------------------------------------------
    @initialize()
    def seed(self) -> None:
        for a in ACTORS:
            self._add(a, TEXTS[a][0])
            self._add(a, TEXTS[a][0])

    def _add(self, actor: str, text: str, held: bool = False) -> str:
        self.seq += 1
        rid = f"{actor}-{self.seq:03d}"
        t = T0 + timedelta(days=self.night - 12, minutes=self.seq)
        rec = MemoryRecord(
            id=rid, actor_id=actor, namespace=f"/users/{actor}/notes", memory_type="semantic",
            subject="coffee", content=text, owner=actor, source=Source.user_stated,
            created_at=t, last_verified_at=t,
            retention_class=RetentionClass.legal_hold if held else RetentionClass.standard,
        )  # fmt: skip
        with SqliteStore(self.home / "memlife.db") as store:
            store.put_many([rec])
        self.originals[rid] = rec
        if not held and text not in SECRETS.values():  # a new member: a new group key
            self.blocked.discard(actor)
        self.dirty = True
        if held:
            self.held.add(rid)
        return rid

    @rule(actor=st.sampled_from(ACTORS), update=st.booleans())
    def add_record(self, actor: str, update: bool) -> None:
        self._add(actor, TEXTS[actor][int(update)])

    @rule(actor=st.sampled_from(ACTORS))
    def add_held(self, actor: str) -> None:
        self._add(actor, TEXTS[actor][0], held=True)

    @rule(actor=st.sampled_from(ACTORS))
    def add_and_erase(self, actor: str) -> None:
        rid = self._add(actor, SECRETS[actor])
        with SqliteStore(self.home / "memlife.db") as store:
            erase(store, actor, ids=[rid], now=self._cutoff())
        self.erased[rid] = self.originals.pop(rid).content

    def _cutoff(self) -> datetime:
        return T0 + timedelta(days=self.night)

    @rule(k1=ANSWER, k2=ANSWER, crash=CRASH, days=st.integers(1, 3))
    def night_run(self, k1: str, k2: str, crash: str | None, days: int) -> None:
        self.night += days
        self.dirty = False
        before = self._store()
        self.kinds = {"u-1": k1, "u-2": k2}
        first = len(self.sent)
        if crash is None:
            self.receipt = self._run()
            self._check_night(before, self.sent[first:])
            return
        try:
            with inject(crash):
                self.receipt = self._run()
        except InjectedFault:
            self.receipt = None  # crashed: the rerun rule finishes it
            self.blocked |= set(ACTORS)  # what the crash left is not modelled
        else:  # nothing to write reached the point: a whole night
            self._check_night(before, self.sent[first:])

    @rule(k1=ANSWER, k2=ANSWER)
    def rerun(self, k1: str, k2: str) -> None:
        """The same night again (same cutoff: the same run), the model answering anew."""
        if self.night == 0:
            return
        # a rerun re-executes the run: records added since are new work
        completed = self.receipt is not None and not self.dirty
        before = self._store()
        # a group the model failed retryably (unavailable) is asked again; no other
        retry = {s.actor for s in self.sent if s.night == self.night and s.kind in RETRYABLE}
        self.kinds = {"u-1": k1, "u-2": k2}
        first = len(self.sent)
        self.receipt, self.dirty = self._run(), False
        self.blocked |= set(ACTORS)
        if completed:
            asked = {s.actor for s in self.sent[first:]}
            assert asked <= retry, f"a rerun of a completed night asked for {asked - retry}"
            after = self._store()
            for i, r in before.items():
                if r.actor_id not in retry:
                    assert after[i] == r, f"a rerun of a completed night changed {i}"
            assert {r.actor_id for i, r in after.items() if i not in before} <= retry

    def _run(self) -> dict[str, Any]:
        summary = run_local(RunConfig(dry_run=False, now=self._cutoff()))
        assert summary.receipt is not None
        receipt: dict[str, Any] = json.loads(Path(summary.receipt).read_text())
        return receipt

    def _store(self) -> dict[str, MemoryRecord]:
        with SqliteStore(self.home / "memlife.db") as store:
            records = {r.id: r for r in store.iter_all()}
        self.actor_of.update({i: r.actor_id for i, r in records.items()})
        return records

    def _check_night(self, before: dict[str, MemoryRecord], sent: list[Sent]) -> None:
        after = self._store()
        assert self.receipt is not None
        new = {i: r for i, r in after.items() if i not in before and i not in self.originals}
        failed = [s for s in sent if s.kind not in FAITHFUL]
        event(f"night: {len(new)} replacement(s), {len(failed)} failed answer(s)")
        for s in failed:
            mine = [r for r in new.values() if r.actor_id == s.actor]
            assert not mine, f"{s.kind} answer for {s.actor} wrote {sorted(new)}"
            for i in s.texts:  # every record it sent stays as it was, active
                assert after[i].status is Status.active, (s.kind, i, after[i].status)
                assert after[i].content == before[i].content
        model = self.receipt["model"]
        other = self.receipt["other_counts"]
        # each failure counted by its code; an unreachable model counted as such too
        assert sum(model["rejections"].values()) >= len(failed), (model, failed)
        unavailable = [s for s in failed if s.kind in RETRYABLE]
        assert other.get("consolidation_model_unavailable", 0) >= len(unavailable), other
        asked = {s.actor for s in sent}
        for a in ACTORS:  # the run goes on: every open group is sent, whatever the other's
            live = [r for r in before.values() if r.actor_id == a
                    and r.status is Status.active and r.id not in self.held]  # fmt: skip
            if len(live) >= 2 and a not in self.blocked:
                assert a in asked, (a, sorted(r.id for r in live), [x.kind for x in sent])
        for a in asked:  # refused (backing off) until its group changes
            live = [r for r in after.values() if r.actor_id == a
                    and r.status is Status.active and r.id not in self.held]  # fmt: skip
            if len(live) >= 2 and self.kinds[a] not in RETRYABLE:
                self.blocked.add(a)
        for s in sent:  # the run goes on: a faithful merge of one text is taken
            if s.kind in FAITHFUL and len(set(s.texts.values())) == 1:
                got = [r for r in new.values() if set(r.provenance.supersedes) == set(s.texts)]
                assert got, (s.kind, s.actor, sorted(s.texts), [x.kind for x in sent], model)

    # -- invariants -----------------------------------------------------------------------
    @invariant()
    def held_untouched(self) -> None:
        store = self._store()
        sources = {i for r in store.values() for i in r.provenance.supersedes}
        for i in self.held:
            r = store[i]
            assert r.status is Status.active and r.provenance.replaced_by is None, i
            assert r.content == self.originals[i].content and i not in sources, i

    @invariant()
    def originals_kept(self) -> None:
        store = self._store()
        for i, orig in self.originals.items():
            r = store.get(i)
            assert r is not None, f"{i} disappeared"
            assert r.content == orig.content and r.actor_id == orig.actor_id, i
            assert r.status in (Status.active, Status.superseded), (i, r.status)
        for i in self.erased:
            assert i not in store, f"erased {i} is back"
        for i, r in store.items():  # points to the live end of its chain (invariant 3)
            if r.status is Status.superseded:
                rep = store.get(r.provenance.replaced_by or "")
                assert rep is not None and rep.status is Status.active, i
                assert i in _chain(store, rep.id), (i, rep.id)

    @invariant()
    def replacements_grounded(self) -> None:
        store = self._store()
        erased_texts = set(self.erased.values()) | set(SECRETS.values())
        for rid, r in store.items():
            if rid in self.originals:
                continue
            src = r.provenance.supersedes
            assert rid.startswith("r-") and src, rid
            for i in src:
                s = store[i]
                assert (s.actor_id, s.namespace) == (r.actor_id, r.namespace), (rid, i)
                assert i not in self.held, (rid, i)
            # exactly the records of one request of its actor: every member is merged or
            # retired (duplicate/update), none added
            assert any(set(src) == set(s.texts) and s.actor == r.actor_id
                       for s in self.sent), (rid, src)  # fmt: skip
            # independent oracle: every faithful answer is a source's text verbatim
            assert r.content in {store[i].content for i in src}, (rid, r.content)
            assert not any(e in r.content for e in erased_texts), rid

    @invariant()
    def one_replacement_per_source(self) -> None:
        seen: dict[str, str] = {}
        for rid, r in self._store().items():
            for i in r.provenance.supersedes:
                assert i not in seen, f"{i} is a source of {seen[i]} and {rid}"
                seen[i] = rid

    @invariant()
    def receipts_free_of_content(self) -> None:
        texts = {t for pair in TEXTS.values() for t in pair} | set(SECRETS.values())
        texts |= {s.summary for s in self.sent if s.summary and s.summary.strip()}
        texts |= {_bumped(t) for pair in TEXTS.values() for t in pair}
        for path in (self.home / "receipts").rglob("*"):
            if path.suffix == ".parquet":
                blob = json.dumps(pq.read_table(path).to_pylist(), default=str)
            elif path.is_file() and path.suffix in (".json", ".html"):
                blob = path.read_text()
            else:
                continue
            for t in texts:
                assert t not in blob and json.dumps(t)[1:-1] not in blob, (path.name, t)


def _chain(store: dict[str, MemoryRecord], rid: str) -> set[str]:
    """Every record a replacement stands for, through the replacements it superseded."""
    todo, seen = [rid], set[str]()
    while todo:
        for i in store[todo.pop()].provenance.supersedes:
            if i not in seen and i in store:
                seen.add(i)
                todo.append(i)
    return seen


def _no_retry(reply: Reply) -> Reply:
    reply.headers.update(NO_RETRY)
    return reply


ConsolidationMachine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True,
    phases=[
        p for p in Phase if os.environ.get("STATEFUL_NO_SHRINK") is None or p is not Phase.shrink
    ],
)
TestConsolidationMachine = ConsolidationMachine.TestCase
