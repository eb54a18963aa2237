"""Memories that read as instructions to the summariser, not as statements: they ground
nothing (consolidate/grounding.py leaves them out of the evidence a summary rests on).

Patterns, fixed words and bounded gaps only, over text read in NFKC with in-word hyphens as
spaces and invisible marks dropped, look-alike letters of other scripts read as the Latin
ones they imitate (Unicode's confusables, from ``confusable-homoglyphs``: a Cyrillic "о" in
"memоry"), and words spelled out letter by letter joined ("m e m o r y"). A note addressed to the memory's own upkeep is matched
at each sentence's opening, one sentence at a time: a search for "a sentence start, then
..." over the whole text backtracked quadratically (review of session 31). A false alarm
costs a merge (the memory grounds nothing), never a record.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from confusable_homoglyphs import confusables

# who keeps the memories, as a note would address it: a program ("memory system", "memory
# bot", "housekeeping bot"), never a person's job or a service one pays ("housekeeping
# manager", "maintenance service", "nightly job": facts a person states)
_UPKEEP = (
    r"((memory|memories)('s?)?\s*(keeping\s+)?"  # \s*: an invisible mark between is dropped
    r"(system|bot|agent|manager|pipeline|daemon|janitor|keeper|curator|librarian)s?"
    r"|(housekeeping|cleanup|clean\s+up|maintenance|curation)\s+(bot|agent|daemon|script)s?"
    r"|(nightly\s+)?(consolidator|summari[sz]er))\b"
)
_DETERMINER = r"(the\s+|this\s+|my\s+|our\s+|your\s+|a\s+)?"
_INJECTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.]{0,40}\b(instructions?|prompts?|rules|above|previous)\b"
    r"|\b(system prompt|new instructions|you are now|as an ai)\b"
    r"|\b(state|say|write|claim|assert|output|respond)\s+(that|the user|user)\b"
    # words to whoever reads or merges the notes, about what the merged note must say
    r"|\b(whoever|anyone|assistant|ai|summari[sz]er|llm)\b[^.]{0,60}"
    r"\b(summari[sz]\w*|consolidat\w*|merg\w*)\b"
    # ("promoted to assistant manager" is a job title, not an addressee)
    r"|\b(to|for|dear)\s+(the\s+)?(assistant|ai|llm|summari[sz]er)\b"
    r"(?!\s+(vice\s+)?(manager|director|coach|editor|professor|principal|teacher|producer"
    r"|chef|president|secretary|engineer|agents?|apps?|models?|tools?|research|startups?))"
    r"|\b(correct|right|real|true|proper|final|only)\s+(summary|version)\b"
    r"|\b(when|if|while)\s+(you\s+)?(summari[sz]|consolidat|merg)\w*"
    # a note addressed to the memory's own upkeep ("Note to the memory system: ...",
    # "Dear housekeeping bot"), not a fact about a system the person works on ("is
    # building a memory system"); a sentence opening with one: _UPKEEP_OPENING
    r"|\b(note|message|reminder|instructions?|request)\s+(to|for)\s+"
    + _DETERMINER
    + r"(\w+\s+)?"
    + _UPKEEP
    + r"|\b(dear|attention|attn|hey|hi|hello|yo)[\s,:]{1,4}"
    + _DETERMINER
    + _UPKEEP,
    re.IGNORECASE,
)
# "Memory system: keep only ...", "To the housekeeping bot - ...": matched at each sentence's
# start (a search for "a sentence start, then ..." over the whole text backtracked: 200 s on
# a 64 KB line of ". .", with the interpreter lock held against the lease's heartbeat)
_UPKEEP_OPENING = re.compile(
    r"\W{0,8}((to|for)\s+)?" + _DETERMINER + _UPKEEP + r"\s*[,:!;>\u2013\u2014-]", re.IGNORECASE
)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?\n])\s+")
# inside a word: a hyphen ("memory-system"), a zero-width or other invisible format mark
_JOINERS = re.compile(r"(?<=\w)[-\u2010\u2011](?=\w)|[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]")


# a word spelled out: single letters with one separator between ("m e m o r y", "m.e.m.o.r.y");
# two spaces or more end the word. Linear: a letter is read once, a run never starts inside one.
_SPELLED = re.compile(r"(?<![^\W_])[^\W_](?:[ .*_\u00b7-][^\W_])+(?![^\W_])")
# an addressee of the upkeep inside a spelled run read without its word breaks
# ("m e m o r y s y s t e m" -> "memorysystem", "n o t e t o t h e m e m o r y b o t")
_UPKEEP_JOINED = re.compile(
    r"(memory|memories)(keeping)?(system|bot|agent|manager|pipeline|daemon|janitor|keeper"
    r"|curator|librarian)|(housekeeping|cleanup|maintenance|curation)(bot|agent|daemon|script)"
    r"|consolidator|summari[sz]er|ignore(all)?(previous|prior|the)|systemprompt",
    re.IGNORECASE,
)


def looks_like_instruction(text: str) -> bool:
    """Does a memory read like an instruction aimed at the model rather than a statement?
    Read in NFKC with hyphens inside words as spaces and invisible marks dropped (a
    "memory-system", or one with a zero-width space inside, is a memory system), letters of
    other scripts that imitate Latin ones read as those, and spelled-out words joined."""
    t = _JOINERS.sub(
        lambda m: " " if m.group() in "-\u2010\u2011" else "", unicodedata.normalize("NFKC", text)
    )
    if not t.isascii():
        t = t.translate(_as_latin(frozenset(c for c in t if not c.isascii())))
    spelled = [m.group() for m in _SPELLED.finditer(t)]
    if spelled:
        if any(_UPKEEP_JOINED.search(re.sub(r"[\W_]", "", run)) for run in spelled):
            return True
        t = _SPELLED.sub(lambda m: re.sub(r"[\W_]", "", m.group()), t)
    if _INJECTION.search(t) is not None:
        return True
    return any(_UPKEEP_OPENING.match(part) for part in _SENTENCE_BREAK.split(t))


@lru_cache(maxsize=4096)
def _as_latin(chars: frozenset[str]) -> dict[int, str]:
    """The Latin letter each of ``chars`` imitates, where Unicode's confusables name one
    (a single ASCII letter: "rn" for "m" is a look-alike of two letters, not a reading)."""
    table: dict[int, str] = {}
    for found in confusables.is_confusable("".join(sorted(chars)), greedy=True,
                                           preferred_aliases=["latin"]) or ():  # fmt: skip
        latin = [h["c"] for h in found["homoglyphs"] if len(h["c"]) == 1 and h["c"].isascii()]
        if latin and latin[0].isalpha():
            table[ord(found["character"])] = latin[0]
    return table
