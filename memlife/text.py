"""Content-derived signals computed once at write time, so planning never reads content."""

from __future__ import annotations

import hashlib
import re
import unicodedata

from memlife.timeref import MONTHS, WEEKDAYS

# Function words and question words: they carry no topic, and in questions ("what did
# ... do") they would otherwise match every record that happens to contain them.
STOPWORDS = frozenset(
    """a an the of to in on for and or is are was were be been being do does did doing
    i you he she it we they me him her us them my your his its our their mine yours
    what when where who whom which why how that this these those with at by from as
    have has had not no so if then than there here would could should will can may might
    must shall about into over after before up down out just also any some very s t
    am isn aren wasn weren don didn doesn""".split()
)

_NORMALISE = re.compile(r"[^a-z0-9]+")
# negations, with the apostrophe models and phones type (U+2019, U+02BC) or none at all
_NEGATION = re.compile(
    r"\b(not|never|no|no longer|none|nothing|nobody|nowhere|neither|nor|cannot|stopped|quit|"
    r"without|anymore|unsubscribed|dont|doesnt|didnt|isnt|arent|wasnt|werent|cant|wont|"
    r"couldnt|wouldnt|shouldnt|hasnt|havent|hadnt|aint)\b|n['\u2019\u02bc]t\b",
    re.IGNORECASE,
)

# Symbols that carry a fact, which the folds below would drop as punctuation: a sign
# before a number ("-18 degrees" is not "18 degrees"), a percent and a currency ("5%" is
# not "5", "$900" is not "€900"). Each is written as a word first; a hyphen inside a word
# or between numbers ("well-known", "2023-05-01", "5-10") is punctuation still.
_SIGNED = re.compile(r"(?<![\w.])([-+\u2212\u2013])(?=\.?\d)")
_SYMBOL_WORDS = {"-": " minus ", "\u2212": " minus ", "\u2013": " minus ", "+": " plus ",
                 "%": " percent ", "$": " dollar "}  # fmt: skip
_SIGNS = ("-", "+", "\u2212", "\u2013")
_UNITS = ("%", "$")  # outside ASCII a currency sign is its Unicode name (_CURRENCY)

# Store version 4: the signs that carry a fact after a letter or standing alone, which
# version 3 still dropped ("A1C <7%" / ">7%", "systolic ≤ 120" / "≥ 120", "C++" / "C#" /
# "C", blood type "A+" / "A-"): a comparison anywhere ("<=" is "≤"), a plus anywhere (one
# standing between spaces, "tea + coffee", is "and", as "&" is), a sharp after a letter
# that no letter or digit follows ("C#", "C♯"; "#1", "#travel" and "Issue#42" stay
# punctuation), a minus after a letter that no letter, digit or dash follows ("O-",
# "HIV-"; "well-known", "e-mail", "COVID-19", "tea -- coffee", a "- item" bullet and a
# suspended hyphen, "pre- and post-op", stay punctuation), a minus before a currency sign
# ("-$50"), and an arrow as its direction ("->" is "right arrow", "<-" "left arrow").
# A "+", "-" or ">" that starts a line and a space follows is markup (a bullet, a quote):
# punctuation. Outside ASCII, a symbol (category So: emoji, check marks, "°") is its
# name, and an arrow its direction (_SymbolTable).
_SIGN_CUES = "[-<>=+#\u2212\u2013\u2264-\u2267\u2a7d\u2a7e\u2260\u00b1\u266d\u266f]"
_SIGN_CUE = re.compile(_SIGN_CUES)  # whether to look at all ("!=" holds "=")
_SIGN_WORD = re.compile(
    rf"(?=!|{_SIGN_CUES})(?:"  # a cue first: other positions fail at once (4x faster)
    # an arrow; a run of - or = is tried from its first character only (from each one, a
    # long run with no ">" was scanned to its end again and again: 2.3 s for 64 kB of "=")
    r"(<=+>|<-+>|<-+(?![\d.])|(?<!-)-+>|(?:(?<!=)|(?<=[>!]=))=+>)"
    r"|((?<=\s)\+(?=\s))"  # 2: a plus between spaces: "and"
    r"|(<=|>=|!=|[<>\u2264\u2265\u2266\u2267\u2a7d\u2a7e\u2260\u00b1\u266f\u266d+])"  # 3
    r"|(?<=[^\W\d_])(?:(#)(?![^\W_])"  # 4: sharp; else minus (not a suspended hyphen)
    r"|[-\u2212\u2013](?![\w\-\u2212\u2013])(?!\s+(?i:and|or|to)\b)))"
)
_SIGN_WORDS = {"<": " less than ", ">": " greater than ", "<=": " at most ", ">=": " at least ",
               "\u2264": " at most ", "\u2266": " at most ", "\u2a7d": " at most ",
               "\u2265": " at least ", "\u2267": " at least ", "\u2a7e": " at least ",
               "!=": " unequal ", "\u2260": " unequal ", "\u00b1": " plus minus ",
               "\u266f": " sharp ", "\u266d": " flat ", "+": " plus "}  # fmt: skip
# a bullet or quote marker: "+", "-" or ">" (or several) at a line's start, then a space,
# and no number next ("> 5 years" is "greater than 5 years", not a quote)
_MARKUP = re.compile(r"^([ \t]*)(?:[-+>\u2212\u2013][ \t]+)+(?![\d.])", re.MULTILINE)
# the statement fold of each store version since signs were read (text.py's keys)
FOLD_NO_SYMBOLS, FOLD_SIGNED_NUMBERS, FOLD_SIGNS, FOLD_LEADING_POINT, FOLD = 2, 3, 4, 5, 6
# a decimal point opening a number is its "0." (store version 5): ".5 mg" is "0.5 mg", not "5 mg"
_LEADING_POINT = re.compile(r"(?<![\w.])\.(?=\d)")
# a point between digits is a word (store version 6): "1.5 mg" is not "1-5 mg" (a range)
_INNER_POINT = re.compile(r"(?<=\d)\.(?=\d)")


def _sign_word(m: re.Match[str]) -> str:
    if m.group(1):
        return _arrow_word(m.group(1))
    if m.group(2):
        return " and "
    if m.group(3):
        return _SIGN_WORDS[m.group(3)]
    return " sharp " if m.group(4) else " minus "


def _arrow_word(arrow: str) -> str:
    if arrow.startswith("<"):
        return " left right arrow " if arrow.endswith(">") else " left arrow "
    return " right arrow "


# numbers written as words, by value ("one", "half", "couple" are words too often to have
# one alone: they are NUMBER_WORDS without a value)
NUMBER_VALUES = {w: str(v) for v, w in enumerate(
    "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split()) if w != "_"} | {
    "thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70",
    "eighty": "80", "ninety": "90", "hundred": "100", "thousand": "1000",
    "million": "1000000", "billion": "1000000000", "dozen": "12",
}  # fmt: skip
NUMBER_WORDS = frozenset(NUMBER_VALUES) | {"one", "half", "couple"}
_DIGIT_WORDS = {
    w: i for i, w in enumerate("zero one two three four five six seven eight nine".split())
}
_TENS = frozenset("twenty thirty forty fifty sixty seventy eighty ninety".split())


def number_value(word: str) -> str | None:
    """A lower-case number word's value ("three": "3"), a hyphenated one's too ("forty-two")."""
    tens, _, unit = word.partition("-")
    if tens in _TENS and _DIGIT_WORDS.get(unit):
        return str(int(NUMBER_VALUES[tens]) + _DIGIT_WORDS[unit])
    return NUMBER_VALUES.get(word)


# months and weekdays: a date whatever its case ("march 3", "every monday")
CALENDAR_WORDS = frozenset(MONTHS) | WEEKDAYS


def symbols_as_words(text: str, *, fold: int = FOLD) -> str:
    """``text`` with its fact-bearing symbols (signs, comparisons, percent, currencies) as
    words. Text outside ASCII is NFKC first (as the fold is: a fullwidth '％' or '－' is
    '%' or '-'), and a currency sign of any script is its name ('₹' ' indian rupee ').
    ``fold``: a store version's statement fold (FOLD_SIGNED_NUMBERS: only a sign before a
    number, a percent and a currency, as store version 3 read them)."""
    if not text.isascii():
        text = nfkc(text)
    if fold >= FOLD_LEADING_POINT and "." in text:
        text = _LEADING_POINT.sub("0.", text)
        if fold >= FOLD:
            text = _INNER_POINT.sub(" point ", text)
    if fold >= FOLD_SIGNS and ("+" in text or ">" in text or "-" in text):
        text = _MARKUP.sub(r"\1 ", text)
    if any(s in text for s in _SIGNS):
        text = _SIGNED.sub(lambda m: _SYMBOL_WORDS[m.group(1)], text)
        if fold >= FOLD_SIGNS:
            text = _SIGNED_UNIT.sub(" minus ", text)
    if fold >= FOLD_SIGNS:
        if _SIGN_CUE.search(text):
            text = _SIGN_WORD.sub(_sign_word, text)
        if "&" in text:
            text = text.replace("&", " and ")
    for unit in _UNITS:
        if unit in text:
            text = text.replace(unit, _SYMBOL_WORDS[unit])
    if not text.isascii():
        text = _CURRENCY.sub(_currency_word, text)
        if fold >= FOLD_SIGNS and any(ch.isalnum() for ch in text):
            text = text.translate(_SYMBOLS)
    return text


# Unicode's currency signs (category Sc) outside ASCII, from the blocks that hold them
# (after NFKC: the fullwidth and small forms are the ASCII or Latin-1 ones)
_CURRENCY_BLOCKS = ((0xA2, 0xA5), (0x58F, 0x58F), (0x60B, 0x60B), (0x7FE, 0x7FF),
                    (0x9F2, 0x9FB), (0xAF1, 0xAF1), (0xBF9, 0xBF9), (0xE3F, 0xE3F),
                    (0x17DB, 0x17DB), (0x20A0, 0x20CF), (0xA838, 0xA838), (0xFDFC, 0xFDFC),
                    (0xFE69, 0xFE69), (0xFF04, 0xFF04), (0xFFE0, 0xFFE6), (0x11FDD, 0x11FE0),
                    (0x1E2FF, 0x1E2FF), (0x1ECB0, 0x1ECB0))  # fmt: skip
_MONEY = [chr(c) for lo, hi in _CURRENCY_BLOCKS for c in range(lo, hi + 1)]
_CURRENCY = re.compile(
    "[" + "".join(re.escape(c) for c in _MONEY if unicodedata.category(c) == "Sc") + "]"
)


def _currency_word(m: re.Match[str]) -> str:
    return " " + unicodedata.name(m.group(), "currency").lower().removesuffix(" sign") + " "


# a minus before a currency sign ("-$50", "−€5"; store version 4)
_SIGNED_UNIT = re.compile(r"(?<![\w.])[-\u2212\u2013](?=\$|" + _CURRENCY.pattern + ")")


class _SymbolTable(dict[int, str]):
    """str.translate's table for store version 4's symbols outside ASCII (after NFKC and
    the currency signs): an arrow (a math or other symbol named so) is its direction, as
    the ASCII arrows are ('→' and '->' ' right arrow ', '←' ' left arrow '); any other
    symbol of category So (emoji, check marks, stars, '°') is its name, less a ' sign'
    ('✓' ' check mark ', '✗' ' ballot x ', '👍' ' thumbs up '). A variation selector or
    skin-tone modifier next to it is no symbol (the fold drops it or makes it a space), so
    '👍🏽' and '❤️' are '👍' and '❤'. Every other character is itself. A text of symbols
    alone (no letter or digit: '👍') is not translated: it folds to nothing and is keyed by
    its exact content (:func:`norm_sha256`), as before."""

    LIMIT = 1 << 16

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        out = ch
        cat = unicodedata.category(ch)
        if cat in ("So", "Sm"):
            name = unicodedata.name(ch, "")
            if "ARROW" in name:
                out = _direction(name)
            elif cat == "So":
                out = f" {name.lower().removesuffix(' sign') or 'symbol'} "
        if len(self) < self.LIMIT:
            self[cp] = out
        return out


def _direction(name: str) -> str:
    left = "LEFT" in name
    right = "RIGHT" in name
    if left or right:
        return (
            " left right arrow " if left and right else " left arrow " if left else " right arrow "
        )
    up, down = "UP" in name, "DOWN" in name
    if up or down:
        return " up down arrow " if up and down else " up arrow " if up else " down arrow "
    return f" {name.lower()} "


_SYMBOLS = _SymbolTable()


def nfkc(text: str) -> str:
    """NFKC, a superscript, subscript or fraction first made a word of its own (see
    _ScriptTable): '10²' is '10 sup2', not NFKC's '102'."""
    normal = unicodedata.normalize("NFKC", text)
    if normal != text:  # a superscript, subscript or fraction is no NFKC character
        normal = unicodedata.normalize("NFKC", text.translate(_SCRIPTS))
    return normal


# Work per text is bounded: past this many characters a text is folded no further (its
# tail is hashed exactly) and not searched for negation. Imports and `remember` refuse
# content over the policy's bound (64 KiB) anyway; this keeps an older 10 MB record cheap.
ANALYSIS_WINDOW = 64 * 1024


def normalise(text: str, *, fold: int = FOLD) -> str:
    """Case, punctuation and spacing folded: 'Is vegetarian.' == 'is  vegetarian', and
    'Зелёный-Кот!' == 'зелёный кот'; a sign, comparison, percent or currency as a word
    (:func:`symbols_as_words`; ``fold``: a store version's fold, FOLD_NO_SYMBOLS: dropped,
    as before store version 3). ASCII text folds by the [a-z0-9] fold; other text by
    :func:`unicode_fold`."""
    if len(text) <= ANALYSIS_WINDOW:
        if fold >= FOLD_SIGNED_NUMBERS:
            text = symbols_as_words(text, fold=fold)
        if text.isascii():
            return _NORMALISE.sub(" ", text.lower()).strip()
        return unicode_fold(text)
    tail = hashlib.sha256(text[ANALYSIS_WINDOW:].encode("utf-8", "surrogatepass")).hexdigest()
    return f"{normalise(text[:ANALYSIS_WINDOW], fold=fold)} #{tail}"


# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties.txt): code points a renderer
# shows as nothing when it does not support them. Every one is dropped by the fold, not
# only the format characters (Cf): a combining grapheme joiner, a Mongolian free variation
# selector, a Khmer inherent vowel or a Hangul filler slipped into a word changes nothing
# a reader sees, so it must not give an erased text a new key.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip


def ignorable(cp: int) -> bool:
    """A default-ignorable code point: shown as nothing (variation selectors, fillers)."""
    return any(lo <= cp <= hi for lo, hi in DEFAULT_IGNORABLE)


def invisible_at(key: str) -> int | None:
    """Where ``key`` (a record id, an actor) first holds a character nobody sees as itself:
    a control, format or separator character, whitespace other than the plain space, or a
    default-ignorable code point; None when it holds none. Such a key cannot be typed on a
    command line (NUL), prints as something else (ESC sequences, a right-to-left override)
    or looks like another key (a zero-width space, a no-break space)."""
    if key.isascii() and key.isprintable():
        return None
    return next((i for i, ch in enumerate(key) if ch != " " and invisible(ch)), None)


def invisible(ch: str) -> bool:
    """Whitespace, a control or format character (zero-width space, joiners, BOM), a
    separator, or a default-ignorable code point (a Hangul filler): nothing a reader sees."""
    return (
        ch.isspace()
        or unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp")
        or ignorable(ord(ch))
    )


class _FoldTable(dict[int, str | None]):
    """str.translate's table for :func:`unicode_fold`, filled as characters are met:
    a default-ignorable code point (DEFAULT_IGNORABLE: zero-width space and joiners, soft
    hyphen, BOM, variation selectors, combining grapheme joiner, Hangul fillers...) goes,
    as does any other format character (Cf) or enclosing mark (keycaps), so
    'pass\\u200bword' == 'password' and a keycap '4\\ufe0f\\u20e3' is '4' (an erased text
    cannot come back with an invisible character slipped into a word); a decimal digit of
    any script (Nd: Arabic-Indic '٤', Devanagari '४') is its ASCII digit ('PIN ٤٨٢١' ==
    'PIN 4821'); Turkish dotless 'ı' is 'i' (casefold keeps it apart, so 'IŞIK' and 'ışık'
    would not meet); any other letter or digit (str.isalnum, what \\w means without '_')
    stays, as does a combining mark (Mn, Mc: Python's \\w leaves them out, and dropping
    them would fold Thai 'ไม่' (not) to 'ไม', Hindi 'हिन्दी' to 'ह न द'); anything else is a
    space. A translation, not a regex: a character class of every mark makes a regex
    ~10x slower (import folds every text).
    """

    LIMIT = 1 << 17  # characters kept (a few MB): a text of rarer ones is classified anew

    def __missing__(self, cp: int) -> str | None:
        ch = chr(cp)
        out: str | None = " "
        if ignorable(cp):
            out = None
        elif cp == 0x0131:  # dotless i
            out = "i"
        elif ch.isalnum():
            out = ch
            if unicodedata.category(ch) == "Nd":
                out = str(unicodedata.decimal(ch))
        else:
            cat = unicodedata.category(ch)
            if cat in ("Cf", "Me") or 0xE0100 <= cp <= 0xE01EF:
                out = None
            elif cat in ("Mn", "Mc"):
                out = ch
                _MARKS.add(ch)
        if len(self) < self.LIMIT:
            self[cp] = out
        return out


_MARKS: set[str] = set()  # the combining marks the table has kept (token starts, below)
_TABLE = _FoldTable()

_SCRIPT_TAGS = {"<super>": "sup", "<sub>": "sub"}


class _ScriptTable(dict[int, str]):
    """str.translate's table for a text NFKC would change, applied before NFKC: a
    superscript, subscript or vulgar fraction (compatibility decomposition tagged
    <super>, <sub>, <fraction>) becomes a word of its own that says what it was, so NFKC
    does not merge it with the digits next to it: '10²' is '10 sup2', not '102';
    '2½' is '2 1frac2', not '21 2'; 'H₂O' is 'h sub2 o'. Every other character is itself.
    """

    LIMIT = 1 << 16

    def __missing__(self, cp: int) -> str:
        ch = chr(cp)
        out = ch
        tag, _, rest = unicodedata.decomposition(ch).partition(" ")
        if rest and tag in ("<super>", "<sub>", "<fraction>"):
            chars = "".join(chr(int(h, 16)) for h in rest.split())
            if tag == "<fraction>":
                out = " " + "frac".join(chars.split("\u2044")) + " "
            else:
                out = f" {_SCRIPT_TAGS[tag]}{chars} "
        if len(self) < self.LIMIT:
            self[cp] = out
        return out


_SCRIPTS = _ScriptTable()


def _drop_dot_above_i(text: str) -> str:
    """U+0307 (combining dot above) on an 'i' dropped: 'İ' casefolds to 'i\u0307', and
    'İSTANBUL' must meet 'istanbul'. ``text`` is NFKC; so is the result."""
    out = []
    on_i = False
    for ch in unicodedata.normalize("NFD", text):
        if ch == "\u0307" and on_i:
            continue
        if not unicodedata.combining(ch):
            on_i = ch == "i"
        out.append(ch)
    return unicodedata.normalize("NFC", "".join(out))


# The combining accents of Latin, Greek and Cyrillic letters ("é" = "e" + U+0301).
_ACCENTS = re.compile("[\u0300-\u036f]")


def fold_accents(text: str) -> str:
    """Case and European accents folded, every script kept: 'Zoë' -> 'zoe', 'Дмитрий' ->
    'дмитрии', 'ﬁle' -> 'file', '東京' unchanged (search terms and names, not identity:
    :func:`unicode_fold` is the fold that decides what is the same statement)."""
    bare = _ACCENTS.sub("", unicodedata.normalize("NFKD", text))
    return unicodedata.normalize("NFC", bare).casefold()


def unicode_fold(text: str) -> str:
    """NFKC (a superscript, subscript or fraction first made a word of its own, see
    _ScriptTable), case-folded ('ß' == 'ss', 'Ｆｕｌｌ' == 'full'), invisible characters
    dropped, digits of every script made ASCII, dotless and dotted Turkish i made 'i',
    every run of other characters one space (see _FoldTable), NFKC again, stripped; a
    mark that follows no letter or digit (after a space or symbol) goes with the
    separators. On ASCII text it is the [a-z0-9] fold (casefold is lower() there, NFKC
    changes nothing). A fold folds to itself."""
    folded = nfkc(text).casefold().translate(_TABLE)
    # again: a mark an invisible character kept from its letter ('e\u200b\u0301') joins it
    folded = unicodedata.normalize("NFKC", folded)
    if "\u0307" in folded:  # 'İ' casefolded: 'i\u0307' (a loop only for a rarer mark order)
        folded = unicodedata.normalize("NFC", folded.replace("i\u0307", "i"))
        if "\u0307" in folded:
            folded = _drop_dot_above_i(folded)
    words = folded.split()
    if _MARKS and any(w[0] in _MARKS for w in words):
        marks = "".join(_MARKS)
        words = [k for k in (w.lstrip(marks) for w in words) if k]
    return " ".join(words)


# normalise() on ASCII bytes: every byte outside [a-z0-9] becomes a space, and split/join
# folds the runs: the same text, without a regex (import). Only for ASCII text: on UTF-8
# bytes it would fold every non-ASCII letter away ('Я пью чай.' == 'У меня 5 кошек.'
# minus the digits), so other text takes unicode_fold.
_FOLD = bytes(b if 0x61 <= b <= 0x7A or 0x30 <= b <= 0x39 else 0x20 for b in range(256))


def norm_sha256(text: str) -> str:
    """The statement key: sha256 of the folded text (records with the same key say the
    same thing, up to case, punctuation and spacing).

    A text that folds to nothing (only punctuation, symbols or emoji) is keyed by its
    exact content instead, so '👍' and '👎' are not one statement. Such a key cannot
    meet a folded one: a fold folds to itself, so no text that folds to nothing is one.
    A text that folds to its digits alone ('4821!', '#4821') needs no such case: its other
    characters are punctuation or symbols, which any fold drops, and a letter in any
    script now survives the fold, so 'Мой код 4821' and 'Номер 4821' no longer meet on
    '4821'. A sign, percent or currency is a word first (:func:`symbols_as_words`, store
    version 3): '-18' is not '18', '$5' is not '5' or '€5'; so is a sign after a letter
    or standing alone (store version 4): 'A+' is not 'A-', 'C++' not 'C', '<7' not '>7'.
    """
    return statement_key(text, fold=FOLD)


def statement_key(text: str, *, fold: int) -> str:
    if len(text) > ANALYSIS_WINDOW:
        return hashlib.sha256(normalise(text, fold=fold).encode()).hexdigest()
    words = symbols_as_words(text, fold=fold) if fold >= FOLD_SIGNED_NUMBERS else text
    if words.isascii():
        folded = b" ".join(words.lower().encode("ascii").translate(_FOLD).split())
    else:
        folded = unicode_fold(words).encode("utf-8", "surrogatepass")
    if not folded:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return hashlib.sha256(folded).hexdigest()


# Every match of _NEGATION contains one of these; in ASCII text, case-insensitive matching
# is matching the lowered text (outside ASCII, e.g. U+017F matches "s": the regex decides)
_NEGATION_CUES = ("no", "never", "neither", "stopped", "quit", "without", "anymore",
                  "unsubscribed", "n't", "cannot", "dont", "doesnt", "didnt", "isnt", "arent",
                  "wasnt", "werent", "cant", "wont", "couldnt", "wouldnt", "shouldnt",
                  "hasnt", "havent", "hadnt", "aint")  # fmt: skip


_NEGATION_LOWER = re.compile(_NEGATION.pattern)


def negates(text: str) -> bool:
    """A cheap rule hint for contradiction: does the statement negate?"""
    text = text[:ANALYSIS_WINDOW]
    if not text.isascii():
        return _NEGATION.search(text) is not None
    lowered = text.lower()
    for cue in _NEGATION_CUES:
        if cue in lowered:
            return _NEGATION_LOWER.search(lowered) is not None
    return False


def query_sha256(query: str) -> str:
    """What the access ledger keeps of a query: its hash, never its text."""
    return hashlib.sha256(query.encode("utf-8")).hexdigest()


# Offline cues for "a newer statement replaces an older one" (group.looks_like_update) and
# for a statement that only adds a fact (grounding rejects reading it as an update).
_UPDATE_CUE = re.compile(
    r"\b(now|no longer|any ?more|gave up|give up|given up|quit|stopped|switched|moved|changed|"
    r"instead|these days|used to|replaced|nowadays|not .{0,20} any ?more)\b",
    re.IGNORECASE,
)
_ADDITIVE_CUE = re.compile(  # "plus" only as a connective opening a clause ("Disney Plus")
    r"\b(also|too|as well|in addition|additionally|another|both)\b|(?:^|[.;:!?,]\s*)plus\b",
    re.IGNORECASE,
)


def reads_additive(text: str) -> bool:
    """ "also", "too", "as well" and no update word: the text adds a fact, it replaces none."""
    return _ADDITIVE_CUE.search(text) is not None and _UPDATE_CUE.search(text) is None
