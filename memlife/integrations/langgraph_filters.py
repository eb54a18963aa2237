"""LangGraph's filter semantics for MemlifeStore.search, as InMemoryStore reads them:
equality (a tuple equals the list it holds item by item), nested dicts, the comparison
operators $eq/$ne/$gt/$gte/$lt/$lte, and namespace match conditions."""

from __future__ import annotations

from typing import Any

from langgraph.store.base import MatchCondition


def matches(value: Any, expected: Any) -> bool:
    """LangGraph's filter semantics: equality, nested dicts, and $eq/$ne/$gt/$gte/$lt/$lte."""
    if isinstance(expected, dict):
        if any(k.startswith("$") for k in expected):
            return all(_operator(value, op, arg) for op, arg in expected.items())
        return isinstance(value, dict) and all(
            matches(value.get(k), v) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):  # as InMemoryStore: item by item, a tuple a list
        return (
            isinstance(value, list | tuple)
            and len(value) == len(expected)
            and all(matches(v, e) for v, e in zip(value, expected, strict=True))
        )
    return bool(value == expected)


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return bool(value == arg)
    if op == "$ne":
        return bool(value != arg)
    if value is None:
        return False
    compare = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    if op not in compare:
        raise ValueError(f"unsupported filter operator {op!r}")
    return compare[op](float(value), float(arg))


def ns_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    else:
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    return all(p == "*" or n == p for n, p in pairs)
