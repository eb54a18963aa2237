"""One ``MEMLIFE_HOME`` serves one store without a file of its own (AgentCore without
``MEMLIFE_STATE``), as one state table does (state/dynamodb.py, ``check_store``).

Such a store keeps its journal, lease, review items, tombstones and quarantine snapshots
in ``$MEMLIFE_HOME/*.db``, keyed by record, actor and operation, not by store: a second
store on the same home would run the first one's retry queue, take its review items and
tombstones. The first writer (its lease, or a write to a side table or the tombstones)
binds the home to its store (the file ``store``, linked in whole so two writers cannot
both bind it); any other store is refused before it reads or writes that state. A SQLite store keeps all of these in its own file and never
reads this binding: many SQLite stores may share one home.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from memlife.settings import settings
from memlife.state import StateSettingsError

FILENAME = "store"
_EMPTY_WAITS = 100  # a binding file met empty is read again for up to a second


class HomeInUse(StateSettingsError):
    """The home serves another store: each store without a file needs a home of its own."""


def check_home(store: object, *, claim: bool = False) -> None:
    """Raise HomeInUse unless this home serves ``store``; ``claim`` (a writer, under its
    lease) binds a home that serves no store yet. Reads only otherwise."""
    from memlife.stores import same_store, store_identity

    identity = store_identity(getattr(store, "url", None))
    path = settings().home / FILENAME
    bound = _read(path)
    if bound is None and claim:
        path.parent.mkdir(parents=True, exist_ok=True)
        # written whole under a name of its own, then linked in: a reader sees no file or
        # the whole binding, and a link never replaces a file another writer linked first
        bound = _bind(path, identity)
    if bound is not None and not same_store(bound, identity):
        raise HomeInUse(
            f"MEMLIFE_HOME {settings().home} serves store {bound}, not {identity}: give each "
            "store without a file of its own a MEMLIFE_HOME of its own, or a state table "
            "(MEMLIFE_STATE)"
        )


def _bind(path: Path, identity: str) -> str | None:
    """Write the binding whole under a name of its own, then link it in: a reader sees no
    file or all of it, and a link never replaces a file another writer linked first. A
    filesystem without hard links gets an exclusive create and one write instead (a
    reader may then meet the file empty for a moment: _read waits for it)."""
    tmp = path.with_name(f".{FILENAME}.{uuid.uuid4().hex}")
    tmp.write_text(identity + "\n", encoding="utf-8")
    try:
        os.link(tmp, path)
        return identity
    except FileExistsError:  # another writer bound it first: read whom
        return _read(path)
    except OSError:  # no hard links here
        pass
    finally:
        tmp.unlink()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return _read(path)
    with os.fdopen(fd, "wb") as f:
        f.write((identity + "\n").encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    return identity


def _read(path: Path) -> str | None:
    for _ in range(_EMPTY_WAITS):
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        if text:
            return text
        time.sleep(0.01)  # created, not yet written (the exclusive-create path)
    raise HomeInUse(f"{path} names no store: remove it, or write the store it serves into it")
