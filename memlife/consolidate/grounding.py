"""The grounding check: every claim of a replacement must trace to its source records.

A claim (the summary, each clause of it and each part joined by a bare comma count as
claims: the summary is what the replacement says, and a whole sentence can carry an
invented clause past the cosine; a part one source holds word for word needs no cosine) is
grounded when
  1. some source *unit* (a record's whole text, or one of its clauses) is semantically
     close: cosine >= threshold;
  2. at least one such close unit has the same polarity (memlife.text.negates).
     Cosine cannot tell "is allergic to peanuts" from "is not allergic to peanuts"
     (0.94), so polarity, not similarity, decides between duplicate and contradiction.
     Clauses are units so "switched to coffee; no longer drinks tea" can ground both
     "drinks coffee" and "no longer drinks tea";
  3. every number, date and proper noun in the claim occurs in some source's text:
     the failure mode of a summariser is a plausible invented detail, which cosine
     similarity happily lets through. A number keeps its sign, percent and currency
     ("-18", "5%", "$900"), a number written as a word ("two") and a month or weekday in
     any case are specifics too, and so is a capitalised word opening a sentence where it
     reads as a name ("Bob is allergic" where the sources say "Alice").
Before any of that, the result is bounded (OVERSIZED_RESULT: the embedder reads only the
first 256 tokens of a text, so an unbounded summary is only partly checked) and may carry
no control or invisible format character its sources lack (FOREIGN_CHARACTERS).
Records that read like instructions to a model never ground anything (memory tells no model).
A claim whose closest support is only records the planner found contradicted is rejected
too (CONTRADICTED_CLAIM): the newer statement must win. So is one resting only on an older
record that says what the group's newest says with other numbers ("allergic to 2
medications" beside a newer "3"): the older version is contradicted by the newer. Only an
update retires records (``outdated_ids``): a "duplicate" that names one is refused.

What a duplicate or update leaves out of the records it supersedes is the coverage
check's (memlife/consolidate/coverage.py): a dropped part, name, number, date or
qualifier, or an object swapped below the restatement cosine ("pollen" for "peanuts").
So is a kin, feeling, colour or compass word no source uses ("brother" for "sister",
"hates" for "loves": memlife/consolidate/swap_words.py), added or swapped, and a
lookalike ("psychologist" for "psychiatrist": memlife/consolidate/lookalikes.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

import numpy as np

from memlife.consolidate.base import ConsolidationError, ConsolidationResult, Group
from memlife.consolidate.coverage import check_coverage, retired
from memlife.consolidate.instructions import looks_like_instruction
from memlife.consolidate.swap_words import SWAPPED, unsupported
from memlife.embed import Embedder
from memlife.lexical import tokenize
from memlife.policy import Limits
from memlife.text import (
    CALENDAR_WORDS,
    NUMBER_VALUES,
    NUMBER_WORDS,
    STOPWORDS,
    ignorable,
    negates,
    number_value,
    reads_additive,
)

UNKNOWN_SOURCE = "UNKNOWN_SOURCE"
UNGROUNDED_CLAIM = "UNGROUNDED_CLAIM"
EMPTY_RESULT = "EMPTY_RESULT"
CONTRADICTED_CLAIM = "CONTRADICTED_CLAIM"
KEEP_APART = "KEEP_APART"  # the model judged the records complement/unrelated: nothing merges
UPDATE_DIRECTION = "UPDATE_DIRECTION"  # an 'update' that retires a record newer than what it keeps
ADDITIVE_NOT_UPDATE = "ADDITIVE_NOT_UPDATE"  # "also allergic to X" read as replacing the first
# a duplicate/update that leaves a member it was sent out of source_ids and outdated_ids:
# every member is superseded, so each must be one the answer merged or retired
INCOMPLETE_SOURCES = "INCOMPLETE_SOURCES"
# over the policy's content bound, or far longer than its sources
OVERSIZED_RESULT = "OVERSIZED_RESULT"
FOREIGN_CHARACTERS = "FOREIGN_CHARACTERS"  # control/invisible characters no source holds

# A summary may restate its sources, not outgrow them: at most this many times their
# combined UTF-8 bytes, plus a little room for joining words.
SUMMARY_GROWTH = 2
SUMMARY_SLACK_BYTES = 256
# Cc control, Cf format (zero-width, bidi overrides), Cs lone surrogates (not UTF-8), Zl/Zp
# line/paragraph separators: invisible or terminal-active, never a fact a memory needs.
_FOREIGN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def check_relation(result: ConsolidationResult, group: Group) -> None:
    """The model's duplicate / update / complement verdict, checked against the records.

    complement and unrelated: both stay (KEEP_APART, nothing written). update: the ids it
    retires must be in the group and older than the newest record it keeps, and the newest
    kept record must not read as purely additive ("also", "too", "as well").
    """
    by_id = {r.id: r for r in group.records}
    if result.relation in ("complement", "unrelated"):
        raise ConsolidationError(KEEP_APART, f"model judged the group {result.relation}")
    if unknown := [i for i in result.outdated_ids if i not in by_id]:
        raise ConsolidationError(UNKNOWN_SOURCE, f"{len(unknown)} outdated id(s) not in group")
    if result.relation != "update":
        if result.outdated_ids:  # the checks below are the update's: no retiring around them
            raise ConsolidationError(UPDATE_DIRECTION, f"a {result.relation} retires records")
        return
    if not result.outdated_ids:
        raise ConsolidationError(UPDATE_DIRECTION, "an update names no outdated record")
    kept = [r for r in group.records if r.id not in set(result.outdated_ids)]
    if not kept:
        raise ConsolidationError(UPDATE_DIRECTION, "an update retires every record")
    newest = max(kept, key=lambda r: (r.created_at, r.id))
    planned = set(group.superseded_ids)  # the group plan's older statements (group_plan._older)
    for i in result.outdated_ids:
        # said at the newest kept statement's instant: neither is the later one (no order
        # by id), so an update cannot retire it, unless the plan ranked it older (a weaker
        # source at that instant)
        if i not in planned and by_id[i].created_at >= newest.created_at:
            raise ConsolidationError(
                UPDATE_DIRECTION, f"outdated {i} is not older than the kept statements"
            )
    if reads_additive(newest.content):
        raise ConsolidationError(ADDITIVE_NOT_UPDATE, f"{newest.id} adds a fact, it replaces none")


_TIE = 0.02  # cosines this close to the best count as equally close

# a bare comma (not inside a number, "1,200"), its CJK forms, a spaced dash, slash, "&" or
# "+", a colon or a bracket: each joins a part that must ground on its own (a bare "and"
# does not: "black coffee and orange juice" would ask each item to ground alone)
_COMMA = re.compile(r",(?!\d)|[，、；]|\s[-–—/&+]+\s|:\s|[()]")
# "but" after a run of whitespace is tried from the run's start only (from each space, a long
# run with no "but" after it was quadratic: 18 s for 64 kB)
_CLAUSE_SPLIT = re.compile(
    r"[.;!?\n]+|,\s+(?:but|and|while|though)\s+|(?<!\s)\s+but\s+|(?<=\n)[^\S\n]+but\s+",
    re.IGNORECASE,
)
# units a number is read with: "5 mg" is not "5 g", "2 weeks" not "2 months"
_UNITS = frozenset(
    """mg mcg g gram grams kg kilo kilos kilogram kilograms lb lbs oz ounce ounces ml l
    litre litres liter liters cl dl km kilometre kilometres kilometer kilometers m metre
    metres meter meters cm mm mi mile miles ft foot feet inch inches yard yards mph kph
    kmh degrees percent second seconds minute minutes hour hours day days week weeks
    month months year years decade decades times""".split()
)
# a token with a digit is tried from its start, split at its first digit only: one long
# token without a digit (26 s for 64 kB) or of digits (41 s) backtracked across itself
_NUMBER_UNIT = re.compile(r"((?<!\S)[^\s\d]*\d\S*|\b[A-Za-z]+\b)(?=\s+([A-Za-z]+)\b)")
# a time of day with its half: "8am" (or "8 a.m.") is not "8pm"; read as "8 am"
_MERIDIEM = re.compile(r"(?<![\w.])(\d{1,2}(?::\d\d)?)\s?([ap])\.?\s?m\b\.?", re.IGNORECASE)
# a number with its sign, currency and percent: "-18" is not "18", "$900" not "€900"
_NUMBER = re.compile(r"(?:(?<![\w.])[-\u2212+])?[$\u20ac\u00a3\u00a5]?\d+(?:[.,:/-]\d+)*%?")
# a word ends in a letter or digit: the closing quote of "'Charlotte's Web'" is not its own
_WORD = re.compile(r"[^\W\d_](?:[\w'’-]*\w)?")  # a letter of any script: "Пётр", "Øystein"
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")


def clauses(text: str) -> list[str]:
    return [c.strip() for c in _CLAUSE_SPLIT.split(text) if len(c.strip().split()) >= 2]


def comma_parts(text: str) -> list[str]:
    """The parts of each clause joined by a bare comma ("Alice likes tea, is pregnant"), where
    a clause has more than one; a comma inside a number ("1,200") joins nothing."""
    out: list[str] = []
    for clause in _CLAUSE_SPLIT.split(text):
        parts = [p.strip() for p in _COMMA.split(clause)]
        parts = [p for p in parts if _WORD.search(p) or _NUMBER.search(p)]
        out += parts if len(parts) > 1 else []
    return out


def _parts(what: str, text: str, *, clauses_too: bool = False) -> list[tuple[str, str]]:
    """(label, text) of each part of ``text`` grounded on its own: its clauses (the summary's,
    where it has more than one) and its parts joined by a bare comma."""
    found = clauses(text) if clauses_too else []
    labelled = [(f"{what} clause {k}", c) for k, c in enumerate(found)] if len(found) > 1 else []
    return labelled + [(f"{what} part {k}", p) for k, p in enumerate(comma_parts(text))]


def _restated(part: str, held: Sequence[set[str]]) -> bool:
    """A part that needs no cosine, and denies nothing: one affirmative source clause holds
    every content word of it (an item of a list, "black coffee"; an apposition, "a nurse
    from Leeds"), or it only sets the time ("Back in 2019", "These days", "Every Sunday":
    its numbers and dates are checked with the summary's). A part of filler words only
    ("she will") is grounded by cosine."""
    terms = set(tokenize(part))
    if not terms or negates(part):
        return False
    return terms <= _TIME_TERMS | _LINK_TERMS or any(terms <= h for h in held)


# words that only place a statement in time (stemmed as BM25 stems them)
_TIME_TERMS = frozenset(tokenize(
    "back since these days day week weeks month months year years every each now today "
    "tonight yesterday tomorrow recently lately nowadays currently later earlier ago last "
    "next past morning mornings evening evenings night nights weekend weekends summer "
    "winter spring autumn fall january february march april may june july august "
    "september october november december monday tuesday wednesday thursday friday "
    "saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays sundays "
    "once twice often usually sometimes always first then"
)) | {str(y) for y in range(1900, 2101)}  # fmt: skip


# time words a restatement may leave out ("Recently, Alice adopted a cat"); frequency and
# order ("twice", "every morning", "last year") are facts and stay
_VAGUE_TIME = frozenset(tokenize("recently lately nowadays currently now today"))

# words that only link a sentence to the one before ("Additionally, ...", "In addition, ..."):
# a part of them alone says nothing to ground
_LINK_TERMS = frozenset(tokenize(
    "additionally moreover furthermore meanwhile however besides overall likewise similarly "
    "instead finally afterwards eventually consequently therefore thus hence indeed notably "
    "interestingly unfortunately fortunately luckily sadly apparently clearly nevertheless "
    "nonetheless otherwise addition well also too"
))  # fmt: skip


def specifics(text: str) -> set[str]:
    """Numbers (with sign, currency, percent; and in words, by value), months and weekdays,
    and proper nouns: capitalised not at sentence start, ALL CAPS, or opening a sentence as
    a name does (``_reads_as_name``; never a function, time or linking word)."""
    found = {m.group() for m in _NUMBER.finditer(text)} | _with_units(text) | _meridiem(text)
    for m in _WORD.finditer(text):
        w = m.group()
        low = w.lower()
        if (value := number_value(low)) is not None:  # "three kids", "twenty-five cups"
            found.add(value)
        elif low in CALENDAR_WORDS and (low not in _ALSO_WORDS or _by_number(text, m)):
            found.add(low)
        elif low in NUMBER_WORDS or low in CALENDAR_WORDS:
            continue  # "one of them", "half", "may" (can), "march" (walk): no specific alone
        elif (len(w) > 1 and w.isupper()) or (
            w[0].isupper() and w != "I" and not _sentence_start(text, m.start())
        ):
            found.add(low)
        elif w[0].isupper() and low not in _OPENERS and _reads_as_name(text, m):
            # opening a sentence as a name does ("Bob is", "Carol's"): its stem must be a
            # source's, so "Bob" cannot open what "Alice" did; a verb ("Goes for a run"
            # from "Went for a run") is no specific
            found.update(_STEMMED + t for t in tokenize(low))
    return found


_STEMMED = "~"  # a specific matched by its BM25 stem (a sentence's opening word)
# what follows a name that opens a sentence ("Bob is", "Alice and", "Tom likes")
_NAME_FOLLOWERS = frozenset(
    """is was has had have will would can could should may might must does did and or who
    are were also said says told thinks feels loves likes wants went lives works""".split()
)


def _reads_as_name(text: str, m: re.Match[str]) -> bool:
    """A sentence's opening word reads as a name: possessive, or followed by a verb of
    being or having, a conjunction or a verb a memory says of a person."""
    if m.group().lower().endswith(("'s", "\u2019s")):
        return True
    after = _WORD.match(text, m.end() + 1) if text[m.end() : m.end() + 1] == " " else None
    return after is not None and after.group().lower() in _NAME_FOLLOWERS


# months that are also words ("may" can, "march" walks): a date only beside a number
_ALSO_WORDS = frozenset({"may", "march"})


def _by_number(text: str, m: re.Match[str]) -> bool:
    """A digit right before or after the word ("march 3", "3 march", "march 2024")."""
    before, after = text[max(0, m.start() - 6) : m.start()], text[m.end() : m.end() + 6]
    return bool(re.search(r"\d[\s,]*$", before) or re.match(r"[\s,]*\d", after))


# words a sentence may open with that name nobody: function words and time words
_OPENERS = (
    STOPWORDS
    | _TIME_TERMS
    | frozenset(
        "she he they we it its the this that these those there here both each every all most "
        "many some none no not yes also still only just currently lately recently usually "
        "often sometimes always never now then today since additionally moreover furthermore "
        "meanwhile however besides overall likewise similarly instead finally later "
        "afterwards eventually consequently therefore thus hence indeed notably "
        "interestingly unfortunately fortunately luckily sadly apparently clearly "
        "nevertheless nonetheless otherwise although though while whereas because when "
        "after before once until unless whether".split()
    )
)


def _with_units(text: str) -> set[str]:
    """Each number (digits or a number word) with the unit after it: "5 mg", "two weeks"."""
    out = set()
    for m in _NUMBER_UNIT.finditer(text):
        num, unit = m.group(1).strip(".,;:!?()").lower(), m.group(2).lower()
        if unit in _UNITS and (any(c.isdigit() for c in num) or num in NUMBER_WORDS):
            out.add(f"{NUMBER_VALUES.get(num, '1' if num == 'one' else num)} {unit}")
    return out


def _meridiem(text: str) -> set[str]:
    """Each time of day with its half: "8am", "8 a.m." and "8 AM" are all "8 am"."""
    return {f"{m[1]} {m[2].lower()}m" for m in _MERIDIEM.finditer(text)}


def _sentence_start(text: str, at: int) -> bool:
    """The text starts at ``at``, or the last non-space before it ends a sentence
    (``_SENTENCE_END`` on ``text[:at]``, without searching the whole prefix per word)."""
    if at == 0:
        return True
    i = at - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return i >= 0 and text[i] in ".!?:;"


def _vocabulary(texts: Sequence[str]) -> set[str]:
    vocab: set[str] = set()
    for t in texts:
        vocab.update(m.group() for m in _NUMBER.finditer(t))
        vocab |= _with_units(t) | _meridiem(t)
        vocab.update(v for w in _WORD.findall(t) if (v := number_value(w.lower())) is not None)
        vocab.update(_STEMMED + s for s in tokenize(t))
        vocab.update(m.group().lower() for m in _WORD.finditer(t))
    return vocab


def _older_versions(group: Group, said: set[str]) -> set[str]:
    """Records that say what the group's newest record says with other numbers ("allergic
    to 2 medications" before "... 3 medications"), when the result does not say the
    newest's numbers (``said``: its specifics): the newer version contradicts them. A
    result that says both ("paid $40 ..., later $75") keeps them as two events."""
    if len(group.records) < 2:
        return set()
    newest = max(group.records, key=lambda r: (r.created_at, r.id))
    if {s for s in specifics(newest.content) if any(c.isdigit() for c in s)} <= said:
        return set()

    def shape(text: str) -> tuple[frozenset[str], frozenset[str]]:
        words = set(tokenize(text))
        numbers = {w for w in words if w.isdigit() or w in NUMBER_WORDS}
        numbers |= {m.group() for m in _NUMBER.finditer(text)}
        return frozenset(words - numbers), frozenset(numbers)

    words, numbers = shape(newest.content)
    out = set()
    for r in group.records:
        if r is newest:
            continue
        w, n = shape(r.content)
        if w == words and n != numbers:
            out.add(r.id)
    return out


def check_complete(result: ConsolidationResult, group: Group) -> None:
    """duplicate / update: every member sent must be in source_ids or outdated_ids.

    The executor supersedes every member it sent: one the answer never named would be
    retired on no one's word (a second allergy dropped as a "duplicate")."""
    if result.relation not in ("duplicate", "update"):
        return
    named = set(result.source_ids) | set(result.outdated_ids)
    missing = [r.id for r in group.records if r.id not in named]
    if missing:
        raise ConsolidationError(
            INCOMPLETE_SOURCES, f"in neither source_ids nor outdated_ids: {', '.join(missing)}"
        )


def check_size(result: ConsolidationResult, group: Group, max_bytes: int) -> None:
    """Each text within the policy's content bound (import's and `remember`'s); summary,
    claims and dropped claims, each together, not far longer than all their sources."""
    for what, text in [("summary", result.summary), *_numbered("claim", result.claims)]:
        if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            raise ConsolidationError(OVERSIZED_RESULT, f"{what}: over {max_bytes} bytes")
    sources = sum(len(r.content.encode("utf-8", "surrogatepass")) for r in group.records)
    bound = SUMMARY_GROWTH * sources + SUMMARY_SLACK_BYTES  # hundreds of claims cost embeds
    for what, texts in [("summary", [result.summary]), ("claims", result.claims),
                        ("dropped_claims", result.dropped_claims)]:  # fmt: skip
        if sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) > bound:
            raise ConsolidationError(OVERSIZED_RESULT, f"{what}: far longer than its sources")


def check_characters(result: ConsolidationResult, group: Group) -> None:
    """No control or invisible format character that no source holds: it would reach
    recall, terminals and logs (an ANSI escape, a bidi override) or hide text from a reader."""
    allowed = {c for r in group.records for c in r.content if _foreign(c)}
    for what, text in [("summary", result.summary), *_numbered("claim", result.claims)]:
        if any(_foreign(c) and c not in allowed for c in text):
            raise ConsolidationError(FOREIGN_CHARACTERS, f"{what}: a character no source holds")


# ordinary layout a model writes between sentences (control characters, but harmless)
_LAYOUT = frozenset("\n\r\t")


def _foreign(c: str) -> bool:  # a variation selector, a Hangul filler: invisible, not Cf
    hidden = unicodedata.category(c) in _FOREIGN_CATEGORIES or ignorable(ord(c))
    return hidden and c not in _LAYOUT


def _numbered(label: str, texts: Sequence[str]) -> list[tuple[str, str]]:
    return [(f"{label} {i}", t) for i, t in enumerate(texts)]


def check_grounding(
    result: ConsolidationResult,
    group: Group,
    embedder: Embedder,
    threshold: float,
    *,
    max_bytes: int = Limits().content_max_bytes,
) -> None:
    """Return None when ``result`` is grounded in ``group``; raise ConsolidationError otherwise.

    ``max_bytes``: the policy's limits.content_max_bytes. Messages carry ids, indices and
    codes only: they end up in receipts and logs.
    """
    # bounded first: nothing oversized is embedded (the embedder would read only its head)
    check_size(result, group, max_bytes)
    check_characters(result, group)
    check_relation(result, group)
    whole = [result.summary, *result.claims]
    if not result.source_ids or any(not s.strip() for s in whole) or not result.claims:
        raise ConsolidationError(EMPTY_RESULT, "summary, claims and source_ids must be non-empty")
    by_id = {r.id: r for r in group.records}
    unknown = [i for i in result.source_ids if i not in by_id]
    if unknown:
        # counted, not quoted: an "id" is the model's text and may carry a memory's words
        raise ConsolidationError(UNKNOWN_SOURCE, f"{len(unknown)} id(s) not in group {group.key}")
    sources = [by_id[i] for i in dict.fromkeys(result.source_ids)]
    usable = [r for r in sources if not looks_like_instruction(r.content)]
    if not usable:
        raise ConsolidationError(UNGROUNDED_CLAIM, "no source reads as a statement")
    # The summary's clauses are grounded one by one: it is the replacement's content, and
    # an invented clause beside a true one keeps the whole above the threshold. So is a part
    # joined by a bare comma: "Alice likes green tea, is pregnant." is 0.82 from "Alice likes
    # green tea." as a whole. A part one source holds word for word needs no cosine.
    contradicted = set(group.superseded_ids) | set(result.outdated_ids)
    said = set().union(*map(specifics, whole))
    contradicted |= _older_versions(group, said)
    # word for word only from what a source affirms, and never from a contradicted source
    held = [set(tokenize(t)) for r in usable if r.id not in contradicted
            for t in [r.content, *clauses(r.content), *comma_parts(r.content)]
            if not negates(t)]  # fmt: skip
    parts = _parts("summary", result.summary, clauses_too=True)
    parts += [p for i, c in enumerate(result.claims) for p in _parts(f"claim {i}", c)]
    parts = [(what, part) for what, part in parts if not _restated(part, held)]
    statements = [result.summary, *(part for _, part in parts), *result.claims]
    labels = ["summary", *(what for what, _ in parts)]
    labels += [f"claim {k}" for k in range(len(result.claims))]
    fragments = range(1, 1 + len(parts))

    units: list[tuple[str, str]] = []  # (record id, text)
    for r in usable:
        texts = dict.fromkeys([r.content.strip(), *clauses(r.content)])
        units.extend((r.id, t) for t in texts)
    source_texts = [r.content for r in usable]
    vocab = _vocabulary(source_texts)
    vectors = embedder.embed([t for _, t in units] + statements)
    unit_vecs, stmt_vecs = vectors[: len(units)], vectors[len(units) :]
    sims = stmt_vecs @ unit_vecs.T  # rows are L2-normalised: dot product is cosine
    unit_neg = np.array([negates(t) for _, t in units])

    for i, claim in enumerate(statements):
        what = labels[i]
        # a clause's specifics were checked in the whole summary (the sentence start is
        # known there, not in the fragment)
        missing = set() if i in fragments else specifics(claim) - vocab
        swapped = set() if i in fragments else unsupported(claim, source_texts)
        if missing or swapped:  # a swap: "brother" for "sister" is 0.95, no specific
            kind = "name/number/date" if missing else SWAPPED
            raise ConsolidationError(
                UNGROUNDED_CLAIM, f"{what}: {len(missing or swapped)} {kind} in no source"
            )
        close = sims[i] >= threshold
        if not close.any():
            raise ConsolidationError(
                UNGROUNDED_CLAIM, f"{what}: best cosine {float(sims[i].max()):.2f} < {threshold}"
            )
        agree = close & (unit_neg == negates(claim))
        if not agree.any():
            raise ConsolidationError(UNGROUNDED_CLAIM, f"{what}: polarity matches no close source")
        if contradicted:
            # Judge by the closest agreeing units: "window seat" is 0.84 from "aisle seat",
            # so "any unit above threshold" would let a stale claim borrow fresh support.
            best = float(sims[i][agree].max())
            top = agree & (sims[i] >= best - _TIE)
            if {units[j][0] for j in np.flatnonzero(top)} <= contradicted:
                raise ConsolidationError(
                    CONTRADICTED_CLAIM, f"{what}: supported only by contradicted records"
                )
    # last: an answer that is ungrounded as well says so first (its more telling code)
    check_complete(result, group)
    # retired with reason: what the planner found contradicted and what the update names
    # outdated. Not an older version of the newest (two prices may be two events: only an
    # update retires one) nor a record read as an instruction (it grounds nothing, so a
    # merge of it goes to review rather than drop it unseen)
    check_coverage(
        result, group, embedder, exempt=retired(result, group),
        free=_LINK_TERMS | _VAGUE_TIME, parts=lambda t: [*clauses(t), *comma_parts(t)],
        specifics=specifics, vocabulary=lambda t: _vocabulary([t]),
    )  # fmt: skip
