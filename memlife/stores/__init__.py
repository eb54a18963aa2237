"""Stores: the MemoryStore protocol and its backends, opened by URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

from memlife.settings import DEFAULT_AGENTCORE_REGION, aws_region, settings, store_url_problem
from memlife.stores.base import BatchResult, MemoryStore, Page, iter_shard

DEFAULT_STORE_URL = "sqlite:///.memlife/memlife.db"

__all__ = [
    "BatchResult",
    "MemoryStore",
    "Page",
    "iter_shard",
    "open_store",
    "resolve_store_url",
    "store_identity",
]


def resolve_store_url(url: str | None = None) -> str:
    """Explicit URL, else $MEMLIFE_STORE, else the embedded default under $MEMLIFE_HOME."""
    return url or settings().store_url


def store_identity(url: str | None = None) -> str:
    """Which store a URL names, independent of how it is reached (endpoints, credentials).

    ``sqlite:`` + the file's absolute path; ``agentcore://MEMORY_ID@REGION``. Part of the
    run key, so two stores run at the same cutoff never share a run id or receipt path.
    """
    url = resolve_store_url(url)
    parsed = urlparse(url)
    if parsed.scheme == "sqlite" and url.startswith("sqlite:///"):
        return "sqlite:" + str(Path(url[len("sqlite:///") :]).resolve())
    if parsed.scheme == "agentcore":
        region = aws_region(parse_qs(parsed.query).get("region", [""])[-1])
        return f"agentcore://{parsed.netloc}@{region or DEFAULT_AGENTCORE_REGION}"
    return url.split("?")[0]


def same_store(bound: str, identity: str) -> bool:
    """Whether ``bound``, an identity this or an earlier memlife wrote (a home's or state
    table's binding, a manifest), names the store ``identity`` names. Before session 49
    ``agentcore://M`` was named ``agentcore://M@`` and opened us-east-1 whatever the
    environment said: that is ``agentcore://M@us-east-1`` (audit 49m1: its home and state
    table refused it after the upgrade)."""

    def read(name: str) -> str:
        legacy = name.startswith("agentcore://") and name.endswith("@")
        return name + DEFAULT_AGENTCORE_REGION if legacy else name

    return read(bound) == read(identity)


def open_store(url: str | None = None) -> MemoryStore:
    """``sqlite:///relative/path.db``, ``sqlite:////abs/path.db`` or ``agentcore://MEMORY_ID?region=..``."""
    url = resolve_store_url(url)
    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        from memlife.stores.sqlite import SqliteStore

        problem = store_url_problem(url)  # the CLI's check: no path, a '?' or '#' in it
        if problem:
            raise ValueError(f"store URL {url!r}: {problem}")
        return SqliteStore(url[len("sqlite:///") :])
    if scheme == "agentcore":
        from memlife.stores.agentcore import AgentCoreStore

        return AgentCoreStore.from_url(url)
    raise ValueError(
        f"store URL {url!r}: unknown scheme {scheme!r} (use sqlite:// or agentcore://)"
    )
