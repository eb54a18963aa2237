"""The grounding check on LoCoMo's observations merged as a model merges them.

Pairs of consecutive observations of one speaker in one session (``--pairs`` of them, drawn
with a fixed seed) are each joined into one summary three ways a model writes a merge
("A, and b", "A, b", "A, b" without b's leading name), and each summary is checked against
its two sources: the share grounded is the share a correct merge keeps (the rest would go
to review). Then each pair's first observation is joined by a bare comma to an observation
of another pair (a fact neither source holds): the share refused is the share of invented
facts caught. Last, what a merge leaves out (the coverage check, since session 25): the
summary is the first source alone, or the merge without the second's last part (cut at its
last comma or bare "and"); the share refused is the share of dropped facts caught. With
``--before FILE`` (a grounding.py of an earlier commit, e.g.
``git show 0adfbc2:memlife/consolidate/grounding.py > /tmp/g.py``) both are measured for
that module too.

    uv run python bench/grounding_locomo.py ../shared/data/locomo10.json [--pairs 250] [--before FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

from memlife.consolidate import ConsolidationError, ConsolidationResult, Group
from memlife.consolidate import grounding as current
from memlife.embed import default_embedder
from memlife.model import MemoryRecord

THRESHOLD = 0.55  # policies/default.yaml grouping.grounding_cosine
T0 = datetime(2023, 5, 1, tzinfo=UTC)


def pairs_of(path: Path, n: int, seed: int = 20) -> list[tuple[str, str]]:
    out = []
    for raw in json.loads(path.read_text()):
        for session in raw["observation"].values():
            for items in session.values():
                texts = [text for text, _ in items]
                out += list(zip(texts, texts[1:], strict=False))
    random.Random(seed).shuffle(out)
    return out[:n]


def group(a: str, b: str) -> Group:
    recs = [
        MemoryRecord(id=f"s-{i}", actor_id="u", namespace="/users/u/facts", memory_type="semantic",
                     subject="x", content=c, created_at=T0 + timedelta(days=i))
        for i, c in enumerate([a, b])
    ]  # fmt: skip
    return Group("k", "u", "/users/u/facts", "x", recs)


def _lower(s: str) -> str:
    return s[:1].lower() + s[1:]


def _no_name(s: str) -> str:
    first, _, rest = s.partition(" ")
    return rest if first.istitle() and rest else s


STYLES: dict[str, Callable[[str, str], str]] = {
    "A, and b": lambda a, b: f"{a.rstrip('.')}, and {_lower(b)}",
    "A, b": lambda a, b: f"{a.rstrip('.')}, {_lower(b)}",
    "A, b without its name": lambda a, b: f"{a.rstrip('.')}, {_no_name(b)}",
}


def grounded(module: ModuleType, summary: str, g: Group) -> bool:
    result = ConsolidationResult(
        summary=summary, claims=[summary], confidence=0.9, source_ids=["s-0", "s-1"]
    )
    try:
        module.check_grounding(result, g, EMBEDDER, THRESHOLD)
    except ConsolidationError:
        return False
    return True


def measure(module: ModuleType, pairs: list[tuple[str, str]]) -> dict[str, float]:
    out = {}
    for name, merge in STYLES.items():
        out[f"merge {name}: grounded"] = sum(
            grounded(module, merge(a, b), group(a, b)) for a, b in pairs
        ) / len(pairs)
    aliens = [b for _, b in reversed(pairs)]
    invented = [(a, b, x) for (a, b), x in zip(pairs, aliens, strict=True) if x not in (a, b)]
    out["invented part joined by a comma: refused"] = sum(
        not grounded(module, f"{a.rstrip('.')}, {_no_name(x)}", group(a, b)) for a, b, x in invented
    ) / len(invented)
    # what a merge leaves out: the second source whole, or the last part of a listing one
    out["second source left out (the summary is the first): refused"] = sum(
        not grounded(module, a, group(a, b)) for a, b in pairs if a != b
    ) / len(pairs)
    cut = [(a, b, _without_last_part(b)) for a, b in pairs]
    cut = [(a, b, c) for a, b, c in cut if c is not None]
    out[f"last part of the second left out ({len(cut)} pairs): refused"] = sum(
        not grounded(module, f"{a.rstrip('.')}, and {_lower(c)}", group(a, b)) for a, b, c in cut
    ) / max(len(cut), 1)
    return out


_LAST_PART = re.compile(r"(,\s+|\s+and\s+)(?!.*(,\s+|\s+and\s+))")


def _without_last_part(text: str) -> str | None:
    """``text`` up to its last comma or bare "and" ("likes tea, coffee and cake" -> "likes
    tea, coffee."), when what is cut holds a word of its own."""
    m = _LAST_PART.search(text)
    if m is None or len(text[m.end() :].split()) < 1 or m.start() < 12:
        return None
    return text[: m.start()].rstrip(" ,") + "."


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("grounding_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EMBEDDER = default_embedder()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--pairs", type=int, default=250)
    ap.add_argument("--before", type=Path, help="an earlier grounding.py to compare with")
    args = ap.parse_args()
    pairs = pairs_of(args.data, args.pairs)
    rows = {"now": measure(current, pairs)}
    if args.before:
        rows = {"before": measure(load(args.before), pairs)} | rows
    print(f"{len(pairs)} pairs of LoCoMo observations, threshold {THRESHOLD}")
    for measure_name in rows["now"]:
        figures = ", ".join(f"{k} {v[measure_name]:.3f}" for k, v in rows.items())
        print(f"  {measure_name}: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
