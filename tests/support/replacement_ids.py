"""Replacement ids are keyed by their store's run secret (group_plan.consolidation_key,
audit 50c): two stores seeded alike write the same replacements under different ids.
Runs on two stores compare what an id means instead: each replacement is named by what it
supersedes (its members' ids, sorted; a replacement among them by its own name), and
everything else is compared as it is."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REPLACEMENT = re.compile(r"r-[0-9a-f]{28}")


def names(groups: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Each replacement id -> ``r<member,...>``. Two replacements of the same members in
    one store are refused (one group, one replacement): they would compare as one."""
    members = {rid: sorted(ms) for rid, ms in groups.items()}
    out: dict[str, str] = {}

    def name(rid: str, seen: frozenset[str]) -> str:
        if rid not in members or rid in seen:
            return rid
        if rid not in out:
            out[rid] = "r<" + ",".join(sorted(name(m, seen | {rid}) for m in members[rid])) + ">"
        return out[rid]

    for rid in members:
        name(rid, frozenset())
    twice = {n for n in out.values() if list(out.values()).count(n) > 1}
    assert not twice, f"two replacements of the same members: {sorted(twice)}"
    return out


def of_snapshot(snap: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Names of a store's replacements (tests/support/lifecycle.snapshot)."""
    return names({rid: rec["provenance"]["supersedes"] for rid, rec in snap.items()
                  if REPLACEMENT.fullmatch(rid)})  # fmt: skip


def of_receipts(receipts: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Names of the replacements operation receipts name (deleted ones included)."""
    groups: dict[str, set[str]] = {}
    for o in receipts:
        if o.get("action") == "supersede" and o.get("replacement_id"):
            groups.setdefault(o["replacement_id"], set()).add(o["record_id"])
    return names(groups)


def renamed(value: Any, ids: Mapping[str, str]) -> Any:
    """``value`` with each replacement id of ``ids`` (as keys, values, or inside a string)
    given its name; a list holding one is sorted (it was in the order of the ids). An id
    ``ids`` does not name stays as it is, and so still compares."""
    if isinstance(value, str):
        return REPLACEMENT.sub(lambda m: ids.get(m.group(0), m.group(0)), value)
    if isinstance(value, Mapping):
        return {renamed(k, ids): renamed(v, ids) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(renamed(v, ids) for v in value)
    if isinstance(value, list):
        out = [renamed(v, ids) for v in value]
        changed = any(isinstance(v, str) and REPLACEMENT.search(v) for v in value)
        return sorted(out) if changed else out
    return value


def same_store(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Any, Any]:
    """Two snapshots, each with its replacements named: compare with ``==``."""
    return renamed(a, of_snapshot(a)), renamed(b, of_snapshot(b))
