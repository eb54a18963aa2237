"""`memlife remember` / `recall` / `chat` end to end, with a temporary store and home."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.ledger import AccessLedger
from memlife.model import Status
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, text_reply, tool_use_reply

TEA = "I only drink green tea, never coffee."
runner = CliRunner()


@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


def cli(*args: str, input: str | None = None) -> str:
    result = runner.invoke(app, list(args), input=input)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_remember_then_recall_json(home: Path) -> None:
    created = json.loads(cli("remember", "--actor", "u1", TEA, "--json"))
    cli("remember", "--actor", "u1", "My dog is called Rex.")
    cli("remember", "--actor", "u2", "I drink coffee every morning.")
    hits = json.loads(cli("recall", "--actor", "u1", "What do I usually drink?", "--json"))
    assert hits[0]["id"] == created["id"] and hits[0]["content"] == TEA
    assert hits[0]["namespace"] == "/users/u1/facts"
    assert set(hits[0]) >= {"id", "score", "content", "namespace"}
    assert all(h["content"] != "I drink coffee every morning." for h in hits)
    stats = AccessLedger(home / "ledger").access_stats(actor_id="u1")
    assert created["id"] in stats  # the recall was ledgered under MEMLIFE_HOME


def test_remember_twice_keeps_one_active(home: Path) -> None:
    a = json.loads(cli("remember", "--actor", "u1", TEA, "--json"))
    b = json.loads(
        cli("remember", "--actor", "u1", "I drink only green tea, never any coffee.", "--json")
    )
    assert a["created"] and not b["created"] and b["refreshed_duplicate_of"] == a["id"]
    with SqliteStore(home / "memlife.db") as store:
        assert len(store.page("u1", "/users/u1/facts", statuses=[Status.active]).records) == 1


def test_recall_k_namespace_and_empty(home: Path) -> None:
    cli(
        "remember",
        "--actor",
        "u1",
        "--namespace",
        "/users/u1/work",
        "--subject",
        "office",
        "I work in Porto.",
    )
    cli("remember", "--actor", "u1", TEA)
    work = json.loads(
        cli(
            "recall", "--actor", "u1", "Where do I work?", "--namespace", "/users/u1/work", "--json"
        )
    )
    assert [h["content"] for h in work] == ["I work in Porto."] and work[0]["subject"] == "office"
    assert (
        len(
            json.loads(
                cli(
                    "recall",
                    "--actor",
                    "u1",
                    "drink tea work",
                    "--k",
                    "1",
                    "--threshold",
                    "-1",
                    "--json",
                )
            )
        )
        == 1
    )
    assert json.loads(cli("recall", "--actor", "nobody", "anything", "--json")) == []
    assert "I work in Porto." in cli("recall", "--actor", "u1", "Where do I work?")


def test_blank_fact_fails(home: Path) -> None:
    assert runner.invoke(app, ["remember", "--actor", "u1", "  "]).exit_code == 2


def test_chat_offline_against_base_url(
    home: Path, messages_server: MessagesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    messages_server.enqueue(
        tool_use_reply("remember", {"fact": TEA}), text_reply("Noted."), text_reply("Green tea.")
    )
    out = cli(
        "chat", "--actor", "u1", input="I only drink green tea, never coffee.\n\nWhat do I drink?\n"
    )
    assert out.splitlines() == ["Noted.", "Green tea."]
    assert TEA in messages_server.last_body["system"]
    hits = json.loads(cli("recall", "--actor", "u1", "What do I usually drink?", "--json"))
    assert hits[0]["content"] == TEA
