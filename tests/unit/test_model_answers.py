"""The answer book (memlife/consolidate/answers.py): who reads, who takes, how long, and
what erasure leaves. Real SQLite files (the caches' own), no model."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memlife.consolidate.answers import KEEP_DAYS, AnswerBook, answer_book, request_digest
from memlife.derived import forget_for
from memlife.embed_cache import EmbeddingCache

OUTPUT = {"summary": "Has a dog named Rex.", "claims": ["Has a dog named Rex."],
          "confidence": 0.9, "source_ids": ["a", "b"]}  # fmt: skip


@pytest.fixture()
def caches(home: Path) -> tuple[EmbeddingCache, EmbeddingCache]:
    """The dry runs' file ($MEMLIFE_HOME/embeddings.db) and an apply run's (the store's)."""
    home.mkdir()
    dry = EmbeddingCache(path=home / "embeddings.db")
    applied = EmbeddingCache(path=home / "store-cache.db")
    return dry, applied


def dry_book(cache: EmbeddingCache) -> AnswerBook:
    book = answer_book(cache, dry_run=True)
    assert book is not None
    return book


def test_the_apply_run_reads_the_dry_runs_file_and_drops_what_it_refused(
    caches: tuple[EmbeddingCache, EmbeddingCache],
) -> None:
    dry, applied = caches
    book = dry_book(dry)
    book.keep("d1", ("u-1", "/users/u-1/facts"), "claude-x", OUTPUT)
    found = book.find("d1")
    assert found is not None and found.output == OUTPUT and found.model == "claude-x"
    book.drop("d1")  # a dry run drops nothing
    apply_book = answer_book(applied, dry_run=False)
    assert apply_book is not None
    apply_book.keep("d2", ("u-1", "/users/u-1/facts"), "claude-x", OUTPUT)  # keeps nothing
    assert apply_book.find("d2") is None
    for _ in range(2):  # from the dry runs' file, as often as asked (a crashed run's rerun)
        assert apply_book.find("d1") is not None
    apply_book.drop("d1")  # refused by the apply run's checks
    assert apply_book.find("d1") is None and book.find("d1") is None


def test_an_answer_older_than_the_keeping_time_is_not_read(
    caches: tuple[EmbeddingCache, EmbeddingCache],
) -> None:
    dry, _ = caches
    book = dry_book(dry)
    book.keep("old", ("u-1", "/users/u-1/facts"), "m", OUTPUT)
    assert dry.connection is not None
    dry.connection.execute(
        "UPDATE model_answers SET answered_at=?", (time.time() - KEEP_DAYS * 86400 - 60,)
    )
    assert book.find("old") is None
    book.keep("new", ("u-1", "/users/u-1/facts"), "m", OUTPUT)
    assert answer_book(dry, dry_run=True) is not None  # the next run's book clears it
    assert [r[0] for r in dry.connection.execute("SELECT digest FROM model_answers")] == ["new"]


def test_forgetting_a_shard_takes_its_answers_and_no_others(
    caches: tuple[EmbeddingCache, EmbeddingCache],
) -> None:
    dry, _ = caches
    book = dry_book(dry)
    book.keep("a", ("u-1", "/users/u-1/facts"), "m", OUTPUT)
    book.keep("b", ("u-1", "/users/u-1/prefs"), "m", OUTPUT)
    book.keep("c", ("u-2", "/users/u-2/facts"), "m", OUTPUT)
    assert forget_for(dry, {("u-1", "/users/u-1/facts")}) == 1
    assert book.find("a") is None
    assert book.find("b") is not None and book.find("c") is not None


def test_forgetting_creates_nothing_where_nothing_was_kept(home: Path) -> None:
    home.mkdir()
    cache = EmbeddingCache(path=home / "embeddings.db")
    assert forget_for(cache, {("u-1", "/users/u-1/facts")}) == 0
    assert cache.connection is not None
    names = {r[0] for r in cache.connection.execute("SELECT name FROM sqlite_master")}
    assert "model_answers" not in names


def test_a_damaged_row_is_a_miss(caches: tuple[EmbeddingCache, EmbeddingCache]) -> None:
    dry, _ = caches
    book = dry_book(dry)
    book.keep("d", ("u-1", "/users/u-1/facts"), "m", OUTPUT)
    assert dry.connection is not None
    dry.connection.execute("UPDATE model_answers SET output='{not json'")
    assert book.find("d") is None


def test_no_book_without_a_sqlite_file() -> None:
    class Remote:  # a cache kept in DynamoDB has no connection
        connection = None

    assert answer_book(Remote(), dry_run=True) is None
    assert answer_book(None, dry_run=False) is None


def test_the_digest_is_the_whole_request() -> None:
    base = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "a"}]}
    assert request_digest(base) == request_digest(dict(reversed(base.items())))
    for change in ({"model": "n"}, {"max_tokens": 11},
                   {"messages": [{"role": "user", "content": "b"}]}):  # fmt: skip
        assert request_digest({**base, **change}) != request_digest(base)
