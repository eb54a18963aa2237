"""Finding 5 (session 29): Memory.compact and AsyncMemory.compact take compact's keyword
options. Needs the api.py patch (api_compact.diff): fails before it with a TypeError."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from memlife import AsyncMemory, Memory
from memlife.errors import InputError

MSGS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.mark.parametrize(
    "options",
    [{"summary_allowance": -1}, {"summarizer_input_tokens": 0}, {"summarizer_input_tokens": 1.5}],
)
def test_compact_options_reach_compact(options: dict[str, object], tmp_path: Path) -> None:
    name = next(iter(options))
    with pytest.raises(InputError, match=name):  # compact's own check: the option got there
        Memory.compact(MSGS, budget_tokens=1000, **options)  # type: ignore[arg-type]

    async def run() -> None:
        async with AsyncMemory(f"sqlite:///{tmp_path / 'm.db'}", ledger=tmp_path / "l") as m:
            await m.compact(MSGS, budget_tokens=1000, **options)  # type: ignore[arg-type]

    with pytest.raises(InputError, match=name):
        asyncio.run(run())


def test_compact_accepts_good_options() -> None:
    out = Memory.compact(
        MSGS, budget_tokens=1000, summary_allowance=10, summarizer_input_tokens=500
    )
    assert out is not None
