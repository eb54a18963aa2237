"""Audit 50m (session 50): mutation pass over audit 50e's settings fixes.

Each test kills a mutant of the session's code that the session's own tests let live
(named in each docstring); the code is the real settings reader and the real CLI.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import invoke


def test_a_password_holding_at_signs_in_a_url_that_does_not_parse_is_masked_whole() -> None:
    """Careless operator: the proxy's password holds a raw '@' (``p@ss``, not encoded as
    %40) and a stray bracket makes urlsplit refuse the URL. Must hold: no part of the
    password is printed. Kills the mutant whose ``_USERINFO`` password class excludes '@'
    (it masked ``p`` and printed ``ss@proxy``)."""
    from memlife.settings import without_password

    shown = without_password("https://user:hun@ter12@proxy]:8080/")
    assert "ter12" not in shown and "hun" not in shown
    assert shown == "https://user:****@proxy]:8080/"


def test_config_show_reads_an_empty_variable_as_the_default(home: Path) -> None:
    """A unit file's ``MEMLIFE_LEASE_TTL_SECONDS=`` (empty: settings read it as unset).
    Must hold: `config show` says the value is the default, as it is. Kills the mutant that
    says "environment" for any variable present (``var in os.environ``)."""
    var = "MEMLIFE_LEASE_TTL_SECONDS"
    code, out, err = invoke("config", "show", env={"COLUMNS": "200", var: ""})
    assert code == 0, err
    row = next(ln for ln in out.splitlines() if var in ln)
    assert "default" in row and "environment" not in row
