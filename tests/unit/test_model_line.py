"""What `memlife run` says about the model (cli/run.py::model_line), for each kind of run."""

from __future__ import annotations

from typing import Any

from memlife.cli.run import model_line
from memlife.pipeline import RunConfig

ESTIMATE: dict[str, Any] = {
    "model": {
        "apply_consolidator": "anthropic:claude",
        "estimated_calls": 12,
        "estimated_input_tokens": 3400,
    }  # fmt: skip
}


def test_a_dry_run_that_did_not_call_the_model_says_what_an_apply_run_would() -> None:
    line = model_line(ESTIMATE, RunConfig(dry_run=True))
    assert line is not None
    assert "not called (dry run)" in line and "about 12 calls" in line and "3,400" in line


def test_a_dry_run_with_the_model_prints_no_estimate_line() -> None:
    """--with-model called the model: its calls are in the table, the 'would make about'
    estimate would contradict them."""
    assert model_line(ESTIMATE, RunConfig(dry_run=True, with_model=True)) is None


def test_an_apply_run_prints_no_estimate_and_names_reused_answers() -> None:
    assert model_line(ESTIMATE, RunConfig(dry_run=False)) is None
    reused = {"model": {"calls": 3, "answers_reused": 9}}
    line = model_line(reused, RunConfig(dry_run=False))
    assert line is not None and "3 calls" in line and "9 answers reused" in line


def test_a_dry_run_without_a_key_says_an_apply_run_consolidates_extractively() -> None:
    result = {"model": {"apply_consolidator": "extractive", "estimated_calls": 12}}
    line = model_line(result, RunConfig(dry_run=True))
    assert line is not None and "extractively" in line and "ANTHROPIC_API_KEY" in line
