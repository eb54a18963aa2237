"""Short-term compaction, session 48 (audit 48c): a unit larger than the summariser's bound by itself
is shortened for the summariser only, and keeps its kinds, ids and pairing where cutting
its texts is enough: strings inside lists in a tool input, thinking, a search result's
text and a text document's data are cut in place, and a large opaque block (a server
tool's result) becomes a placeholder while the client tool call beside it stays a tool
call. Real components: the offline estimate, a summariser object recording what it read
(no network)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from memlife.online.compaction import EstimateTokenCounter, Message, compact, validate_history
from tests.support.messages import A, U

EST = EstimateTokenCounter()
LEFT_OUT = "characters left out"
BOUND = 10_000


class Recording:
    """A summariser that records every input and answers a short summary."""

    max_tokens = 100

    def __init__(self) -> None:
        self.calls: list[list[Message]] = []

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        self.calls.append(copy.deepcopy([dict(m) for m in messages]))
        return "The assistant edited the files and searched the web."


def _read(history: list[Message]) -> list[Message]:
    """What the summariser read of ``history``'s older turns (within the bound)."""
    summarizer = Recording()
    result = compact(
        copy.deepcopy(history), budget_tokens=2_000, keep_last_turns=1,
        summarizer=summarizer, summarizer_input_tokens=BOUND,
    )  # fmt: skip
    assert result.compacted, result.error
    assert all(EST.count(c) <= BOUND for c in summarizer.calls)
    assert all(validate_history(c) == [] for c in summarizer.calls)
    return [m for call in summarizer.calls for m in call]


def _tail(*extra: Message) -> list[Message]:
    return [*extra, A("Done."), U("thanks"), A("welcome")]


def test_strings_in_a_tool_inputs_lists_are_cut_and_the_call_stays_a_call() -> None:
    """Adversary: a tool call whose input holds a list of two huge texts (a multi-file
    edit, ~150k estimated tokens). Must hold: the summariser reads it as the same
    ``tool_use`` (id, keys, a list of two strings, each head and tail around the
    placeholder), answered by its result; not flattened to transcript text. Kills
    compaction_summary.py ``_cut_json``: the ``list`` branch dropped."""
    use = {"type": "tool_use", "id": "e1", "name": "edit",
           "input": {"files": ["AAAA" + "a" * 300_000, "BBBB" + "b" * 300_000]}}  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": "e1", "content": "edited 2 files"}
    reads = _read(_tail(U("Apply the patch."), A([use]), U([result])))
    got = next(m for m in reads if m["role"] == "assistant")["content"][0]
    assert (got["type"], got["id"], set(got["input"])) == ("tool_use", "e1", {"files"})
    first, second = got["input"]["files"]
    assert first.startswith("AAAA") and second.startswith("BBBB")
    assert LEFT_OUT in first and LEFT_OUT in second


def test_a_large_server_tool_result_becomes_a_placeholder_beside_a_kept_tool_call() -> None:
    """Adversary: one assistant message holds a web search (server tool) whose result is
    ~100k estimated tokens of encrypted content, then a client tool call. Must hold: for
    the summariser the search result becomes a text placeholder while the client
    ``tool_use`` stays a tool call answered by its ``tool_result`` (ids kept). Kills
    compaction_summary.py ``_cut_block``: the opaque test reduced to ``kind in
    MEDIA_KINDS`` (the message then flattened to text, its tool ids gone)."""
    hits = [{"type": "web_search_result", "url": f"https://e.org/{i}", "title": f"r{i}",
             "encrypted_content": "E" * 4_000} for i in range(100)]  # fmt: skip
    assistant = A([
        {"type": "server_tool_use", "id": "srv1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srv1", "content": hits},
        {"type": "tool_use", "id": "c1", "name": "save", "input": {"n": 1}},
    ])  # fmt: skip
    answer = U([{"type": "tool_result", "tool_use_id": "c1", "content": "saved"}])
    reads = _read(_tail(U("Search and save."), assistant, answer))
    got = next(m for m in reads if m["role"] == "assistant")["content"]
    assert [b["type"] for b in got] == ["server_tool_use", "text", "tool_use"]
    assert got[1]["text"] == "[web_search_tool_result block left out for the summary]"
    assert got[2]["id"] == "c1"


def test_a_huge_thinking_block_is_cut_and_stays_thinking() -> None:
    """Adversary: an older tool round whose assistant message opens with ~75k estimated
    tokens of extended thinking (an earlier turn's thinking costs the history nothing,
    but the summariser reads the round whole). Must hold: the summariser reads that
    message with the thinking block still a ``thinking`` block (first, as the API
    requires), its text cut around the placeholder, and the tool call after it as it was;
    not a text placeholder standing in the assistant's words. Kills compaction_summary.py ``_cut_block``: the
    ``thinking`` branch returning the block uncut."""
    think = {"type": "thinking", "thinking": "PLAN " + "t" * 300_000, "signature": "c2ln"}
    use = {"type": "tool_use", "id": "r1", "name": "read", "input": {"path": "a.txt"}}
    result = {"type": "tool_result", "tool_use_id": "r1", "content": "a" * 20_000}
    reads = _read(_tail(U("Read a.txt."), A([think, use]), U([result])))
    got = next(m for m in reads if m["role"] == "assistant")["content"]
    assert [b["type"] for b in got] == ["thinking", "tool_use"]
    assert got[0]["thinking"].startswith("PLAN ") and LEFT_OUT in got[0]["thinking"]
    assert got[1] == use


def test_a_huge_search_result_is_cut_and_stays_a_search_result() -> None:
    """Adversary: the user's request carries a search result whose text is ~75k
    estimated tokens. Must hold: the summariser reads it as the same ``search_result``
    (title, source, a text block cut around the placeholder), not as a placeholder that
    drops the source it came from. Kills compaction_summary.py ``_cut_block``: the
    ``search_result`` kind taken out of the branch that cuts inner content."""
    found = {
        "type": "search_result", "title": "Release notes", "source": "https://e.org/notes",
        "content": [{"type": "text", "text": "NOTES " + "n" * 300_000}],
    }  # fmt: skip
    reads = _read(_tail(U([{"type": "text", "text": "Summarise these notes."}, found])))
    got = reads[0]["content"][1]
    assert (got["type"], got["title"], got["source"]) == (
        "search_result",
        "Release notes",
        found["source"],
    )
    assert got["content"][0]["text"].startswith("NOTES ") and LEFT_OUT in got["content"][0]["text"]


def test_a_huge_text_document_is_cut_and_stays_a_document() -> None:
    """Adversary: the user's request attaches a plain-text document of ~75k estimated
    tokens. Must hold: the summariser reads the same ``document`` (its title, a text
    source whose data is cut around the placeholder), not a placeholder in its stead.
    Kills compaction_summary.py ``_cut_block``: the text-document branch skipped (the
    document then left out whole, as an image would be)."""
    doc = {
        "type": "document", "title": "Contract",
        "source": {"type": "text", "media_type": "text/plain", "data": "CLAUSE " + "c" * 300_000},
    }  # fmt: skip
    reads = _read(_tail(U([{"type": "text", "text": "Summarise the contract."}, doc])))
    got = reads[0]["content"][1]
    assert (got["type"], got["title"], got["source"]["type"]) == ("document", "Contract", "text")
    assert got["source"]["data"].startswith("CLAUSE ") and LEFT_OUT in got["source"]["data"]
