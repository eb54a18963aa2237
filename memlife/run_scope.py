"""A run's scope and store, checked before it starts, whatever the engine.

The CLI refused a store file that does not exist, an unrooted `--namespace` glob, and named
a scope that matched nothing (`scope_unmatched`); a run started through Prefect (a
deployment's parameters) got none of it: a mistyped store became a new empty file and a
"success" that processed nothing, every night, and a typo'd glob a quiet, clean night
(session 29 operator review). The pipeline checks both itself now.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memlife.errors import InputError
from memlife.stores.base import MemoryStore


def check_store_exists(url: str) -> None:
    """A SQLite store must be there: a run never creates one (an empty store is a night
    that processes nothing and reports success)."""
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :].split("?", 1)[0]
        if not Path(path).is_file():
            raise InputError(f"store {url}: no such file {path} (a run never creates a store)")


def check_namespaces(store: MemoryStore, namespaces: Sequence[str]) -> None:
    """A namespace glob is rooted ("/users/*/facts"), or matches a namespace the store holds
    as written without the "/" (stores from before the rule): any other matches nothing."""
    from memlife.namespaces import namespace_problem, stored_namespace_problem

    for glob in namespaces:
        problem = namespace_problem(glob)
        if problem and not (
            stored_namespace_problem(glob) is None and not unmatched_scope(store, [glob], [])
        ):
            raise InputError(
                f"namespace {glob!r} {problem}, or match a namespace stored without it"
            )


def unmatched_scope(
    store: MemoryStore, namespaces: Sequence[str], actors: Sequence[str]
) -> list[tuple[str, str]]:
    """(option, value) for each ``--namespace`` glob and ``--actor`` id of a scoped run
    that selects no shard of the store (within the rest of the scope), read before the run
    starts as its shard listing reads it. A scope that matched nothing used to end as a
    success with 0 records and no word of why: a typo looked like a quiet night."""
    if not namespaces and not actors:
        return []
    from memlife.namespaces import glob_match

    globs, ids = set(namespaces), set(actors)
    seen_globs: set[str] = set()
    seen_actors: set[str] = set()
    for actor in store.list_actors():
        if ids and actor not in ids:
            continue
        for ns in store.list_namespaces(actor):
            hits = {g for g in globs if glob_match(g, ns)}
            seen_globs |= hits
            if hits or not globs:
                seen_actors.add(actor)
        if seen_globs == globs and seen_actors == ids:
            break  # everything matched: the rest of the store need not be read
    return [("--namespace", g) for g in namespaces if g not in seen_globs] + [
        ("--actor", a) for a in actors if a not in seen_actors
    ]
