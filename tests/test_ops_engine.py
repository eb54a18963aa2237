"""The operations engine: one applier per operation kind, the same one for first pass and resume."""

from __future__ import annotations

import pytest

from memlife.apply import APPLIERS, applier_for
from memlife.journal import OpKind


@pytest.mark.parametrize("kind", list(OpKind))
def test_every_operation_kind_has_an_applier(kind: OpKind) -> None:
    applier = applier_for(kind)
    assert applier.kind is kind
    assert callable(applier.apply) and callable(applier.settle)


def test_registry_holds_nothing_but_known_kinds() -> None:
    applier_for(OpKind.delete)  # loads the registry
    assert set(APPLIERS) == set(OpKind)
