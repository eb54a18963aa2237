"""Words a paraphrase may not swap: kin, feelings, colours, compass points.

A summary that says "her brother" where its source says "her sister", "hates" for
"loves", "dad" for "mom" or "west" for "east" reads as the same sentence to MiniLM
(cosine 0.88 to 0.95) and names no number, date or name the specifics check would miss:
the grounding check let it through (docs/adversarial-review.md, session 24 review). Each
word here has a *value*; a statement may only use values some source uses. Spellings of
one value count as one ("mom", "mum", "mother"; "grandma", "grandmother"), and a feeling
is only its sign ("adores" for "loves" is a paraphrase, "dislikes" for "likes" is not;
"like" itself is left out: "looks like", "felt like" are no feeling; "likes" and "liked"
are in).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memlife.consolidate.lookalikes import lookalikes

_VALUES: dict[str, tuple[str, ...]] = {
    "kin:mother": ("mother", "mom", "mum", "mommy", "mummy", "mama", "mamma"),
    "kin:father": ("father", "dad", "daddy", "papa"),
    "kin:sister": ("sister",), "kin:brother": ("brother",),
    "kin:son": ("son",), "kin:daughter": ("daughter",),
    "kin:aunt": ("aunt", "auntie"), "kin:uncle": ("uncle",),
    "kin:niece": ("niece",), "kin:nephew": ("nephew",),
    "kin:grandmother": ("grandmother", "grandma", "granny", "nana"),
    "kin:grandfather": ("grandfather", "grandpa", "granddad", "grandad"),
    "kin:grandson": ("grandson",), "kin:granddaughter": ("granddaughter",),
    "kin:girlfriend": ("girlfriend",), "kin:boyfriend": ("boyfriend",),
    "kin:stepmother": ("stepmother", "stepmom", "stepmum"),
    "kin:stepfather": ("stepfather", "stepdad"),
    "kin:stepson": ("stepson",), "kin:stepdaughter": ("stepdaughter",),
    "kin:stepsister": ("stepsister",), "kin:stepbrother": ("stepbrother",),
    "kin:wife": ("wife", "wives"), "kin:husband": ("husband",),
    "feeling:+": ("love", "loves", "loved", "loving", "adore", "adores", "adored", "adoring",
                  "enjoy", "enjoys", "enjoyed", "enjoying", "likes", "liked"),
    "feeling:-": ("hate", "hates", "hated", "hating", "hatred", "dislike", "dislikes",
                  "disliked", "disliking", "detest", "detests", "detested", "detesting",
                  "loathe", "loathes", "loathed", "loathing", "despise", "despises",
                  "despised", "despising"),
    **{f"colour:{c}": (c,) for c in
       "red blue green yellow black white purple pink orange brown violet".split()},
    "colour:grey": ("grey", "gray"),
    **{f"compass:{d}": (d, d + "ern") for d in ("north", "south", "east", "west", "northeast",
                                                "northwest", "southeast", "southwest")},
}  # fmt: skip
# every spelling, and its plural, -> its value. Words as written, not stems: Snowball
# reads "lovely" as "love" and "western" as "western" ("a lovely dog" is no feeling)
_BY_WORD: dict[str, str] = {
    form: value
    for value, words in _VALUES.items()
    for w in words
    for form in (w, w + "s", w[:-1] + "ies" if w.endswith("y") else w)  # "grannies"
}
_WORD = re.compile(r"[a-z]+")
# a compound written apart is the compound: "step-mom" is a stepmother, not a mother;
# "north east" one direction, not two. "step"/"grand" only with a hyphen: "the next step
# mom suggested" is no stepmother (a source's spaced "step mom" counts both ways, below)
_APART = re.compile(r"\b(?:step|grand)-[a-z]+|\b(?:north|south)[\s-]+[a-z]+")
_SPACED = re.compile(r"\b(?:step|grand)\s+[a-z]+")
# a source's "I like tea" grounds a summary's "likes tea" (a summary's "like" is no
# feeling, nor a source's "looks like", "feels like")
_LIKING = re.compile(r"\b(?:i|we|you|they)\s+(?:really\s+|also\s+|still\s+|do\s+)?like\b")
SWAPPED = "kin, feeling, colour or compass word, or lookalike"  # what a refusal names


def swap_values(text: str) -> set[str]:
    """The values of the swap words ``text`` uses ("My mum loves red": kin:mother,
    feeling:+, colour:red)."""
    joined = _APART.sub(_joined, text.lower())
    return {v for w in _WORD.findall(joined) if (v := _BY_WORD.get(w)) is not None}


def _joined(m: re.Match[str]) -> str:
    word = re.sub(r"[\s-]+", "", m[0])
    return word if word in _BY_WORD else m[0]


def _source_values(text: str) -> set[str]:
    """What a source grounds: its values, a spaced compound's too, a first person's like."""
    low = text.lower()
    spaced = {_BY_WORD.get(_joined(m)) for m in _SPACED.finditer(low)}
    liking = {"feeling:+"} if _LIKING.search(low) else set()
    return swap_values(text) | liking | {v for v in spaced if v is not None}


def unsupported(claim: str, sources: Iterable[str]) -> set[str]:
    """The claim's swap values that no source uses, and its lookalike words
    (memlife/consolidate/lookalikes.py: "psychologist" where a source says "psychiatrist")."""
    sources = list(sources)
    used = swap_values(claim)
    for text in sources:
        used -= _source_values(text)
    return used | {f"lookalike:{w}" for w in lookalikes(claim, sources, skip=_BY_WORD)}
