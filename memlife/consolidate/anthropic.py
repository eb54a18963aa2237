"""Consolidation through the Anthropic Messages API (the ``anthropic`` SDK).

One call per group: a single tool whose ``input_schema`` is the response model's JSON
schema, forced with ``tool_choice``; the tool input is validated with pydantic and then
grounded against the group's records before anything is returned. Failures are
``ConsolidationError`` codes and never a partial result:

- SCHEMA_INVALID      no tool call, a stop_reason other than tool_use (truncated,
                      refused), malformed input
- MODEL_UNAVAILABLE   429 / 529 / 5xx / timeout / connection, after the SDK's own retries,
                      or a 200 whose body is not a message (a proxy's HTML page)
                      (retryable: the executor tries the group again on a later run)
- MODEL_MISCONFIGURED 401 / 402 / 403 / 404, or a 400 naming the model or the account: the
                      key, the account or the model name is wrong, not the group.
                      Retryable (no group is held to account) and sticky: this
                      consolidator sends nothing more, every later group gets the same
                      error at no cost (a 400 about billing, "credit balance is too low",
                      a spend limit or a disabled organization, too)
- MODEL_REJECTED      any other API error (a bad request): retrying will not help
An outage is sticky too: after OUTAGE_CALLS groups in a row found the service unavailable,
later groups of the run are not sent (MODEL_UNAVAILABLE, retried by the next run): a
hanging or overloaded endpoint cost 3 attempts x the timeout for every group of the run.
One group is let through as a probe after OUTAGE_CALLS, then 2x, 4x, ... groups held back:
a few calls a run while the service is down, and groups that fail on their own (five of
them sorted first) no longer hold back the rest of the run. Such groups are held to
account when the service answered others (``answered``; memlife/apply/unavailable.py),
or, where none other was sent, a one-token ``probe`` request.
- grounding codes     see memlife.consolidate.grounding
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from typing import Any

import anthropic
from pydantic import ValidationError

from memlife.consolidate import prompts
from memlife.consolidate.answers import AnswerBook, KeptAnswer, request_digest
from memlife.consolidate.base import (
    MODEL_MISCONFIGURED,
    ConsolidationError,
    ConsolidationResult,
    Group,
)
from memlife.consolidate.deadline import deadline_client_options
from memlife.consolidate.estimate import CHARS_PER_TOKEN, estimate_input_tokens
from memlife.consolidate.grounding import KEEP_APART, check_grounding
from memlife.consolidate.prompts import (
    TOOL_NAME,
    ConsolidationOutput,
    build_messages,
    shown_ids,
    tool_choice,
    tool_definition,
)
from memlife.embed import Embedder
from memlife.errors import Reason
from memlife.policy import Grouping, Limits, Policy
from memlife.settings import settings

DEFAULT_MODEL = "claude-sonnet-4-5"
SCHEMA_INVALID = "SCHEMA_INVALID"
MODEL_UNAVAILABLE = "MODEL_UNAVAILABLE"
MODEL_REJECTED = "MODEL_REJECTED"
_RETRYABLE_STATUS = frozenset({408, 409, 429})
# key, payment (a gateway's spent budget), permission, model or endpoint
_CONFIG_STATUS = frozenset({401, 402, 403, 404})
# a 400 about the model or the account fails every group alike (the API's words, never
# memory content): "model: x not found", "Your credit balance is too low", "You have
# reached your specified API usage limits", "This organization has been disabled"
# (audit 51c: the last two were each group's refusal, every group parked in review)
_NAMES_MODEL = re.compile(
    r"\b(model|credit|billing|balance|usage limits?|organi[sz]ation)\b",
    re.IGNORECASE,
)
OUTAGE_CALLS = 5  # groups in a row finding the service unavailable: the run stops sending


@dataclass(frozen=True)
class Probe:
    """What one probe request found (``AnthropicConsolidator.probe``)."""

    answered: bool
    input_tokens: int = 0
    output_tokens: int = 0
    sent: bool = True  # False: nothing to send with (a misconfigured run sends no request)


@dataclass
class Usage:
    """Totals over every request of one consolidator, failed ones included (they cost too)."""

    calls: int = 0  # HTTP requests sent, the SDK's own retries included
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class AnthropicConsolidator:
    name = "anthropic"
    keeps_answers = True  # a dry run's answers serve the apply run (consolidate/answers.py)

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        max_tokens: int = 1024,
        timeout: float = 60.0,
        max_retries: int = 2,
        base_url: str | None = None,
        api_key: str | None = None,
        max_concurrency: int = 4,
        embedder: Embedder | None = None,
        policy: Policy | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.model = model
        self.max_tokens = max_tokens
        # base_url/api_key None: the SDK reads ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY itself.
        # Every request the SDK sends (its own retries included) is counted by this hook:
        # a request costs whether or not its answer is used.
        self._sent = threading.local()
        self.client = anthropic.Anthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            # the timeout bounds each request whole, not each read (a trickling body)
            http_client=anthropic.DefaultHttpxClient(
                event_hooks={"request": [self._on_request]}, **deadline_client_options(timeout)
            ),
        )
        self._embedder = embedder
        self.grouping = policy.grouping if policy is not None else Grouping()
        self.limits = policy.limits if policy is not None else Limits()
        # Set by the first configuration failure (bad key, unknown model): every later
        # call fails the same way without a request, for as long as this instance lives
        # (one run): a wrong key must not cost one refused request per group.
        self.misconfigured: str | None = None
        self._outage = 0  # groups in a row that found the service unavailable (OUTAGE_CALLS)
        self.answered = 0  # calls the service answered (memlife/apply/unavailable.py)
        # after the outage stop, one group is let through once this many were held back
        # (doubling: a down service costs a few probes a run, one that is back is found)
        self._held, self._probe_after = 0, OUTAGE_CALLS
        # One limit per instance, shared by every thread that uses it: the pipeline's
        # workers must not open more concurrent calls than the account's rate allows.
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self.max_concurrency = max_concurrency
        self.usage = Usage()
        self._usage_lock = threading.Lock()

    @classmethod
    def from_env(cls, **overrides: Any) -> AnthropicConsolidator:
        """ANTHROPIC_API_KEY (required), MEMLIFE_MODEL, MEMLIFE_MODEL_TIMEOUT,
        MEMLIFE_MODEL_CONCURRENCY; ANTHROPIC_BASE_URL is honoured by the SDK."""
        env = settings()
        if "api_key" not in overrides and not env.anthropic_api_key:
            raise ConsolidationError(Reason.MODEL_NOT_CONFIGURED, "ANTHROPIC_API_KEY is not set")
        options: dict[str, Any] = {
            "model": env.model or DEFAULT_MODEL,
            "timeout": env.model_timeout,
            "max_concurrency": env.model_concurrency,
        }
        options.update(overrides)
        return cls(**options)

    @property
    def prompt_version(self) -> str:
        """The prompt this consolidator sends: the consolidation memo keys outcomes by it."""
        return prompts.PROMPT_VERSION

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from memlife.embed import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    def _on_request(self, request: Any) -> None:
        self._sent.n = getattr(self._sent, "n", 0) + 1
        with self._usage_lock:
            self.usage.calls += 1

    def _count(self, input_tokens: int, output_tokens: int, failed: bool) -> None:
        with self._usage_lock:
            self.usage.failures += int(failed)
            self.usage.input_tokens += input_tokens
            self.usage.output_tokens += output_tokens

    def _request(self, group: Group) -> dict[str, Any]:
        """Everything the Messages API is sent for this group (and the answer's key)."""
        system, messages = build_messages(group)
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": messages,
            "tools": [tool_definition()],
            "tool_choice": tool_choice(),
        }

    def _call(self, request: dict[str, Any]) -> anthropic.types.Message:
        try:
            with self._slots:
                msg: anthropic.types.Message = self.client.messages.create(**request)
            return msg  # the streak ends only on a message (_answer): a proxy's 200 is none
        except anthropic.APIConnectionError as exc:  # includes APITimeoutError
            self._count(0, 0, failed=True)
            self._outage += 1
            raise ConsolidationError(MODEL_UNAVAILABLE, type(exc).__name__, retryable=True) from exc
        except anthropic.APIStatusError as exc:
            self._count(0, 0, failed=True)
            if exc.status_code in _RETRYABLE_STATUS or exc.status_code >= 500:
                self._outage += 1
                raise ConsolidationError(
                    MODEL_UNAVAILABLE, f"HTTP {exc.status_code}", retryable=True
                ) from exc
            if self._configuration_error(exc):
                self.misconfigured = f"HTTP {exc.status_code}"
                raise ConsolidationError(
                    MODEL_MISCONFIGURED, self.misconfigured, retryable=True
                ) from exc
            raise ConsolidationError(MODEL_REJECTED, f"HTTP {exc.status_code}") from exc
        except (anthropic.APIResponseValidationError, ValueError, RecursionError) as exc:
            # The SDK lets a non-JSON body surface as a bare JSONDecodeError (a ValueError):
            # a gateway's or proxy's page, a cut body; one nested past the decoder's depth as
            # a RecursionError. The model never answered this group:
            # retried, nobody blamed (a group's rejections send it to review for good).
            self._count(0, 0, failed=True)
            self._outage += 1
            raise ConsolidationError(
                MODEL_UNAVAILABLE, "response body is not a message", retryable=True
            ) from exc

    def probe(self) -> Probe:
        """One minimal request (no memory content, one token back, no SDK retries): does
        the service answer at all? It tells a group that fails alone in its run from an
        outage (memlife/apply/unavailable.py). Counted as any request is."""
        if self.misconfigured is not None:
            return Probe(answered=False, sent=False)
        request: dict[str, Any] = {"model": self.model, "max_tokens": 1,
                   "messages": [{"role": "user", "content": "ping"}]}  # fmt: skip
        try:
            with self._slots:
                msg = self.client.with_options(max_retries=0).messages.create(**request)
        except (anthropic.APIError, ValueError, RecursionError):  # down, overloaded, not a message
            self._count(0, 0, failed=True)
            return Probe(answered=False)
        if not _is_message(msg):
            self._count(0, 0, failed=True)
            return Probe(answered=False)
        tin, tout = _probe_usage(msg, request)
        self._count(tin, tout, failed=False)
        self._service_answered()
        return Probe(answered=True, input_tokens=tin, output_tokens=tout)

    def _service_answered(self) -> None:
        """The service answered a call: the outage streak ends, the probe schedule resets."""
        self._outage, self.answered = 0, self.answered + 1
        self._held, self._probe_after = 0, OUTAGE_CALLS

    def _configuration_error(self, exc: anthropic.APIStatusError) -> bool:
        """The key, the permissions or the model name is wrong: no group's fault."""
        if exc.status_code in _CONFIG_STATUS:
            return True
        # a 400 about the model ("model: claude-x not found", max_tokens over the model's
        # limit) fails every group alike; the error message is the API's, not memory content
        return exc.status_code == 400 and bool(
            _NAMES_MODEL.search(exc.message) or self.model in exc.message
        )

    def consolidate(self, group: Group, answers: AnswerBook | None = None) -> ConsolidationResult:
        """``answers``: what a dry run was answered to the same request (consolidate/answers.py),
        used in place of a call and checked as a fresh answer is; a dry run keeps its own."""
        self._sent.n = 0
        tokens = [0, 0, 0]  # input, output, 1 where estimated (_usage)
        try:
            result = self._consolidate(group, tokens, answers)
        except ConsolidationError as exc:
            exc.requests, (exc.input_tokens, exc.output_tokens) = self._sent.n, tokens[:2]
            exc.usage_estimated = bool(tokens[2])
            raise
        return result.model_copy(update={"requests": self._sent.n})

    def _consolidate(
        self, group: Group, tokens: list[int], answers: AnswerBook | None
    ) -> ConsolidationResult:
        if not group.records:
            raise ConsolidationError(Reason.EMPTY_GROUP, group.key)
        request = self._request(group)
        digest = request_digest(request) if answers is not None else ""
        kept = _kept(answers.find(digest)) if answers is not None else None
        if kept is not None and answers is not None:  # no call: checked as a fresh answer
            output, model = kept
            try:
                return self._checked(group, output, model, reused=True)
            except ConsolidationError as exc:
                if not exc.retryable and exc.code != KEEP_APART:  # refused: ask afresh next time
                    answers.drop(digest)
                raise
        return self._answer(group, request, tokens, answers, digest)

    def _answer(
        self,
        group: Group,
        request: dict[str, Any],
        tokens: list[int],
        answers: AnswerBook | None,
        digest: str,
    ) -> ConsolidationResult:
        """Ask the model: one call (the SDK's retries aside), parsed, then grounded."""
        if self.misconfigured is not None:  # nothing sent: the run's configuration is wrong
            raise ConsolidationError(MODEL_MISCONFIGURED, self.misconfigured, retryable=True)
        if self._outage >= OUTAGE_CALLS:  # the service is down: not sent, bar a probe
            self._held += 1
            if self._held < self._probe_after:
                raise ConsolidationError(
                    MODEL_UNAVAILABLE,
                    f"{self._outage} groups in a row unavailable: not sent",
                    retryable=True,
                )
            self._held, self._probe_after = 0, self._probe_after * 2  # this group probes
        msg = self._call(request)
        if not _is_message(msg):
            # a 200 whose body is not a message: not JSON (a proxy's or captive portal's HTML
            # page: the SDK hands back the text), or JSON of another shape (a gateway's
            # {"message": "Internal server error"}, a cut body, {}), which the SDK builds
            # into a Message without checking. The service was not reached: not the group's
            # fault (a SCHEMA_INVALID would count against it, and send it to review for good)
            self._count(0, 0, failed=True)
            self._outage += 1
            raise ConsolidationError(MODEL_UNAVAILABLE, "response is not a message", retryable=True)
        self._service_answered()
        tin, tout, estimated = _usage(msg, group, request)
        tokens[:] = [tin, tout, estimated]
        try:
            output = _parse(msg)
        except ConsolidationError:
            self._count(tin, tout, failed=True)
            raise
        model = getattr(msg, "model", None) or self.model
        if answers is not None:  # kept whatever the checks below say: the apply run's verdict
            answers.keep(digest, (group.actor_id, group.namespace), model, output.model_dump())
        try:
            result = self._checked(group, output, model, input_tokens=tin, output_tokens=tout,
                                   usage_estimated=bool(estimated))  # fmt: skip
        except ConsolidationError:
            self._count(tin, tout, failed=True)
            raise
        self._count(tin, tout, failed=False)
        return result

    def _checked(
        self, group: Group, output: ConsolidationOutput, model: str, **filled: Any
    ) -> ConsolidationResult:
        """The answer as a result, grounded in the group (grounding.py), or the refusal."""
        own = shown_ids(group)  # an id the prompt quoted otherwise, named as it was shown
        result = ConsolidationResult(
            **output.model_dump(exclude={"source_ids", "outdated_ids"}),
            source_ids=list(dict.fromkeys(own.get(i, i) for i in output.source_ids)),
            outdated_ids=[own.get(i, i) for i in output.outdated_ids],
            model=model,
            **filled,
        )
        check_grounding(
            result,
            group,
            self.embedder,
            self.grouping.grounding_cosine,
            max_bytes=self.limits.content_max_bytes,
        )
        return result


def _kept(found: KeptAnswer | None) -> tuple[ConsolidationOutput, str] | None:
    """A kept answer that still reads as one (a row that does not: asked again)."""
    if found is None:
        return None
    try:
        return ConsolidationOutput.model_validate(found.output), found.model
    except ValidationError:
        return None


def _usage(
    msg: anthropic.types.Message, group: Group, request: dict[str, Any]
) -> tuple[int, int, int]:
    """Input and output tokens of an answer, and 1 where they are estimated: a message
    without ``usage`` (a proxy or gateway that drops it; the SDK builds such a body without
    complaint) still cost its tokens, and counting 0 would hide them from the run's figures.
    The estimate is the dry run's for the request and 4 characters a token of the answer.
    A count the request cannot have cost is no count either (audit 49c: 10**30 reached the
    receipt): input over the request's UTF-8 bytes (a token is at least a byte) and the
    tool prompt the API adds, output over its ``max_tokens`` (the API stops there)."""
    usage = getattr(msg, "usage", None)
    tin, tout = _tokens(usage, "input_tokens"), _tokens(usage, "output_tokens")
    sent = len(json.dumps(request, ensure_ascii=False).encode()) + _API_PROMPT_TOKENS
    tin = tin if tin is not None and 0 < tin <= sent else None  # every request has input
    tout = tout if tout is not None and tout <= request["max_tokens"] else None
    if tin is not None and tout is not None:
        return tin, tout, 0
    blocks = msg.content if isinstance(msg.content, list) else []
    chars = sum(len(json.dumps(getattr(b, "input", None) or getattr(b, "text", "") or "",
                               default=str)) for b in blocks)  # fmt: skip
    written = min(-(-chars // CHARS_PER_TOKEN), request["max_tokens"])
    if tin is None:  # no usage that reads: neither figure is trusted (0 and 0 from a proxy)
        return estimate_input_tokens(group), max(tout or 0, written), 1
    return tin, written, 1


def _probe_usage(msg: object, request: dict[str, Any]) -> tuple[int, int]:
    """The probe's figures within what its ping can cost, as ``_usage``'s (audit 49m1: its
    10**30 input tokens reached the receipt): an input past that counts as the ping's
    UTF-8 bytes, an output as at most its ``max_tokens``."""
    usage = getattr(msg, "usage", None)
    tin, tout = _tokens(usage, "input_tokens"), _tokens(usage, "output_tokens")
    sent = len(json.dumps(request, ensure_ascii=False).encode())
    tin = tin if tin is not None and tin <= sent + _API_PROMPT_TOKENS else sent
    return tin, min(tout or 0, request["max_tokens"])


# room for what the API adds to a request's input (its tool-use system prompt: about 350)
_API_PROMPT_TOKENS = 4096


def _tokens(usage: object, name: str) -> int | None:
    """A token count the SDK passed unchecked (NaN, a string, -7000 from a proxy): an int
    of 0 or more, else None, read as missing (then estimated)."""
    n = getattr(usage, name, None)
    return n if type(n) is int and n >= 0 else None


def _is_message(msg: object) -> bool:
    """What the Messages API sends: a message with a stop reason and a list of blocks.
    The SDK builds one from a body of any field types: a list as stop reason or a number
    as model raised out of the run (every night, with the same proxy)."""
    return (
        isinstance(msg, anthropic.types.Message)
        and getattr(msg, "type", None) == "message"
        and isinstance(getattr(msg, "stop_reason", None), str)
        and isinstance(getattr(msg, "model", None), str | None)
        and isinstance(getattr(msg, "content", None), list)
    )


_STOP_REASONS = frozenset({"end_turn", "stop_sequence", "pause_turn", "refusal"})
_FIELDS = frozenset(ConsolidationOutput.model_fields)


def _place(part: int | str) -> str:
    return str(part) if isinstance(part, int) or part in _FIELDS else "<key>"


def _parse(msg: anthropic.types.Message) -> ConsolidationOutput:
    if msg.stop_reason == "max_tokens":
        raise ConsolidationError(SCHEMA_INVALID, "answer truncated at max_tokens")
    if msg.stop_reason != "tool_use":
        # a forced tool call ends in tool_use; anything else (a refusal with a tool call
        # attached, end_turn, pause_turn) is not an answer to take
        # named only when it is one the API documents: a proxy may send any text here
        said = msg.stop_reason if msg.stop_reason in _STOP_REASONS else "<other>"
        raise ConsolidationError(SCHEMA_INVALID, f"stop_reason {said}, want tool_use")
    blocks = msg.content if isinstance(msg.content, list) else []
    calls = [
        b
        for b in blocks
        if getattr(b, "type", None) == "tool_use" and getattr(b, "name", None) == TOOL_NAME
    ]
    if len(calls) != 1:
        raise ConsolidationError(SCHEMA_INVALID, f"{len(calls)} {TOOL_NAME} calls, want 1")
    try:
        return ConsolidationOutput.model_validate(getattr(calls[0], "input", None))
    except ValidationError as exc:
        # Field locations only: the message must not carry memory content. A key the
        # schema does not know is the model's text: named by its place, "<key>"
        where = sorted({".".join(map(_place, e["loc"])) or "<input>" for e in exc.errors()})
        raise ConsolidationError(SCHEMA_INVALID, f"invalid fields: {', '.join(where)}") from None
