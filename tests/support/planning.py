"""Planning in processes (pipeline.plan_in_processes): which parts the parent planned."""

from __future__ import annotations

import pytest

from memlife import pipeline


def parent_parts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Shard counts of the parts planned in this process from now on (children, spawned,
    are not patched): both processes planned when it is neither empty nor every shard."""
    sizes: list[int] = []
    process_batch = pipeline.process_batch

    def counted(ctx, store, shards, report, executor=None):  # noqa: ANN001, ANN202
        sizes.append(len(shards))
        return process_batch(ctx, store, shards, report, executor)

    monkeypatch.setattr(pipeline, "process_batch", counted)
    return sizes
