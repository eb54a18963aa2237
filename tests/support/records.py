"""A valid record line as the contract (DESIGN.md) writes it, for tests to vary one field at a time."""

from __future__ import annotations


def good(rid: str, **kw: object) -> dict:
    d = {
        "id": rid,
        "actor_id": "u-1",
        "namespace": "/users/u-1/preferences",
        "memory_type": "semantic",
        "subject": "beverage",
        "content": f"Statement {rid}.",
        "owner": "team-personalization",
        "confidence": 0.9,
        "source": "user_stated",
        "created_at": "2026-01-02T10:00:00Z",
        "last_accessed_at": None,
        "access_count": 0,
        "last_verified_at": "2026-01-02T10:00:00Z",
        "expires_at": None,
        "retention_class": "standard",
        "status": "active",
        "provenance": {
            "source_event": "evt-17",
            "policy_version": None,
            "replaced_by": None,
            "supersedes": [],
            "content_sha256": None,
        },
    }
    d.update(kw)
    return d
