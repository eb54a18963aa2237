# ruff: noqa
"""Round 29, idea A: memory-side clause splitting, held out on the replica.

A compound observation ("Dave opened his own car shop last week and celebrated with
friends") is averaged into one sentence vector; a question about one half ("When did Dave
open his car shop?") meets the other half too. Each memory is cut into clauses (rule fixed
before the run, ``clauses``), each clause embedded with the shipped model (at write time
online: one more embedding call per clause), and:

- *replace*: the cosine term becomes max(whole, best clause) (no new weight);
- *add*: the best clause's cosine (the whole's for a memory of one clause) as a term with
  its own weight, grid (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0), chosen per training fold.

Decision rule (fixed before the run): implement only if held-out recall@5 >= 0.85 and the
paired difference with the headline wins more questions than it loses.

    PYTHONPATH=$PWD .venv/bin/python bench/recall_round29/clauses.py [turns]

``turns`` (raw turns as memories): each turn cut into sentences, then at the same clause
boundaries (``turn_pieces``), every piece carrying the speaker's prefix; fixed before the
turns run, after the observations run.
"""

import re, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import common
import locomo_replica as rep
import recall_bootstrap as bootstrap
import recall_locomo as bench

PRONOUN = {"he", "she", "they", "it", "we", "i", "his", "her", "their"}
HARD = re.compile(r";\s*|,\s+(?=(?:and|but|while|because|which|so)\s)|\s+(?=(?:because|while)\s)")


def clauses(text: str) -> list[str]:
    """The memory's clauses (at least 3 words each), the subject prefixed where missing."""
    parts: list[str] = []
    for chunk in HARD.split(text):
        words = chunk.split()
        cur: list[str] = []
        for i, w in enumerate(words):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            cur.append(w)
            if (
                nxt == "and"
                and i + 2 < len(words)
                and (
                    words[i + 2].lower() in PRONOUN
                    or (words[i + 2].islower() and re.fullmatch(r"[a-z]+(?:ed|s)", words[i + 2]))
                )
            ):
                parts.append(" ".join(cur))
                cur = []
        if cur:
            parts.append(" ".join(cur))
    out: list[str] = []
    keep: set[int] = set()  # a "which" clause keeps no subject: it is about the clause before
    for p in parts:
        which = p.strip(" ,.;").startswith("which ")
        p = re.sub(r"^(?:and|but|so|which|while|because)\s+", "", p.strip(" ,.;"))
        if out and len(p.split()) < 3:
            out[-1] = out[-1] + " " + p
        elif p:
            if which:
                keep.add(len(out))
            out.append(p)
    if len(out) <= 1:
        return [text]
    subject = re.sub(r"'s$", "", text.split()[0])
    return [
        p if i in keep or p.startswith(subject) else f"{subject} {p}" for i, p in enumerate(out)
    ]


SPEAKER = re.compile(r"^([A-Z][^:\n]{0,39}):\s*")
SENTENCE = re.compile(r"(?<=[.!?])\s+")


def turn_pieces(text: str) -> list[str]:
    """A raw turn ("Speaker: text"): its sentences, each cut by ``clauses``'s boundaries,
    each piece of 3 words or more prefixed with the speaker (rule fixed before the run)."""
    m = SPEAKER.match(text)
    head, body = (m.group(0), text[m.end() :]) if m else ("", text)
    out: list[str] = []
    for sentence in SENTENCE.split(body):
        for part in HARD.split(sentence):
            part = re.sub(r"^(?:and|but|so|which|while|because)\s+", "", part.strip(" ,;"))
            if out and len(part.split()) < 3:
                out[-1] = out[-1] + " " + part
            elif part:
                out.append(part)
    if len(out) <= 1:
        return [text]
    return [head + p for p in out]


def main() -> int:
    granularity = sys.argv[1] if len(sys.argv) > 1 else "observations"
    split = turn_pieces if granularity == "turns" else clauses
    cache, convs, preps = common.load(granularity)
    grid = dict(bench.GRID)
    best = []
    n_split = n_cl = 0
    for p in preps:
        c = p.conv
        cl = [split(t) for t in c.texts]
        n_split += sum(len(x) > 1 for x in cl)
        n_cl += sum(len(x) for x in cl if len(x) > 1)
        flat = [s for x in cl for s in x]
        owner = np.repeat(np.arange(len(cl)), [len(x) for x in cl])
        v = cache.embed(flat)
        sims = c.qvecs @ v.T  # Q x C
        b = np.full((len(c.queries), len(cl)), -np.inf, np.float32)
        np.maximum.at(b.T, owner, sims.T)
        best.append(b.astype(np.float32))
    cache.save()
    print(
        f"memories cut: {n_split} of {sum(len(p.conv.texts) for p in preps)}, into {n_cl} clauses"
    )
    for t in preps[0].conv.texts[:40]:
        if len(split(t)) > 1:
            print("  ", t, "->", split(t))

    def replace():
        saved = [p.cos for p in preps]
        try:
            for p, b in zip(preps, best):
                p.cos = np.maximum(p.cos, b)
            return rep.held_out(preps, grid)
        finally:
            for p, s in zip(preps, saved):
                p.cos = s

    runs = [
        ("shipped terms (headline)", lambda: rep.held_out(preps, grid)),
        ("clauses: cosine = max(whole, best clause)", replace),
        (
            "clauses: best clause's cosine, added",
            lambda: rep.held_out_with(
                preps, grid, "clause", lambda i, c: best[i], (0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
            ),
        ),
    ]
    bootstrap.print_rows(
        runs, f"held out, {granularity}", bench.KS, width=46, weights_label="weights per fold"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
