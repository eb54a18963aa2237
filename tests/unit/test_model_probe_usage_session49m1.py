"""Audit 49m1 (mutation pass over session 49): the probe's token figures.

Audit 49c bounded the figures of a consolidation answer (``anthropic._usage``): an input
count over what the request can have cost, or an output count over its ``max_tokens``, is
estimated, not taken. The outage probe (one ``ping``, ``max_tokens`` 1, no tools) still
took its answer's ``usage`` as given, and ``apply/unavailable._probe_answered`` adds it to
the night's model figures: a hostile or broken endpoint answering the probe with
``input_tokens`` 10**30 put 10**30 into the run receipt (write-once evidence), the same
figure 49c kept out of a group's answer.

Real SDK against the local Messages API fake, real MiniLM, real SQLite store and pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.anthropic import AnthropicConsolidator
from tests.fakes.messages_api import MessagesServer, Reply, text_reply
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    _run,
    _seed,
    rec,
    run_env,
)
from tests.unit.test_model_unavailable_alone import BLOCKED, _answers_all_but_tea


def _probe_answered_with(usage: dict[str, int]) -> Any:
    def handler(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] == "ping":  # the probe: the service is up
            return text_reply("pong", **usage)
        return _answers_all_but_tea(body)

    return handler


def _probe(server: MessagesServer, usage: dict[str, int]) -> tuple[int, int]:
    server.set_handler(_probe_answered_with(usage))
    c = AnthropicConsolidator(model="claude-haiku-4-5", max_tokens=512, base_url=server.base_url,
                              api_key="sk-ant-fake", embedder=object(), timeout=5.0)  # fmt: skip
    found = c.probe()
    assert found.answered
    assert (c.usage.input_tokens, c.usage.output_tokens) == (
        found.input_tokens,
        found.output_tokens,
    )
    return found.input_tokens, found.output_tokens


@pytest.mark.parametrize(
    "usage",
    [{"input_tokens": 10**30, "output_tokens": 1}, {"input_tokens": 8, "output_tokens": 10**12}],
    ids=["input-10e30", "output-over-max-tokens"],
)
def test_a_probe_answer_claiming_a_cost_no_ping_had_is_not_counted(
    messages_server: MessagesServer, usage: dict[str, int]
) -> None:
    """A ``ping`` of max_tokens 1 costs a few input tokens (plus what the API adds) and at
    most one output token: a figure past that is no count."""
    tin, tout = _probe(messages_server, usage)
    assert 0 <= tin <= 4096 + 100 and 0 <= tout <= 1


def test_control_a_probe_answer_of_a_plausible_cost_is_counted_as_given(
    messages_server: MessagesServer,
) -> None:
    assert _probe(messages_server, {"input_tokens": 8, "output_tokens": 1}) == (8, 1)


def test_the_receipt_never_claims_a_probe_cost_no_request_had(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server: MessagesServer,
) -> None:
    """The tea group, alone in its run, fails; the probe that tells its failure from an
    outage is answered with 10**30 input tokens. The receipt's model figures stay within
    what the night's two requests can have cost."""
    _seed(run_env, [rec("t-1", f"I drink {BLOCKED} every evening.", 1, subject="tea"),
                    rec("t-2", f"Every evening I drink {BLOCKED}.", 3, subject="tea")])  # fmt: skip
    messages_server.set_handler(_probe_answered_with({"input_tokens": 10**30, "output_tokens": 1}))
    receipt = _run(NIGHT)
    assert receipt["other_counts"].get("model_probes") == 1
    assert 0 < receipt["model"]["input_tokens"] < 100_000
