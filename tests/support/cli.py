"""The CLI run in-process, as the CLI tests call it."""

from __future__ import annotations

from typer.testing import CliRunner

from memlife.cli import app


def invoke(
    *args: str, input: str | None = None, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``memlife ARGS``; an exception other than an exit is
    raised, never read as a failing exit code."""
    res = CliRunner().invoke(app, list(args), input=input, env=env)
    if res.exception and not isinstance(res.exception, SystemExit):
        raise res.exception
    return res.exit_code, res.stdout, res.stderr
