"""Does a statement say again what another says, with nothing left out?

Two statements close in meaning (a high cosine) can still differ in the one word that
matters: "allergic to two medications" / "three", "runs 5 km" / "5 miles", "her brother" /
"her sister", "moved to Sweden" / "moved from Sweden", "Caroline gave Melanie a
painting" / "Melanie gave Caroline a painting" (adversarial review on LoCoMo). A merge or
a refresh keeps one text and drops the other, so both must say the same words: the same
content words once filler (articles, "and", "very") is set aside and inflection is folded
(Snowball, not derivation), in any order ("I only drink tea" / "I drink only tea"), with
- the same names in the same order;
- the same tense of be/have/do ("had cancer" is not "have cancer") and of every other
  verb: a regular past is not its present ("worked at Google" is not "works at Google",
  "lived in Berlin" not "lives"), while "likes" is "like" and "dogs" "dog" (an irregular
  past is another stem already: "went" / "goes", "taught" / "teaches");
- the same signs, comparisons, percents and currencies ("-18" is not "18", "$900" not
  "€900", "<7%" not ">7%", blood type "A+" not "A-", "C++" not "C");
- each number with the same word after it ("two dogs and one cat" is not "one dog and two
  cats", "twelve eggs and apples" not "eggs and twelve apples"), and each "from", "into",
  "onto" (and "to" beside a "from") with the word after it ("switched from tea to coffee"
  is not "from coffee to tea");
- the first word after "the", "a", "my"... that is not filler, in the same order where
  both texts have as many ("the dog bit the man" is not "the very man bit the dog");
- each word on the same side of a negation and of a comparison. A negation (not, no,
  never, n't with any apostrophe or none, cannot, without, neither, nor, none, nobody, no
  one, nothing, nowhere, rarely, seldom, hardly, barely, scarcely, except, excluding, and
  quit and stop in any form) reaches to the end of its clause (punctuation or
  but/although/though/whereas/however): "allergic to peanuts, not shellfish" is not
  "allergic to shellfish, not peanuts", "likes cats but not dogs" not "likes dogs but not
  cats"; a word after an "and"/"or" in that reach is apart from one before it ("doesn't
  eat meat and drinks wine" is not "doesn't drink wine and eats meat", nor "allergic to
  peanuts, not shellfish and crab" "allergic to peanuts and crab, not shellfish"). A
  comparison (than, over, vs, versus, instead of, as opposed to, compared to/with, and to
  after prefer: "prefers tea to coffee", "more ... than", "rather than"), and a "then"
  after an event (not "back then", "since then", "was then": session 40; a sequence of
  them goes on past a comma: "ate, then swam, then read"), puts the words
  after it, to the end of the clause, on its other side: "prefers tea to coffee" is not
  "prefers coffee to tea". "Don't" and "dont" are "do not", "noone" "no one", "versus" and
  "vs." "vs";
- where both texts are as many clauses of two words or more (split at punctuation, "and",
  "or", the clause ends and after, because, when, while, who, which...), the same words in
  each clause, in any order of clauses:
  "likes tea, hates coffee" is not "likes coffee, hates tea", nor "Alice likes coffee and
  Bob likes tea" "Alice likes tea and Bob likes coffee", nor "moved to Boston after she
  left Sweden" "left Boston after she moved to Sweden", while "Caroline hates coffee and
  likes tea" is "Caroline likes tea and hates coffee" (the words both first clauses open
  with are the subject, which later clauses leave unsaid or give as a pronoun; a later
  clause's be/have/do keeps its tense: "was happy and is sad" is not "is happy and was
  sad"). A one-word
  part is a list's item ("likes tea, coffee and cake") and belongs to the clause before it
  (the one after, for a list that opens the text): a list keeps any order, and "likes tea
  and cake, but hates coffee" is not "likes coffee and cake, but hates tea" (session 29;
  before, a text holding a one-word part was not compared by clause).
- no two words traded (session 39): the first and last words of a clause ("dogs chase
  cats" is not "cats chase dogs": a subject and object with no name or article to mark
  them; a list at either end pairs each of its items, session 40: "cats and dogs hate
  mice" is not "mice hate cats and dogs", an item a determiner opens counted whole, session
  41: "Jon and his old friend met Gina" is not "Jon and Gina met his old friend"; and the
  subject with the word before the last, or before a preposition or trailing time word,
  "sister owes brother money" is not
  "brother owes sister money", nor "mom sent dad flowers yesterday" "dad sent mom flowers
  yesterday"), nor the words either side of a preposition ("replaced tea with coffee" is not
  "replaced coffee with tea", "puts cups on plates" not "puts plates on cups"), nor two
  words after a subject a relative clause restricts (session 41: "kids who love dogs fear
  cats" is not "kids who love cats fear dogs"). Only a swap counts: a clause whose words
  merely move ("every morning she drinks coffee" / "she drinks coffee every morning") is
  read as before; in any language, nor two runs of words traded across words no list joins
  (restate_swap.py). Rewordings are not merged on this rule: a missed merge, never a lost
specific (a rule on the first word alone refused "weighs 70.5 kg and runs" / "runs and ...").
"""

from __future__ import annotations

import re
import threading
from collections import Counter

import Stemmer

from memlife.restate_forms import derivation
from memlife.restate_only import only_scopes
from memlife.restate_swap import traded
from memlife.text import NUMBER_WORDS, norm_sha256, symbols_as_words

# words whose presence or absence changes no fact; prepositions, numbers, comparatives,
# time words and negations are NOT here: "to"/"from", "more"/"less", "this"/"last" year
# all matter ("any" after a negation, "also" and "very" do not)
_FILLER = frozenset("a an the be been being and any some very really just also i".split())
# be/have/do keep their tense, not their person: "is"/"are" say the same, "is"/"was" do not
_TENSE = {
    **dict.fromkeys(("is", "are", "am"), "\x00be"), **dict.fromkeys(("was", "were"), "\x00was"),
    **dict.fromkeys(("has", "have"), "\x00have"), "had": "\x00had",
    **dict.fromkeys(("do", "does"), "\x00do"), "did": "\x00did",
}  # fmt: skip
# a regular past: a word ending in "ed" that the stemmer shortens ("worked" -> "work", not
# "need", "bed" or "speed"); it keeps its stem, marked past, so "worked" / "works" differ
_PAST = "\x00ed"
# words and the punctuation that ends a clause (a "." or "," between digits is a number's)
_TOKEN = re.compile(r"\w+|(?<!\d)[.,]|[.,](?!\d)|[;:!?()\[\]{}\"\u2026\u2014]")
_CLAUSE_MARKS = frozenset('.,;:!?()[]{}"\u2026\u2014')
# a negation contracted with any apostrophe (U+2019, U+02BC, U+2018, a backtick) or
# none ("dont"; only after the auxiliaries: "went", "want" and "print" stay), "cannot",
# and two spellings that are one word: "noone" is "no one", "versus" and "vs." are "vs"
_CONTRACTED = re.compile(
    r"\b(\w+?)n['\u2019\u02bc\u2018`]t\b|\b(can)(not)\b|\b(do|does|did|is|are|was|were|has|"
    r"have|had|ca|could|wo|would|should|must|need|sha|ai|might)(nt)\b|\b(no)(one)\b|"
    r"\b(?:versus|vs\.?)(?!\w)",
    re.IGNORECASE,
)
_CONTRACTED_STEMS = {"ca": "can", "wo": "will", "sha": "shall"}
_NEGATIONS = frozenset(
    "not no never without neither nor none nobody nothing nowhere rarely seldom hardly "
    "barely scarcely except excluding".split()
)
_CEASE = frozenset(("quit", "stop"))  # stems: "quit smoking", "stopped drinking coffee"
_COMPARED = frozenset(("compared", "compare", "comparing", "comparison"))
_CLAUSE_ENDS = frozenset("but although though whereas however".split())
# "then" orders two events ("painted, then hiked"), except as a time ("back then", "was then")
_THEN_AS_TIME = frozenset("back since until till by from right just even was were is are am "
                          "had has have did do does been be".split())  # fmt: skip
_CONJUNCTIONS = frozenset("and or".split())
_I_BEFORE = _CONJUNCTIONS | _CLAUSE_ENDS | {"so", "then", "yet"}  # "..., so I washed up"
# words that open a clause of their own ("moved to Boston after she left Sweden")
_SUBORDINATE = frozenset("after before because since until when while who whom whose which "
                         "where if unless".split())  # fmt: skip
_PRONOUNS = frozenset("he she they it we you".split())  # a later clause's subject
_RELATIVE = frozenset("who whom whose which that".split())  # "kids who love dogs"
# a preposition whose object has a role a list never blurs: "from tea to coffee" is not
# "from coffee to tea" ("to" pairs only beside a "from": "allergic to peanuts and
# shellfish" lists in any order)
_ROLE_PREPOSITIONS = frozenset(("from", "into", "onto"))
# a preposition that links two words whose sides are a fact: "replaced tea with coffee"
_LINKS = frozenset(
    "with for above below under behind beside near against toward towards on in at of to by "
    "about inside beneath beyond around across through between among after before until "
    "since s".split()
)  # ("s": a possessive, "mom's friend" is not "friend's mom")
# a word that ends what a clause's subject does to its object ("dogs chase cats daily")
_TRAILING = frozenset(
    "daily weekly monthly yearly nightly yesterday today tomorrow tonight now often always "
    "usually sometimes every again recently lately then".split()
)
_POSSESSIVE = frozenset("my your his her its our their".split())  # keeps its noun's owner
_PART_ENDS = _LINKS | _TRAILING  # a word that ends what a subject does ("at work", "daily")
_FRONTED = _PART_ENDS | {"back"}  # a clause's first word that is not its subject
_DETERMINERS = frozenset("the a an my your his her its our their this that these those".split())
_QUANTIFIERS = frozenset("all both several many few some each two three four five six".split())
# each clause's words (None: one clause, or a part of one word)
Clauses = tuple[tuple[str, ...], ...] | None
_local = threading.local()  # PyStemmer objects must not be shared across threads


def _stem(words: list[str]) -> list[str]:
    st = getattr(_local, "st", None)
    if st is None:
        st = _local.st = Stemmer.Stemmer("english")
    return list(st.stemWords(words))


def _tensed(word: str, stem: str) -> str:
    """The word's stem, with its tense where tense is a fact: be/have/do (_TENSE), and a
    regular past ("worked") apart from the present ("works", "work")."""
    tense = _TENSE.get(word)
    if tense is not None:
        return tense
    if word.endswith("ed") and stem != word and word not in NUMBER_WORDS:  # not "hundred"
        return stem + _PAST
    return stem


def _uncontracted(m: re.Match[str]) -> str:
    """A contracted negation written out: "don't" and "dont" are "do not", "can't" and
    "cannot" "can not", "won't" "will not"; "noone" is "no one", "versus" "vs"."""
    if m.group(2):
        return f"{m.group(2)} not"
    if m.group(6):
        return f"{m.group(6)} one"
    head = m.group(1) or m.group(4)
    if head is None:
        return "vs"
    full = _CONTRACTED_STEMS.get(head.casefold(), head)
    if head.isupper():  # "DON'T" is "DO not", never the name "Do"
        return full.upper() + " not"
    return (full.capitalize() if head[:1].isupper() else full) + " not"


def _sides(tokens: list[str], stems: list[str]) -> list[str]:
    """For each word of ``tokens`` (words and the punctuation that ends a clause;
    ``stems``: the words' stems), the mark of the side it stands on (module doc): in a
    negation's reach, there after an "and"/"or", after the k-th comparison of its clause.
    A word that opens, joins or ends a reach stands on none ("")."""
    marks: list[str] = []
    neg = joined = prefer = False
    side = seen = thens = 0
    prev = ""
    for tok in tokens:
        if tok in _CLAUSE_MARKS:  # the clause ends (a sequence of events goes on past a ",")
            neg = joined = prefer = False
            thens = thens if tok == "," else 0
            side = thens
            continue
        w = tok.casefold()
        mark = ""
        if w in _CLAUSE_ENDS:
            neg = joined = prefer = False
            side = thens
        elif w in _NEGATIONS or stems[len(marks)] in _CEASE:
            neg, joined = True, False
        elif w in _CONJUNCTIONS:
            joined = joined or neg
        elif w == "then" and prev not in _THEN_AS_TIME and seen > 1:
            thens += 1  # what came first and what came next ("painted, then hiked")
            side = max(side + 1, thens)
        elif (
            w in ("than", "over", "vs")
            or (w == "of" and prev == "instead")
            or (w == "to" and (prefer or prev == "opposed"))
            or (w in ("to", "with") and prev in _COMPARED)
        ):
            side, prefer = side + 1, False
        else:
            mark = ("\x01not+" if joined else "\x01not" if neg else "") + (
                f"\x01than{side}" if side else ""
            )
            prefer = prefer or stems[len(marks)] == "prefer"
        marks.append(mark)
        prev = w
        seen += w not in _FILLER  # "she then moved": no event before it yet
    return marks


Shape = tuple[frozenset[tuple[str, int]], tuple[str, ...], tuple[str, ...],
              frozenset[tuple[tuple[str, str], int]], Clauses, frozenset[tuple[str, str]]]  # fmt: skip


def _shape(text: str) -> Shape:
    """(content words counted, names in order, the words after a determiner in order, each
    number with its next word counted, the words of each clause, the ordered pairs a trade
    would swap): a name is a capitalised (not all-capitals) word after the first."""
    tokens = _TOKEN.findall(_CONTRACTED.sub(_uncontracted, symbols_as_words(text)))
    raw = [t for t in tokens if t not in _CLAUSE_MARKS]
    folded = [w.casefold() for w in raw]
    bare = _stem(folded)
    stems = [_tensed(f, s) + derivation(f, s) for f, s in zip(folded, bare, strict=True)]
    sides = _sides(tokens, bare)
    # "I" as a list's item or opening a later clause is a person; said again, the speaker
    keep = [i for i, f in enumerate(folded) if f not in _FILLER or (f == "i" and folded.count(
        "i") == 1 and ({*folded[max(i - 1, 0):i]} & _I_BEFORE or {*folded[i + 1:i + 2]} & {
        "and", "or"}))]  # fmt: skip
    lead = next((i for i in keep if folded[i] != "i"), -1)  # "I and Bob": Bob opens it
    names = tuple(stems[i] for i in keep if raw[i][:1].isupper() and not raw[i].isupper()
                  and i != lead)  # fmt: skip
    # the first word after each determiner that is not filler ("the very man": "man"), with
    # its owner where the determiner names one ("my dog bit your cat")
    after = tuple(
        (folded[i] + "\x02" if folded[i] in _POSSESSIVE else "") + stems[nxt]
        for i, nxt in _next_kept(folded, keep) if folded[i] in _DETERMINERS
    )  # fmt: skip
    content = [stems[i] for i in keep]
    origin = "from" in folded
    # each number (the word as written: "twelve" stems to "twelv") with the word after it,
    # each role preposition with its object ("from tea to coffee"), where "only" stands
    numbers = only_scopes(tokens, folded, _CLAUSE_MARKS, _FILLER, _PART_ENDS) + Counter(
        (w, content[j + 1]) for j, w in enumerate(content[:-1])
        if folded[keep[j]].isdigit() or folded[keep[j]] in NUMBER_WORDS
        or folded[keep[j]] in _ROLE_PREPOSITIONS or (folded[keep[j]] == "to" and origin))  # fmt: skip
    placed = Counter(sides[i] + stems[i] for i in keep)
    marked = [s + w for s, w in zip(sides, stems, strict=True)]
    clauses = _clauses(tokens, folded, marked)
    # each clause's first word with its last and with the word before a link or a trailing
    # time word ("mom helps dad at work"), and the words either side of a link ("tea with
    # coffee"); the clauses as indices, to read which word each is
    cut = _clauses(tokens, folded, [str(i) for i in range(len(folded))])
    joined = _joined(tokens, folded)
    ends = set()
    for c in [[int(x) for x in part] for part in cut] if cut else [keep]:
        # a clause opened by a time or a place ("back then she lived in Paris", "in 2020
        # dogs chased cats"): its subject comes after it
        while len(c) > 2 and folded[c[0]] in _FRONTED:
            c = c[2:] if folded[c[0]] in _LINKS or folded[c[0]] == "every" else c[1:]
        if not c:
            continue
        # a subject a relative clause restricts ("kids who love dogs fear cats"): which
        # verb each later word belongs to is read from their order alone, so every two
        # words after the relative word keep theirs, a moved time word aside (session 41)
        later = [i for i in c[_relative_start(c, folded) :]
                 if folded[i] not in _TRAILING and folded[i] not in _RELATIVE]  # fmt: skip
        # (a list's items among them may come in any order: "loves pottery and painting")
        items = [sum(not joined[j] for j in later[: k + 1]) for k in range(len(later))]
        ends |= {(marked[x], marked[later[m]]) for k, x in enumerate(later)
                 for m in range(k + 1, len(later)) if items[m] != items[k]}  # fmt: skip
        # a list at either end ("cats and dogs hate mice") pairs each of its items
        head, tail = _head_list(c, folded, joined), [c[-1]]
        # an item a number opens may run past its noun into the verb and the object ("mom
        # and seven coworkers took dad"): the subject keeps its order before those words
        spilled = _spilled(head, joined)
        ends |= {(marked[c[0]], marked[w]) for w in spilled}
        for k in range(len(c) - 1, 0, -1):
            if not joined[c[k]]:
                break
            tail.append(c[k - 1])
        # the clause's end, and each end before a link or a trailing time word ("mom helps
        # dad at work", "mom sent dad flowers yesterday"), pairs with the subject, and so
        # does the word before that end's item: two objects with no marker ("sister owes
        # brother money"), unless that word is a preposition ("moved to Lisbon in spring")
        # ("I only drink tea": a clause too short for a second object)
        cuts = [(len(c), tail)] + [(k, [c[k - 1]]) for k in range(2, len(c))
                                   if folded[c[k]] in _PART_ENDS]  # fmt: skip
        for e, items in cuts:
            ends |= {(marked[h], marked[t]) for h in head for t in items}
            if e > len(head) + len(items) + (not spilled):  # (the verb may be in the head)
                second = c[e - len(items) - 1]
                if folded[second] not in _PART_ENDS:
                    ends |= {(marked[h], marked[second]) for h in head}
    # (not where the word before is itself a preposition's: "a fan of jazz and of blues")
    links = {(marked[keep[j - 1]], marked[keep[j + 1]])
             for j in range(1, len(keep) - 1) if folded[keep[j]] in _LINKS
             and (j < 2 or folded[keep[j - 2]] not in _LINKS)}  # fmt: skip
    pairs = frozenset(p for p in ends | links if p[0] != p[1])
    return frozenset(placed.items()), names, after, frozenset(numbers.items()), clauses, pairs


def _spilled(head: list[int], joined: list[bool]) -> list[int]:
    """The head list's words past the first two of its last item."""
    starts = [k for k in range(1, len(head)) if joined[head[k]]]
    return head[starts[-1] + 2 :] if starts else []


def _relative_start(c: list[int], folded: list[str]) -> int:
    """Where in clause ``c`` the words after a relative word begin ("young kids who | love
    dogs fear cats", "Jon said kids who | ..."; a clause cut at "who": 0); ``len(c)``
    where no relative word opens the clause or follows one of its words."""
    j = c[0] - 1
    while j >= 0 and folded[j] in _FILLER:
        j -= 1
    if j >= 0 and folded[j] in _RELATIVE:
        return 0
    for k in range(1, len(c)):
        if any(folded[i] in _RELATIVE for i in range(c[k - 1] + 1, c[k] + 1)):
            return k
    return len(c)


def _item_end(c: list[int], k: int, folded: list[str], joined: list[bool], limit: int) -> int:
    """Where the list item opening at ``c[k]`` ends: one word, or up to two after filler
    ("the old friend"), or as far as it goes where a kept determiner, quantifier or number
    opens it ("his three old school friends"), short of ``limit``, a link, a trailing time
    word and the next item (session 41: "Jon and his old friend met Gina" is not "Jon and
    Gina met his old friend")."""
    own = _opens_item(folded[c[k]])  # "his", "two" are kept; "the" is filler, read before
    if not own and (c[k] == 0 or not _opens_item(folded[c[k] - 1])):
        return k + 1
    end = k + 1
    while (
        end < (limit if own else min(k + 2, limit))
        and not joined[c[end]]
        and folded[c[end]] not in _PART_ENDS
    ):
        end += 1
    return end


def _opens_item(word: str) -> bool:
    """A determiner, quantifier or number opens a list item of several words ("his old
    friend", "two old friends", "2 old friends", "both her sisters")."""
    return word in _DETERMINERS or word in _QUANTIFIERS or word in NUMBER_WORDS or word.isdigit()


def _head_list(c: list[int], folded: list[str], joined: list[bool]) -> list[int]:
    """The words of the list a clause opens with (its first word where it opens none),
    each item whole, a verb and an object left after it. (An item of several words at a
    clause's end, or a list's first, is a part of its own: ``_clauses``.)"""
    head, end = [c[0]], 1
    while end < len(c) and joined[c[end]]:
        k, end = end, _item_end(c, end, folded, joined, len(c) - 2)
        head += c[k:end]
    return head


def _joined(tokens: list[str], folded: list[str]) -> list[bool]:
    """For each word, whether a "," or an "and"/"or" stands between it and the last word
    before it that is not filler: the word is a list's next item."""
    out: list[bool] = []
    join = False
    for tok in tokens:
        if tok in _CLAUSE_MARKS:
            join = join or tok == ","
            continue
        w = folded[len(out)]
        out.append(join and w not in _CONJUNCTIONS)
        if w in _CONJUNCTIONS:
            join = True
        elif w not in _FILLER:
            join = False
    return out


def _next_kept(folded: list[str], keep: list[int]) -> list[tuple[int, int]]:
    """(i, the index of the first word after word i that is not filler) for every word
    that has one."""
    out, k = [], 0
    for i in range(len(folded)):
        while k < len(keep) and keep[k] <= i:
            k += 1
        if k < len(keep):
            out.append((i, keep[k]))
    return out


def _clauses(tokens: list[str], folded: list[str], marked: list[str]) -> Clauses:
    """Each clause's content words (``marked``: the words' stems with their sides); None
    when there is one clause. A part of one word is a list's item ("likes tea, coffee and
    cake") and goes to the clause before it (after it, for a list opening the text), as
    does the first word of the part an "and"/"or" opens after one ("friends, family, and
    mentors are her rocks": "mentors" is the list's last item): a list keeps any order."""
    clauses: list[tuple[bool, list[str]]] = [(False, [])]  # (opened by and/or, words)
    i = 0
    for tok in tokens:
        if tok in _CLAUSE_MARKS:
            clauses.append((False, []))
            continue
        w = folded[i]
        if w in _CLAUSE_ENDS or w in _CONJUNCTIONS or w in _SUBORDINATE:
            if not clauses[-1][1]:  # "..., and": the word opens the part
                clauses.pop()
            clauses.append((w in _CONJUNCTIONS, []))
        elif w not in _FILLER:
            clauses[-1][1].append(marked[i])
        i += 1
    parts: list[list[str]] = []
    lead: list[str] = []  # one-word parts before any clause: the list opens the text
    listing = False  # the part before was a list's item
    for joined, c in ((j, c) for j, c in clauses if c):
        if len(c) == 1 or (listing and joined and parts):
            take, c = c[:1], c[1:]
            if parts:
                parts[-1] += take
            else:
                lead += take
            listing = True
            if len(c) < 2:
                if c:
                    (parts[-1] if parts else lead).extend(c)
                continue
        listing = False
        parts.append(lead + c)
        lead = []
    if lead:  # one-word parts only (or trailing a text with no clause of two words)
        parts = [lead + (parts[0] if parts else [])] + parts[1:]
    if len(parts) < 2:
        return None
    return tuple(tuple(c) for c in parts)


def _same_clauses(a: Clauses, b: Clauses) -> bool:
    """Whether two texts' clauses hold the same words, in any order of clauses. The words
    both first clauses open with (a subject: "Caroline", "my sister", "Gina is") are set
    aside, as are the pronouns and be/have/do a later clause opens with ("... and she
    likes", "... and is excited"): the other clauses leave their subject unsaid."""
    if a is None or b is None or len(a) != len(b):
        return True  # not both cut into clauses alike: the bag of words decides alone
    n = 0
    while n < min(len(a[0]), len(b[0])) and a[0][n] == b[0][n]:
        n += 1
    subject = set(a[0][:n])
    spoken = subject & _PRONOUNS

    def bare(part: tuple[str, ...]) -> tuple[str, ...]:
        k = 0
        # be/have/do stays: its tense is a fact ("was happy and is sad")
        # a pronoun is the subject left unsaid, unless the subject is another pronoun ("she
        # likes tea and he likes coffee")
        while k < len(part) and (part[k] in subject or (part[k] in _PRONOUNS and not spoken)):
            k += 1
        return part[k:]

    def bags(c: tuple[tuple[str, ...], ...]) -> Counter[frozenset[tuple[str, int]]]:
        return Counter(frozenset(Counter(bare(p)).items()) for p in (c[0][n:], *c[1:]))

    return bags(a) == bags(b)


def restates(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` say the same words (up to filler, inflection other than
    tense and an order that carries no role: module doc) with the same names: keeping
    either loses nothing; a wordless text (any emoji is [UNK] to MiniLM) only its own key."""
    words_a, names_a, after_a, numbers_a, clauses_a, pairs_a = _shape(a)
    words_b, names_b, after_b, numbers_b, clauses_b, pairs_b = _shape(b)
    same_roles = len(after_a) != len(after_b) or after_a == after_b  # an article dropped
    return (
        words_a == words_b and names_a == names_b and numbers_a == numbers_b
        and same_roles and _same_clauses(clauses_a, clauses_b)
        and not _traded(pairs_a, pairs_b) and not _traded(pairs_b, pairs_a)
        and not traded(a, b)  # words the rules above do not read (another language)
        and (bool(words_a) or norm_sha256(a) == norm_sha256(b))  # no word: emoji (audit 52c)
    )  # fmt: skip


def _traded(a: frozenset[tuple[str, str]], b: frozenset[tuple[str, str]]) -> bool:
    """Whether a pair of ``a`` stands swapped in ``b`` and not as it was."""
    return any((y, x) in b and (x, y) not in b for x, y in a)
