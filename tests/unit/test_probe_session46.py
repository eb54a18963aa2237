"""Session 46 (audit 46a): the one-token probe (session 45) that tells a group failing alone in its run
from an outage. Under Prefect every model call holds a slot of the global model-call
limit (flows/limits.LimitedConsolidator), so that all runs and workers together stay
under the account's rate. The probe is a model call too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.anthropic import AnthropicConsolidator
from tests.fakes.messages_api import Reply, error_reply, text_reply
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    _run,
    _seed,
    rec,
    run_env,
)
from tests.unit.test_model_unavailable_alone import _down


def test_the_probe_holds_a_slot_of_the_global_model_call_limit(
    messages_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversary is a fan-out of runs sharing one account: a probe sent through the
    flow's wrapped consolidator must hold a slot of the limit while it is on the wire, as
    each group's call does. The Prefect server's slot API is replaced by a recorder (the
    network boundary); the request goes to the local Messages API server."""
    from flows import limits

    held: list[str] = []
    on_wire: list[int] = []

    @contextmanager
    def concurrency(name: str, occupy: int = 1, strict: bool = False) -> Iterator[None]:
        held.append(name)
        yield
        on_wire.append(len(messages_server.message_requests))

    monkeypatch.setattr(limits, "concurrency", concurrency)
    inner = AnthropicConsolidator(base_url=messages_server.base_url, api_key="sk-ant-fake")
    wrapped = limits.limited(inner)
    messages_server.enqueue(text_reply("p", input_tokens=8, output_tokens=1))
    found = wrapped.probe()  # as apply/unavailable.py calls it on the run's consolidator
    assert found.answered and len(messages_server.message_requests) == 1
    assert held == [wrapped.limit] and on_wire == [1]


def test_a_probe_not_sent_on_a_misconfigured_run_is_not_counted(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server: Any,
) -> None:
    """The adversary fails the run's first request with a 529 (the coffee group: judged at
    the batch's end, nothing else answered) and every later one with a 401 (the key
    revoked mid-run: the tea group makes the run misconfigured). The probe is then not sent
    (a misconfigured consolidator sends nothing): the receipt must not count it as a model
    call, nor as a probe, and its calls must be the requests the service saw."""
    _seed(run_env, [rec("c-1", "I drink black coffee every morning.", 1),
                    rec("c-2", "Every morning I drink black coffee.", 3),
                    rec("t-1", "I drink green tea every evening.", 1, subject="tea"),
                    rec("t-2", "Every evening I drink green tea.", 3, subject="tea")])  # fmt: skip
    first = _down()

    def handler(_: dict[str, Any]) -> Reply:
        if not messages_server.message_requests[:-1]:  # the run's first request
            return first
        return error_reply(401, "authentication_error", "invalid x-api-key")

    messages_server.set_handler(handler)
    receipt = _run(NIGHT)
    sent = len(messages_server.message_requests)
    assert sent == 2 and receipt["other_counts"].get("consolidation_model_misconfigured") == 1
    assert receipt["model"]["calls"] == sent
    assert not receipt["other_counts"].get("model_probes")
