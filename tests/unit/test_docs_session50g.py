"""Audit 50g (session 50: README and docs/ followed as a newcomer, from a fresh clone).

1. README, "As a library": "A bad argument is an `InputError` naming it, never quoting it"
   (commit ac44594: "a 10 MB argument must not become a 10 MB message"). `source`,
   `memory_type`, `confidence`, `k`, `threshold` and compact's `budget_tokens` /
   `keep_last_turns` quoted the whole value back: a 10 MB string made a 10 MB message. An
   int past Python's 4,300-digit `repr` limit raised a bare ValueError from the message
   itself instead of the InputError naming the argument.
2. README, "The record contract": "Records go in and out one JSON object per line. The
   fields are listed in [the design](#design-in-one-page)": that section lists modules, and
   README named neither `source`, `status`, `access_count` nor any `provenance` field, so a
   newcomer could not write an import file from it. README now shows a whole record; the
   test imports that line as README gives it.
3. `--help` against the docs: `remember --source/--type/--owner/--namespace`, `recall
   --namespace`, `chat --namespace`, `run --no-consolidate`, `eval init --now/--force`,
   `ledger ingest-cloudtrail --force`, `-n`, `-y`, `-o` were in no doc (nor were the options
   audit 47c left for their `--help`). A guard keeps every option named beside its command.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memlife.errors import InputError
from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
BIG = "x" * 1_000_000  # a runaway argument: a document pasted where a label was meant


@pytest.fixture(name="memory")
def _memory(tmp_path: Path) -> Iterator[Any]:
    from memlife import Memory

    with Memory(f"sqlite:///{tmp_path / 'm.db'}", ledger=tmp_path / "ledger") as m:
        yield m


# -- 1. a bad argument is named, never quoted back whole ------------------------------------


def _refusal(call: Callable[[], object]) -> str:
    with pytest.raises(InputError) as exc:
        call()
    return str(exc.value)


RUNAWAY: dict[str, Callable[[Any], object]] = {
    "source": lambda m: m.remember("Likes tea.", actor="u1", source=BIG),
    "memory_type": lambda m: m.remember("Likes tea.", actor="u1", memory_type=BIG),
    "confidence": lambda m: m.remember("Likes tea.", actor="u1", confidence=BIG),
    "k": lambda m: m.recall("tea", actor="u1", k=BIG),
    "threshold": lambda m: m.recall("tea", actor="u1", threshold=BIG),
    "budget_tokens": lambda m: m.compact([], budget_tokens=BIG),
    "keep_last_turns": lambda m: m.compact([], budget_tokens=100, keep_last_turns=BIG),
}


@pytest.mark.parametrize("name", sorted(RUNAWAY))
def test_a_runaway_argument_is_named_not_quoted_back(memory: Any, name: str) -> None:
    message = _refusal(lambda: RUNAWAY[name](memory))
    assert name in message
    assert len(message) < 300, f"{name}: the refusal quotes the argument: {len(message)} chars"


HUGE = 10**5000  # past Python's 4,300 digits: repr() of it raises ValueError


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.remember("Likes tea.", actor="u1", confidence=HUGE),
        lambda m: m.recall("tea", actor="u1", threshold=HUGE),
        lambda m: m.compact([], budget_tokens=100, keep_last_turns=-HUGE),
    ],
    ids=["confidence", "threshold", "keep_last_turns"],
)
def test_a_huge_number_is_an_input_error_naming_the_argument(
    memory: Any, call: Callable[[Any], object]
) -> None:
    assert _refusal(lambda: call(memory))  # InputError, not the int's own ValueError


def test_a_short_mistyped_value_is_still_shown_with_what_is_allowed(memory: Any) -> None:
    """Control: a typo stays easy to see (the value and the allowed values)."""
    message = _refusal(lambda: memory.remember("Likes tea.", actor="u1", memory_type="semantik"))
    assert "'semantik'" in message and "semantic" in message
    assert "2.0" in _refusal(lambda: memory.remember("Likes tea.", actor="u1", confidence=2.0))
    assert memory.recall("tea", actor="u1") == []  # nothing was written by the refusals


# -- 2. README shows the record it says goes in and out ---------------------------------------


def _record_contract_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("### The record contract", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    return blocks[0].strip() if blocks else ""


def test_readmes_record_contract_shows_every_field_and_imports_as_given(
    home: Path, tmp_path: Path
) -> None:
    from memlife.model import MemoryRecord, Provenance

    line = _record_contract_example()
    assert line, "README's record contract shows no record"
    shown = json.loads(line)
    assert set(shown) == set(MemoryRecord.model_fields)
    assert set(shown["provenance"]) == set(Provenance.model_fields)
    path = tmp_path / "one.jsonl"
    path.write_text(line + "\n")
    code, out, err = invoke("import", str(path), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["imported"], report["invalid"], report["warnings"]) == (1, [], [])


# -- 3. every option of every command is named beside its command in the docs -----------------


def _commands() -> Iterator[tuple[str, list[list[str]]]]:
    """("receipts verify", [names of each option]) for every command the CLI runs."""
    from memlife.cli import COMMANDS, load_command

    def walk(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[str, list[list[str]]]]:
        subs = getattr(cmd, "commands", None) or {}
        opts = [[*p.opts, *p.secondary_opts] for p in cmd.params if p.param_type_name == "option"]
        if opts and (not subs or any(p.param_type_name == "option" for p in cmd.params)):
            yield " ".join(path), opts
        for name, sub in subs.items():
            yield from walk(sub, (*path, name))

    for name in COMMANDS:
        yield from walk(load_command(name), (name,))


# options every command that has them shares, documented once (README "Settings", "Exit codes")
SHARED = {"--help", "--json", "--store", "--receipts", "--policy"}


def test_every_option_is_named_beside_its_command_in_the_docs() -> None:
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    paragraphs = [
        block
        for path in docs
        if path.name != "adversarial-review.md"  # findings, not documentation
        for block in re.split(r"\n\s*\n", path.read_text())
    ]
    missing = []
    for command, options in _commands():
        for names in options:
            if SHARED & set(names):
                continue
            said = [re.compile(re.escape(n) + r"(?![\w-])") for n in names]
            if not any(command in b and any(p.search(b) for p in said) for b in paragraphs):
                missing.append(f"{command} {'/'.join(names)}")
    assert missing == []


# -- 4. the codes `import --update` skips a line with are named in README ----------------------


def _line(rid: str, namespace: str, content: str) -> str:
    return json.dumps({"id": rid, "actor_id": "u1", "namespace": namespace, "content": content,
                       "memory_type": "semantic", "created_at": "2026-01-02T10:00:00Z"})  # fmt: skip


def test_the_codes_an_update_skips_lines_with_are_in_readme(home: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    first.write_text(_line("m-1", "/users/u1/facts", "Likes tea.") + "\n"
                     + _line("m-2", "/users/u1/facts", "Likes jazz.") + "\n")  # fmt: skip
    assert invoke("import", str(first))[0] == 0
    assert invoke("hold", "place", "--id", "m-1")[0] == 0
    update = tmp_path / "update.jsonl"
    update.write_text(_line("m-1", "/users/u1/facts", "Likes coffee.") + "\n"
                      + _line("m-2", "/users/u1/other", "Likes jazz.") + "\n")  # fmt: skip
    code, out, _ = invoke("import", str(update), "--update", "--json")
    assert code == 1
    codes = {c["code"] for c in json.loads(out)["conflicts"]}
    assert codes == {"HELD", "NAMESPACE_MISMATCH"}
    section = (REPO / "README.md").read_text().split("### The record contract", 1)[1]
    assert [c for c in sorted(codes) if f"`{c}`" not in section] == []
