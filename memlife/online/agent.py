"""An example agent using both halves of the online library with Anthropic tool use.

Per user turn: recall the actor's memories for the user's text and put them in the
system prompt; then up to ``max_steps`` model calls, each preceded by compaction of the
conversation (:func:`memlife.online.compaction.compact`); a ``remember`` tool lets the
model save a durable fact (through :meth:`LongTermMemory.remember`, so duplicates
refresh). When the step limit is reached with tool calls still coming, the tools of the
last step are answered and the turn ends with ``stopped="step_limit"``; the next user text
joins that tool-result message, so the history stays valid for the API. So it stays after
a reply the API would not take back: blank text blocks and an empty reply are not kept,
and the tool calls of a reply cut off at ``max_tokens`` are answered as not run. A blank
user text is refused (InputError) before anything is sent, and a tool that raises has its
call (and the reply's later calls) answered as failed before the error goes on up.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import MessageParam, ToolParam

from memlife.errors import InputError
from memlife.online.compaction import (
    CompactionResult,
    Message,
    Summarizer,
    TokenCounter,
    compact,
)
from memlife.online.inputs import text_arg
from memlife.online.memory import Hit, LongTermMemory, RememberRefused, default_namespace
from memlife.settings import settings

REMEMBER_TOOL: ToolParam = {
    "name": "remember",
    "description": (
        "Save one durable fact about the user (a preference, a standing instruction, a "
        "biographical fact) to long-term memory so it is known in later conversations. "
        "State it in the first person as the user would ('I only drink green tea.'). "
        "Do not save small talk, one-off requests or things already in memory."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "fact": {"type": "string", "description": "The fact, one self-contained sentence."},
            "subject": {
                "type": "string",
                "description": "What the fact is about, a short noun phrase (e.g. 'drinks').",
            },
        },
        "required": ["fact"],
    },
}


def api_message(m: Message) -> MessageParam:
    """One message of the history (plain JSON: compaction edits any such dict) as the SDK's
    request type; a role the Messages API does not take is refused, not sent."""
    if m["role"] == "user":
        return {"role": "user", "content": m["content"]}
    if m["role"] == "assistant":
        return {"role": "assistant", "content": m["content"]}
    raise ValueError(f"a message with role {m['role']!r} cannot go to the Messages API")


SYSTEM_PROMPT = (
    "You are a helpful assistant with long-term memory of this user. Use the remembered "
    "facts below when they are relevant; when the user tells you something durable about "
    "themselves, call the remember tool."
)


@dataclass
class AgentReply:
    text: str  # the assistant's text of this turn (last step)
    steps: int  # model calls made this turn
    stopped: str  # "end_turn" (or the API's stop reason) or "step_limit"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # name, input, result
    recalled: list[Hit] = field(default_factory=list)
    compactions: list[CompactionResult] = field(default_factory=list)  # the ones that compacted


def _block_dicts(content: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for b in content:
        d = b.model_dump(exclude_none=True) if hasattr(b, "model_dump") else dict(b)
        if d.get("type") == "text":
            d = {"type": "text", "text": d.get("text", "")}  # drop citations=None etc.
        out.append(d)
    return out


def _blank_text(block: Mapping[str, Any]) -> bool:
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


def _not_run(uses: Sequence[Mapping[str, Any]], reply: AgentReply) -> list[dict[str, Any]]:
    """Error results for tool calls of a reply that did not stop to call tools (cut off
    at ``max_tokens``: the input may be partial, so nothing is run). Without a result
    each ``tool_use`` makes every later request of the conversation a 400."""
    why = f"not run: the reply stopped ({reply.stopped}) before the call was complete"
    for use in uses:
        reply.tool_calls.append({"name": use.get("name"), "input": use.get("input"), "result": why})
    return [
        {"type": "tool_result", "tool_use_id": use["id"], "content": why, "is_error": True}
        for use in uses
    ]


def _raised(uses: Sequence[Mapping[str, Any]], exc: BaseException) -> list[dict[str, Any]]:
    """Error results for the calls of a reply whose tool raised ``exc``: the first of
    ``uses`` raised, the others were not run. Named by the error's type only (its message
    may quote the tool's input)."""
    whys = [f"failed: {type(exc).__name__}"] + ["not run: an earlier tool call failed"] * (
        len(uses) - 1
    )
    return [
        {"type": "tool_result", "tool_use_id": use["id"], "content": why, "is_error": True}
        for use, why in zip(uses, whys, strict=True)
    ]


class MemoryAgent:
    """A chat loop for one actor over :class:`LongTermMemory`."""

    def __init__(
        self,
        memory: LongTermMemory,
        actor: str,
        *,
        namespace: str | None = None,
        client: anthropic.Anthropic | None = None,
        model: str | None = None,
        max_steps: int = 4,
        max_tokens: int = 1024,
        recall_k: int = 5,
        budget_tokens: int = 8000,
        keep_last_turns: int = 2,
        summarizer: Summarizer | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.memory = memory
        self.actor = actor
        self.namespace = namespace or default_namespace(actor)
        self.client = client or anthropic.Anthropic()
        self.model = model or settings().chat_model  # MEMLIFE_CHAT_MODEL
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.recall_k = recall_k
        self.budget_tokens = budget_tokens
        self.keep_last_turns = keep_last_turns
        self.counter = counter
        if summarizer is None:
            from memlife.online.compaction import AnthropicSummarizer

            summarizer = AnthropicSummarizer(self.client)
        self.summarizer = summarizer
        self.messages: list[Message] = []

    def system_prompt(self, hits: Sequence[Hit]) -> str:
        if not hits:
            return f"{SYSTEM_PROMPT}\n\nRemembered facts: none relevant."
        lines = "\n".join(f"- {h.record.content}" for h in hits)
        return f"{SYSTEM_PROMPT}\n\nRemembered facts about the user:\n{lines}"

    def _add_user_text(self, text: str) -> None:
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "user":
            # The previous turn stopped at the step limit right after tool results:
            # the new text joins that message (a user message may mix both).
            content = last["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            last["content"] = [*blocks, {"type": "text", "text": text}]
        else:
            self.messages.append({"role": "user", "content": text})

    def _run_tool(self, name: str, args: Mapping[str, Any]) -> tuple[str, bool]:
        if name != "remember":
            return f"unknown tool {name!r}", True
        fact = args.get("fact")
        if not isinstance(fact, str) or not fact.strip():
            return "'fact' must be a non-empty string", True
        subject = args.get("subject") if isinstance(args.get("subject"), str) else None
        try:
            res = self.memory.remember(self.actor, self.namespace, subject, fact)
        except RememberRefused as exc:  # erased content, oversized fact: a tool error, no crash
            return json.dumps({"not_saved": exc.code}), True
        except InputError as exc:  # a subject no record can have: the message names the field only
            return json.dumps({"not_saved": "INVALID_ARGUMENT", "reason": str(exc)}), True
        if res.created:
            return json.dumps({"saved": res.record_id}), False
        return json.dumps({"already_known": res.record_id, "refreshed": True}), False

    def send(self, text: str) -> AgentReply:
        """One user turn: recall, then call the model (and tools) up to ``max_steps`` times.
        A blank ``text`` is an InputError and changes nothing."""
        # an empty or whitespace user message is a 400 from the API, and compaction refuses
        # every later history holding it (invalid_input): never stored (audit 53b2)
        if not text_arg(text, "text").strip():
            raise InputError("text is blank: a user turn needs something to say")
        hits = self.memory.recall(self.actor, text, k=self.recall_k)
        system = self.system_prompt(hits)
        self._add_user_text(text)
        reply = AgentReply(text="", steps=0, stopped="", recalled=list(hits))
        while True:
            result = compact(
                self.messages,
                budget_tokens=self.budget_tokens,
                keep_last_turns=self.keep_last_turns,
                summarizer=self.summarizer,
                counter=self.counter,
            )
            if result.compacted:
                self.messages = result.messages
                reply.compactions.append(result)
            msg = self.client.messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                tools=[REMEMBER_TOOL],
                messages=[api_message(m) for m in self.messages],
            )
            reply.steps += 1
            # the history keeps only what the API takes back: a blank text block or an empty
            # reply (an ``end_turn`` with no content, as after tool results) sent again is a
            # 400 on every later turn (audit 52b); nothing said, the next text joins the last
            blocks = [b for b in _block_dicts(msg.content) if not _blank_text(b)]
            if blocks:
                self.messages.append({"role": "assistant", "content": blocks})
            reply.text = "".join(b["text"] for b in blocks if b.get("type") == "text")
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            if msg.stop_reason != "tool_use" or not uses:
                reply.stopped = str(msg.stop_reason or "end_turn")
                if uses:  # a call cut off (max_tokens): not run, but answered (audit 52b)
                    self.messages.append({"role": "user", "content": _not_run(uses, reply)})
                return reply
            results: list[dict[str, Any]] = []
            try:
                for use in uses:
                    out, is_error = self._run_tool(use["name"], use.get("input") or {})
                    reply.tool_calls.append(
                        {"name": use["name"], "input": use.get("input"), "result": out}
                    )
                    block: dict[str, Any] = {
                        "type": "tool_result",
                        "tool_use_id": use["id"],
                        "content": out,
                    }
                    if is_error:
                        block["is_error"] = True
                    results.append(block)
            except BaseException as exc:
                # the store locked past its busy timeout, an interrupt: the error goes on up,
                # but every call stored above is answered first, else each later request of
                # this conversation is a 400 and compaction refuses it (audit 53b2)
                results += _raised(uses[len(results) :], exc)
                self.messages.append({"role": "user", "content": results})
                raise
            self.messages.append({"role": "user", "content": results})
            if reply.steps >= self.max_steps:
                reply.stopped = "step_limit"
                return reply
