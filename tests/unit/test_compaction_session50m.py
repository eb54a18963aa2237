"""Audit 50m (session 50): mutation pass over audit 50d's server-tool-result handling
(memlife/online/history.py: ``_without_media``, ``_visible``'s text data).

Each test kills a mutant that the session's tests let live; the estimate and the
summariser's transcript are the real ones (no model needed).
"""

from __future__ import annotations

from memlife.online.compaction import EstimateTokenCounter
from memlife.online.history import render_transcript
from tests.support.messages import U
from tests.unit.test_compaction_session50d import PAGE, _fetched, _pdf, _text_page


def test_a_fetched_text_page_costs_its_text() -> None:
    """A web_fetch result holding a long plain-text page: the model reads the page, so the
    estimate grows with it (a history that does not fit must be compacted). Kills the
    mutant of ``_without_media`` that dropped text documents to their kind alone (the
    page cost nothing: a 200,000-character fetch read as fitting any budget)."""
    est = EstimateTokenCounter()
    short = est.count([U("Fetch the prices."), _fetched(_text_page())])
    page = _text_page()
    page["source"]["data"] = PAGE * 2_000  # ~150,000 characters
    long = est.count([U("Fetch the prices."), _fetched(page)])
    assert long - short > 20_000


def test_a_fetched_pdfs_base64_stays_out_of_the_summarisers_transcript() -> None:
    """A web_fetch result holding a PDF (base64 ``data`` in its source). Must hold: the
    summariser is shown no base64 (opaque bytes, as encrypted content), while a fetched
    text page's data is shown. Kills the mutant of ``_visible`` that kept any string
    ``data`` (not only a plain-text source's)."""
    pdf = _pdf(pages=1, size=3_000)
    shown = render_transcript([U("Read the terms."), _fetched(pdf)])
    assert pdf["source"]["data"][:40] not in shown
    assert PAGE in render_transcript([U("Fetch the prices."), _fetched(_text_page())])
