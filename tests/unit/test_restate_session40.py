"""Restatements, session 40: an order of events ("then") is a fact; "then" as a time is not.

Each pair below is two statements that a merge or an online ``remember`` must keep apart
(``_neither``), or one statement said two ways (``_both``).
"""

from __future__ import annotations

import pytest

from tests.support.restating import both as _both
from tests.support.restating import neither as _neither


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Melanie painted a lake then hiked.", "Melanie hiked then painted a lake."),
        ("Melanie painted a lake, then hiked.", "Melanie hiked, then painted a lake."),
        ("She moved to Paris and then to Rome.", "She moved to Rome and then to Paris."),
        ("Fed cats then walked dogs.", "Walked dogs then fed cats."),
        ("Caroline studied law, and then taught.", "Caroline taught, and then studied law."),
    ],
)
def test_events_in_another_order_are_another_statement(a: str, b: str) -> None:
    """Attacks ``w == "then"`` in ``memlife/restate.py::_sides``: the words after a "then"
    that follows an event stand on its other side, so the order of two events is kept."""
    assert _neither(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("She lived in Paris back then.", "Back then she lived in Paris."),
        ("Since then she paints daily.", "She paints daily since then."),
        ("Then she moved to Paris.", "She then moved to Paris."),
        ("Melanie painted a lake then hiked.", "Melanie painted the lake, then hiked."),
    ],
)
def test_then_as_a_time_or_before_any_event_still_restates(a: str, b: str) -> None:
    """Attacks ``_THEN_AS_TIME`` and ``seen > 1`` in ``memlife/restate.py::_sides``: "back
    then", "since then", and a "then" with no event before it order nothing."""
    assert _both(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("She lived in Paris back then.", "Back then she lived in Paris."),
        ("Yesterday mom sent dad flowers.", "Mom sent dad flowers yesterday."),
        ("Every morning she drinks coffee.", "She drinks coffee every morning."),
        ("In spring moved to Lisbon.", "Moved to Lisbon in spring."),
    ],
)
def test_a_time_or_place_moved_to_the_front_still_restates(a: str, b: str) -> None:
    """Attacks ``_FRONTED`` in ``memlife/restate.py::_shape``: a clause opened by a time or
    a place reads its subject after it, so the phrase may stand at either end."""
    assert _both(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Yesterday mom sent dad flowers.", "Yesterday dad sent mom flowers."),
        ("In 2020 dogs chased cats.", "In 2020 cats chased dogs."),
    ],
)
def test_a_trade_behind_a_fronted_time_is_another_statement(a: str, b: str) -> None:
    """Attacks the loop that steps past a fronted phrase in ``memlife/restate.py::_shape``:
    the subject and objects after it are paired as in any clause."""
    assert _neither(a, b)
