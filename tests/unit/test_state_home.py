"""One MEMLIFE_HOME serves one store without a file of its own (AgentCore without
MEMLIFE_STATE): a second store on the same home would run the first one's retry queue and
take its review items, tombstones and inferred subjects. The first writer binds the home."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memlife import tombstones
from memlife.inferred import InferredSubjects
from memlife.journal import open_journal
from memlife.lease import for_store
from memlife.review_queue import ReviewQueue
from memlife.state.home import HomeInUse, check_home


class NoFileStore:
    """A store whose state lives under MEMLIFE_HOME (AgentCore-like): no SQLite file."""

    connection = None

    def __init__(self, memory_id: str) -> None:
        self.url = f"agentcore://{memory_id}?region=eu-west-1"


def test_the_first_writer_binds_the_home_and_another_store_is_refused(home: Path) -> None:
    a, b = NoFileStore("mem-A"), NoFileStore("mem-B")
    open_journal(b)  # a reader before any writer binds nothing
    assert not (home / "store").exists()
    with for_store(a, "run-1", "nightly"):
        pass
    assert (home / "store").read_text().strip() == "agentcore://mem-A@eu-west-1"
    for opens in (
        open_journal,
        InferredSubjects.for_store,
        ReviewQueue.for_store,
        tombstones.listing,  # review of session 19: tombstones were read and written
        lambda s: tombstones.add(s, []),
        lambda s: for_store(s, "run-2", "nightly"),
    ):
        with pytest.raises(
            HomeInUse, match="serves store agentcore://mem-A@eu-west-1, not agentcore://mem-B"
        ):
            opens(b)
    open_journal(a)  # the bound store goes on; the same memory reached another way too
    other_way = NoFileStore("mem-A")
    other_way.url += "&endpoint_url=http://127.0.0.1:9"
    check_home(other_way, claim=True)


@pytest.mark.parametrize("links", [True, False], ids=["hard-links", "no-hard-links"])
def test_two_writers_binding_one_home_at_once_leave_one_binding(
    home: Path, links: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of session 19: on a filesystem that refuses hard links every lease failed
    with a raw PermissionError; the exclusive-create path must hold the race as well."""
    if not links:

        def refuse(src: object, dst: object) -> None:
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr("memlife.state.home.os.link", refuse)
    home.mkdir(parents=True, exist_ok=True)
    stores = [NoFileStore(f"mem-{i}") for i in range(8)]
    start = threading.Barrier(len(stores))
    won: list[str] = []
    refused: list[str] = []

    def claim(store: NoFileStore) -> None:
        start.wait()
        try:
            check_home(store, claim=True)
            won.append(store.url)
        except HomeInUse:
            refused.append(store.url)

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 7
    assert won[0].split("?")[0] in (home / "store").read_text().replace("@eu-west-1", "")


def test_sqlite_stores_share_a_home_and_never_bind_it(home: Path, tmp_path: Path) -> None:
    from memlife.stores.sqlite import SqliteStore

    for name in ("one.db", "two.db"):
        with SqliteStore(tmp_path / name) as store, for_store(store, "run", "nightly"):
            open_journal(store)
            InferredSubjects.for_store(store)
    assert not (home / "store").exists()


def test_the_cli_names_both_stores_and_exits_2(home: Path) -> None:
    from memlife.cli import one_line_error  # the CLI's one error path

    check_home(NoFileStore("mem-A"), claim=True)
    with pytest.raises(HomeInUse) as caught:
        open_journal(NoFileStore("mem-B"))
    text, code = one_line_error(caught.value)
    assert code == 2 and "mem-A" in text and "mem-B" in text and "MEMLIFE_STATE" in text


def test_a_writer_without_a_lease_binds_the_home_too(home: Path) -> None:
    """Review of session 19: only a lease bound the home, so `remember` or an import of
    store B wrote side tables into an unbound home that store A's lease then took over."""
    a, b = NoFileStore("mem-A"), NoFileStore("mem-B")
    InferredSubjects.for_store(a, create=False)  # a dry run creates nothing, binds nothing
    assert not (home / "store").exists()
    InferredSubjects.for_store(b).put("u", "/n", {"r-1": "subject of b ~000000"}, "remember")
    with pytest.raises(HomeInUse, match="serves store agentcore://mem-B"):
        for_store(a, "run-1", "nightly")
