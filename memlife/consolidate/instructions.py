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
from functools import cache

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
    r"(?!\.?\s+(vice\s+)?(manager|director|coach|editor|professor|principal|teacher|producer"
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
# a hyphen inside a word ("memory-system"); invisible marks go with accents (_as_latin)
_JOINERS = re.compile(r"(?<=\w)[-\u2010\u2011](?=\w)")


# a word spelled out: single letters with one separator between ("m e m o r y", "m.e.m.o.r.y",
# "N. o. t. e"); two spaces or more end the word ("It's a" is no run: an apostrophe joins).
# Linear: a letter is read once, a run never starts inside one.
_SPELLED = re.compile(
    r"(?<![^\W_]|['\u2019])[^\W_](?:(?:[.,/]?[ \t]|[.*_\u00b7,/\u2010-\u2015-])[^\W_])+(?![^\W_])"
)
# a spelled run read without its word breaks ("i g n o r e p r e v i o u s ..."): an
# injection anywhere in it, or an addressee of the upkeep ending it before a colon, comma,
# dash ("m e m o r y s y s t e m: keep only ..."); a word spelled at a spelling bee
# ("s u m m a r i z e r and she got it") is no address
_INJECTION_JOINED = re.compile(
    r"(ignore|disregard|forget|override)(all|the|any)*(previous|prior|above|earlier)"
    r"(instructions?|prompts?|rules)|systemprompt|newinstructions",
    re.IGNORECASE,
)
_UPKEEP_JOINED = re.compile(
    r"((memory|memories)(keeping)?(system|bot|agent|manager|pipeline|daemon|janitor|keeper"
    r"|curator|librarian)s?|(housekeeping|cleanup|maintenance|curation)(bot|agent|daemon|script)s?"
    r"|consolidator|summari[sz]er)$",
    re.IGNORECASE,
)
_ADDRESS_END = re.compile(r"[.\s]*[,:!;>\u2013\u2014-]")
_MARKS = frozenset(("Mn", "Me", "Cf"))  # accents, enclosing marks, invisible format marks
_NOT_LETTER = re.compile(r"[\W_]")
_WORD = re.compile(r"\w+")
_ASCII_LETTER = re.compile("[a-z]")


def looks_like_instruction(text: str) -> bool:
    """Does a memory read like an instruction aimed at the model rather than a statement?
    Read in NFKC with hyphens inside words as spaces and invisible marks dropped (a
    "memory-system", or one with a zero-width space inside, is a memory system), letters of
    other scripts that imitate Latin ones read as those, and spelled-out words joined."""
    t = _JOINERS.sub(" ", unicodedata.normalize("NFKC", text))
    if not t.isascii():
        t = _as_latin(t)
    for m in _SPELLED.finditer(t):
        joined = _NOT_LETTER.sub("", m.group())
        if _INJECTION_JOINED.search(joined) or (
            _UPKEEP_JOINED.search(joined) and _ADDRESS_END.match(t, m.end())
        ):
            return True
    t = _SPELLED.sub(lambda m: _NOT_LETTER.sub("", m.group()), t)
    if _INJECTION.search(t) is not None:
        return True
    return any(_UPKEEP_OPENING.match(part) for part in _SENTENCE_BREAK.split(t))


def _as_latin(text: str) -> str:
    """``text`` casefolded, its accents and invisible marks dropped, and letters of other
    scripts that imitate Latin ones read as those (Unicode's confusables). Text mostly in
    another script keeps its own words: only a word mixing in Latin letters is a disguise
    (Greek "Το AI" is no "To AI")."""
    t = "".join(
        c for c in unicodedata.normalize("NFKD", text.casefold())
        if unicodedata.category(c) not in _MARKS
    )  # fmt: skip
    table = _latin_table()
    latin = sum(1 for c in t if c.isascii() and c.isalpha())
    if 2 * latin >= sum(1 for c in t if c.isalpha()):
        return t.translate(table)
    return _WORD.sub(
        lambda m: m.group().translate(table) if _ASCII_LETTER.search(m.group()) else m.group(), t
    )


@cache
def _latin_table() -> dict[int, str]:
    """Each letter that Unicode's confusables (``confusable-homoglyphs``) read as one ASCII
    letter, mapped to it ("rn" for "m" is two letters, not a reading), and the Latin small
    capitals ("ᴍᴇᴍᴏʀʏ"), few of which that list names. Built once (~70 ms)."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[int, str] = {}
    for ch, found in confusables_data.items():
        if len(ch) != 1 or ch.isascii():
            continue
        letters = [h["c"] for h in found if len(h["c"]) == 1 and h["c"].isascii()]
        if letters and letters[0].isalpha():
            table[ord(ch)] = letters[0].lower()  # the text it reads is casefolded
    for cp in (*range(0x0250, 0x0300), *range(0x1D00, 0x1D80), *range(0xA720, 0xA800)):
        name = unicodedata.name(chr(cp), "")
        if name.startswith("LATIN LETTER SMALL CAPITAL ") and len(name) == 28:
            table[cp] = name[-1].lower()
    return table
