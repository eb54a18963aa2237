"""What Snowball cut off a word beyond its inflection (audit 50l).

`memlife/restate.py` folds inflection with the Snowball stemmer, which also folds
derivation: "experience" and "experiment" are both "experi", "classic" and "classical" both
"classic", "custom" and "customer" both "custom". Through `remember` (cosine 0.93 and 0.90,
no other word apart) "Nate shared his experiment with vegan desserts." refreshed "... his
experience ...", and "listens to classical music" refreshed "classic music": the second fact
was never stored, and a night merged such records the same way.

``derivation`` gives the part of a word past the longest prefix it shares with its stem,
with its inflection taken off (-s, -es, -ed, -ing, -ly, a final e or y, a doubled
consonant): "" for "likes", "studies", "running", "gaming"; "ment" for "experiments",
"al" for "classical". Words with one stem and another derivation are other words: a
missed merge ("electric car" / "electrical car") rather than a lost fact.
"""

from __future__ import annotations

# inflectional endings, taken off the end of what is left, longest first, repeatedly
_INFLECTIONS = ("ing", "ed", "es", "ly", "s", "d", "e", "y")


def derivation(word: str, stem: str) -> str:
    """The derivational ending of ``word`` beyond its Snowball ``stem`` ("" when the word
    is the stem inflected)."""
    n = 0
    for a, b in zip(word, stem, strict=False):
        if a != b:
            break
        n += 1
    rest = word[n:]
    for _ in range(4):  # at most a few endings ("-ings", "-edly")
        cut = next((s for s in _INFLECTIONS if rest.endswith(s)), None)
        if cut is None:
            break
        rest = rest[: -len(cut)]
    if len(rest) == 1 and n and rest == word[n - 1]:  # "running", "planned": doubled
        rest = ""
    return rest
