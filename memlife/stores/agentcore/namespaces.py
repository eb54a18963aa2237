"""The memory's strategies: namespace templates and which actor a namespace belongs to.

A strategy's ``namespaceTemplates`` (older API: ``namespaces``) look like
``/strategies/{memoryStrategyId}/actors/{actorId}``. Records AgentCore extracts by itself
carry no ``actor_id`` metadata; the template that matches their namespace names the actor.
"""

from __future__ import annotations

import re
from typing import Any


def _template_re(template: str, actor_id: str | None) -> re.Pattern[str]:
    """The template as a regex; ``actor_id`` None captures the actor as group ``actor``."""
    rx = ""
    for part in re.split(r"(\{[a-zA-Z][a-zA-Z0-9]*\})", template):
        if part == "{actorId}":
            rx += re.escape(actor_id) if actor_id is not None else "(?P<actor>[^/]+)"
        elif part.startswith("{"):
            rx += "[^/]+"
        else:
            rx += re.escape(part)
    return re.compile(rx)


class Strategies:
    """Read-only view of a GetMemory answer's ``strategies``."""

    def __init__(self, memory: dict[str, Any]):
        self._strategies: list[dict[str, Any]] = list(memory.get("strategies") or [])
        self.templates: list[tuple[str, str]] = [
            (s["strategyId"], t)
            for s in self._strategies
            for t in s.get("namespaceTemplates") or s.get("namespaces") or []
        ]
        self._actor_templates = [t for _, t in self.templates if "{actorId}" in t]

    def actor_owns(self, actor_id: str, namespace: str) -> bool:
        """Whether a strategy template puts ``namespace`` under ``actor_id``."""
        return any(_template_re(t, actor_id).fullmatch(namespace) for t in self._actor_templates)

    def actor_of(self, namespace: str) -> str | None:
        for t in self._actor_templates:
            if m := _template_re(t, None).fullmatch(namespace):
                return m.group("actor")
        return None

    def resolved_for(self, actor_id: str) -> list[str]:
        """The actor's namespaces that are fully determined by a template (no other slot)."""
        out = []
        for t in self._actor_templates:
            resolved = t.replace("{actorId}", actor_id)
            if "{" not in resolved:
                out.append(resolved)
        return out

    def type_of(self, strategy_id: str | None) -> str | None:
        """The strategy's ``type`` (e.g. ``SEMANTIC``, ``EPISODIC``), if known."""
        return next(
            (s.get("type") for s in self._strategies if s.get("strategyId") == strategy_id),
            None,
        )
