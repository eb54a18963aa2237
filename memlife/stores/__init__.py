"""Stores: the MemoryStore protocol and its backends, opened by URL."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from memlife.stores.base import BatchResult, MemoryStore, Page, iter_shard

DEFAULT_STORE_URL = "sqlite:///.memlife/memlife.db"

__all__ = ["BatchResult", "MemoryStore", "Page", "iter_shard", "open_store", "resolve_store_url"]


def resolve_store_url(url: str | None = None) -> str:
    """Explicit URL, else $MEMLIFE_STORE, else the embedded default under $MEMLIFE_HOME."""
    if url or os.environ.get("MEMLIFE_STORE"):
        return url or os.environ["MEMLIFE_STORE"]
    home = os.environ.get("MEMLIFE_HOME")
    return f"sqlite:///{home}/memlife.db" if home else DEFAULT_STORE_URL


def open_store(url: str | None = None) -> MemoryStore:
    """``sqlite:///relative/path.db``, ``sqlite:////abs/path.db`` or ``agentcore://MEMORY_ID?region=..``."""
    url = resolve_store_url(url)
    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        from memlife.stores.sqlite import SqliteStore

        path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
        if not path:
            raise ValueError(f"store URL {url!r}: expected sqlite:///path/to/file.db")
        return SqliteStore(path)
    if scheme == "agentcore":
        from memlife.stores.agentcore import AgentCoreStore  # type: ignore[import-not-found]

        return AgentCoreStore.from_url(url)
    raise ValueError(f"store URL {url!r}: unknown scheme {scheme!r} (use sqlite:// or agentcore://)")
