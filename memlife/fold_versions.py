"""The statement keys of older store versions (memlife/stores/sqlite.py, STORE_VERSION).

A stored row's key is recomputed when its file is upgraded; an erasure tombstone's cannot
be (its text is gone). So a text is checked against tombstones under today's key and each
older one (``sqlite.tombstone_norms``): an erasure written then still refuses what it
refused. Only refusals read them: an erasure selects live records by today's key.
"""

from __future__ import annotations

from memlife.text import (
    FOLD_LEADING_POINT,
    FOLD_NO_SYMBOLS,
    FOLD_SIGNED_NUMBERS,
    FOLD_SIGNS,
    statement_key,
)


def legacy_norm_sha256(text: str) -> str:
    """Before store version 3: signs, percents and currencies dropped as punctuation."""
    return statement_key(text, fold=FOLD_NO_SYMBOLS)


def v3_norm_sha256(text: str) -> str:
    """Store version 3: a sign before a number, a percent and a currency as words, any
    other sign dropped ('A+' and 'A-' one key)."""
    return statement_key(text, fold=FOLD_SIGNED_NUMBERS)


def v4_norm_sha256(text: str) -> str:
    """Store version 4: every sign a word, a decimal point opening a number dropped as
    punctuation ('.5 mg' and '5 mg' one key)."""
    return statement_key(text, fold=FOLD_SIGNS)


def v5_norm_sha256(text: str) -> str:
    """Store version 5: a point between digits dropped as punctuation ('1.5 mg' and
    '1-5 mg' one key)."""
    return statement_key(text, fold=FOLD_LEADING_POINT)
