"""What a dry run says an apply run would change: one set of figures for the CLI table, the
Markdown artifact and the report page, net of what the apply run's gate would withhold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def would_change(summary: Mapping[str, Any]) -> list[tuple[str, int]]:
    """A dry run's "an apply run would ..." figures (the CLI table, the Markdown artifact and
    this page): net of what the gate would withhold. Without an evaluation set an apply run
    withholds every judgement in the enforced namespaces, so counting them as changes would
    promise what the next apply run will not do (its gate line alone said so); with one,
    what its verdict blocks (quarantined deletions, undone supersedes) or cannot see
    (GATE_UNCOVERED) is held back the same way."""
    counts, other = summary.get("counts", {}), summary.get("other_counts", {})
    gate = summary.get("gate") or {}
    unjudged = not gate.get("configured", True)  # no set: withheld, counted (run_commit)
    # with a set: what its verdict blocks or cannot see (run_commit.held_back)
    kept = {} if unjudged else gate.get("held_back") or {}
    groups_out = int(gate.get("withheld_groups", 0) if unjudged else kept.get("groups", 0))
    deletes_out = int(gate.get("withheld_deletions", 0) if unjudged else kept.get("deletions", 0))
    groups = other.get("consolidation_proposed", 0)
    merges = other.get("merged_duplicates", 0), other.get("contradictions_resolved", 0)
    if groups_out and groups_out >= groups:  # every group withheld: none of their merges
        merges = 0, 0
    rows = [
        ("consolidate (groups)", max(0, groups - groups_out)),
        # of the groups that go ahead, or of all when only some are withheld (an upper bound)
        ("merge duplicates", merges[0]),
        ("supersede contradicted", merges[1]),
        (
            "delete",
            max(
                0,
                counts.get("delete_expired", 0)
                + counts.get("delete_pending", 0)
                - deletes_out
                - other.get("proposed_deletions", 0),
            ),  # rollout: only proposed
        ),  # fmt: skip
        ("left for review", counts.get("review", 0) - other.get("review_answered", 0)),
        ("held", counts.get("hold", 0)),
    ]
    if groups_out or deletes_out:
        why = "withhold, no eval set" if unjudged else "hold back, gate"
        rows += [(f"{why}: groups", groups_out), (f"{why}: deletions", deletes_out)]
    return rows
