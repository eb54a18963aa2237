"""The memory's strategies: namespace templates and which actor a namespace belongs to.

A strategy's ``namespaceTemplates`` (older API: ``namespaces``) look like
``/strategies/{memoryStrategyId}/actors/{actorId}``. Records AgentCore extracts by itself
carry no ``actor_id`` metadata; the template that matches their namespace names the actor.

An AgentCore ``actorId`` may contain ``/`` (pattern ``ACTOR_ID_RE``), so ``{actorId}`` can
span several namespace segments, while the other slots (``{sessionId}``,
``{memoryStrategyId}``) never contain ``/``. When templates overlap (``/users/{actorId}``
and ``/users/{actorId}/facts`` both match ``/users/a/facts``) one reading is chosen,
always the same: the actor with the fewest ``/``, then the earliest template, then the
shortest actor. ``{memoryStrategyId}`` is read as the template's own strategy id, as the
service fills it, never as any segment. ``actor_owns`` uses the same reading, so a native record is listed under
exactly one actor and decoded with that actor.
"""

from __future__ import annotations

import re
from typing import Any

# botocore model, bedrock-agentcore 2024-02-28, shape ActorId (1..255 chars)
ACTOR_ID_RE = re.compile(
    r"[a-zA-Z0-9][a-zA-Z0-9\-_/]*(?::[a-zA-Z0-9\-_/]+)*[a-zA-Z0-9\-_/]*", re.ASCII
)
MAX_ACTOR_ID = 255
_SLOT = re.compile(r"(\{[a-zA-Z][a-zA-Z0-9]*\})")
# The slots the service fills with the strategy's own id (``{strategyId}``: older docs).
_STRATEGY_SLOTS = ("{memoryStrategyId}", "{strategyId}")


def _own(template: str, strategy_id: str) -> str:
    """The template as its strategy writes it: the strategy slot is that strategy's id.
    Read as any segment, a hostile actor id of one strategy (``u/sessions/x``) made a
    namespace another strategy's template reads as actor ``u``'s session ``x``."""
    for slot in _STRATEGY_SLOTS:
        template = template.replace(slot, strategy_id)
    return template


def _slots_re(template: str, actor_id: str | None) -> str:
    """A template fragment as regex source; ``{actorId}`` as the literal ``actor_id``."""
    rx = ""
    for part in _SLOT.split(template):
        if part == "{actorId}":
            if actor_id is None:
                raise ValueError("an actor slot needs an actor")
            rx += re.escape(actor_id)
        elif _SLOT.fullmatch(part):
            rx += "[^/]+"
        else:
            rx += re.escape(part)
    return rx


def _template_re(template: str, actor_id: str) -> re.Pattern[str]:
    """The template as a regex for one actor."""
    return re.compile(_slots_re(template, actor_id))


def _actors_in(template: str, namespace: str) -> list[str]:
    """Every actor id for which ``template`` yields ``namespace`` (usually one)."""
    head, _, rest = template.partition("{actorId}")
    head_re = re.compile(_slots_re(head, None))
    rest_fixed = re.compile(_slots_re(rest, None)) if "{actorId}" not in rest else None
    starts = [s for s in range(len(namespace) + 1) if head_re.fullmatch(namespace[:s])]
    ends = (
        {e for e in range(len(namespace) + 1) if rest_fixed.fullmatch(namespace[e:])}
        if rest_fixed is not None
        else None
    )
    out = []
    for s in starts:
        for e in range(s + 1, min(len(namespace), s + MAX_ACTOR_ID) + 1):
            actor = namespace[s:e]
            if not ACTOR_ID_RE.fullmatch(actor):
                continue
            if ends is not None:
                if e in ends:
                    out.append(actor)
            elif _template_re(rest, actor).fullmatch(namespace[e:]):
                out.append(actor)
    return out


class Strategies:
    """Read-only view of a GetMemory answer's ``strategies``."""

    def __init__(self, memory: dict[str, Any]):
        self._strategies: list[dict[str, Any]] = list(memory.get("strategies") or [])
        self.templates: list[tuple[str, str]] = [
            (s["strategyId"], t)
            for s in self._strategies
            for t in s.get("namespaceTemplates") or s.get("namespaces") or []
        ]
        self._actor_templates = [_own(t, sid) for sid, t in self.templates if "{actorId}" in t]
        self._actor_of: dict[str, str | None] = {}  # namespace -> its actor (few namespaces)

    def actor_owns(self, actor_id: str, namespace: str) -> bool:
        """Whether a strategy template puts ``namespace`` under ``actor_id`` (and under no
        other reading that ``actor_of`` prefers)."""
        return self.actor_of(namespace) == actor_id

    def actor_of(self, namespace: str) -> str | None:
        """The actor a template puts ``namespace`` under, None when no template matches.
        Overlapping readings: fewest ``/`` in the actor, earliest template, shortest."""
        if namespace in self._actor_of:
            return self._actor_of[namespace]
        candidates = [
            (actor.count("/"), i, len(actor), actor)
            for i, t in enumerate(self._actor_templates)
            for actor in _actors_in(t, namespace)
        ]
        found = min(candidates)[3] if candidates else None
        if len(self._actor_of) < 10_000:
            self._actor_of[namespace] = found
        return found

    def resolved_for(self, actor_id: str) -> list[str]:
        """The actor's namespaces that are fully determined by a template (no other slot)."""
        out = []
        for t in self._actor_templates:
            resolved = t.replace("{actorId}", actor_id)
            if "{" not in resolved:
                out.append(resolved)
        return out

    def open_prefixes(self, actor_id: str) -> list[str]:
        """For templates with a slot after the actor (``.../{actorId}/sessions/{sessionId}``):
        the actor's own part, up to the ``/`` before that slot, under which the store lists
        the namespaces the service filled in (``namespacePath``). A template whose open slot
        comes before the actor is not listed (it would page every actor's records)."""
        if not ACTOR_ID_RE.fullmatch(actor_id) or len(actor_id) > MAX_ACTOR_ID:
            return []  # no AgentCore actor: the service wrote nothing under it
        out = []
        for t in self._actor_templates:
            slot = next((m for m in _SLOT.finditer(t) if m.group() != "{actorId}"), None)
            if slot is None:
                continue
            head = t[: t.rfind("/", 0, slot.start()) + 1]
            if "{actorId}" in head and head.rfind("{actorId}") + len("{actorId}") < len(head):
                out.append(head.replace("{actorId}", actor_id))
        return sorted(set(out))

    def type_of(self, strategy_id: str | None) -> str | None:
        """The strategy's ``type`` (e.g. ``SEMANTIC``, ``EPISODIC``), if known."""
        return next(
            (s.get("type") for s in self._strategies if s.get("strategyId") == strategy_id),
            None,
        )
