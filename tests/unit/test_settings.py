"""One Settings: every variable typed, defaulted, documented, shown masked, read lazily."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.errors import BAD_INPUT, SettingsError
from memlife.settings import PREFIX, Settings, settings
from memlife.stores import resolve_store_url

REPO = Path(__file__).resolve().parents[2]
VARIABLES = [var for var, _, _ in Settings().shown()]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for key in list(os.environ):
        if key.startswith(PREFIX) or key.startswith("ANTHROPIC_"):
            monkeypatch.delenv(key)
    return monkeypatch


def test_defaults_derive_from_home(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert settings().store_url == "sqlite:///.memlife/memlife.db"
    clean_env.setenv("MEMLIFE_HOME", str(tmp_path))
    assert settings().store_url == f"sqlite:///{tmp_path}/memlife.db"
    assert settings().receipts_url == f"file://{tmp_path}/receipts"
    assert resolve_store_url() == f"sqlite:///{tmp_path}/memlife.db"
    clean_env.setenv("MEMLIFE_STORE", "sqlite:///elsewhere.db")
    assert resolve_store_url() == "sqlite:///elsewhere.db"
    assert resolve_store_url("sqlite:///given.db") == "sqlite:///given.db"


def test_parsed_once_per_environment(clean_env: pytest.MonkeyPatch) -> None:
    assert settings() is settings()
    clean_env.setenv("MEMLIFE_TASK_RETRIES", "7")
    assert settings().task_retries == 7
    clean_env.setenv("MEMLIFE_TASK_RETRIES", "")  # empty counts as unset
    assert settings().task_retries == 3


@pytest.mark.parametrize(
    ("var", "value"),
    [("MEMLIFE_TASK_RETRIES", "many"), ("MEMLIFE_EMBED_THREADS", "0"), ("MEMLIFE_DEBUG", "maybe")],
)
def test_a_bad_value_names_its_variable(
    clean_env: pytest.MonkeyPatch, var: str, value: str
) -> None:
    clean_env.setenv(var, value)
    with pytest.raises(SettingsError, match=var) as info:
        settings()
    assert info.value.exit_code == BAD_INPUT


def test_config_show_masks_secrets(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from memlife.cli import app

    secret = "sk-ant-api03-THISISSECRET"
    clean_env.setenv("ANTHROPIC_API_KEY", secret)
    clean_env.setenv("MEMLIFE_HOME", str(tmp_path))
    clean_env.setenv("MEMLIFE_EMBED_THREADS", "2")
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    assert "SECRET" not in result.output
    import json

    shown = json.loads(result.output)
    assert set(shown) == set(VARIABLES)
    assert shown["ANTHROPIC_API_KEY"] == "**** (set)"
    assert shown["MEMLIFE_EMBED_THREADS"] == 2  # typed, as the setting is
    assert shown["MEMLIFE_STORE"] == f"sqlite:///{tmp_path}/memlife.db"
    assert shown["MEMLIFE_SERVICE_IDENTITY"] is None


def test_readme_lists_every_setting() -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("### Settings", 1)[1].split("\n#", 1)[0]
    missing = [var for var in VARIABLES if f"`{var}`" not in section]
    assert not missing, f"README 'Settings' lacks {missing}"


def _import_time_env_reads(path: Path) -> list[int]:
    """Lines where a module reads os.environ / os.getenv while it is being imported:
    module and class bodies, decorators and default values; function bodies are not."""
    tree = ast.parse(path.read_text())
    hits: list[int] = []

    def scan(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for part in [*getattr(node, "decorator_list", []), *node.args.defaults]:
                scan(part)
            for default in node.args.kw_defaults:
                if default is not None:
                    scan(default)
            return
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
            if isinstance(node.value, ast.Name) and node.value.id == "os":
                hits.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            scan(child)

    scan(tree)
    return hits


def test_nothing_reads_the_environment_at_import_time() -> None:
    found = {}
    for path in [*(REPO / "memlife").rglob("*.py"), *(REPO / "flows").rglob("*.py")]:
        if lines := _import_time_env_reads(path):
            found[str(path.relative_to(REPO))] = lines
    assert not found, f"environment read at import time: {found}"


def test_the_scan_catches_an_import_time_read(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nX = os.environ.get('A')\ndef f(y=os.getenv('B')):\n    return os.environ['C']\n"
    )
    assert _import_time_env_reads(bad) == [2, 3]


def test_config_show_says_a_setting_left_alone_takes_its_default(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Session 29 walk-through: a setting not set read "(unset)", as if nothing applied."""
    from memlife.cli import app

    clean_env.setenv("MEMLIFE_HOME", str(tmp_path))
    clean_env.setenv("COLUMNS", "200")
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 0, result.output
    row = next(ln for ln in result.output.splitlines() if "MEMLIFE_EMBED_THREADS" in ln)
    assert "(default)" in row and "(unset)" not in result.output
