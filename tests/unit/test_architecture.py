"""Architecture rules for memlife/: no import circles (a test walks every import, lazy ones
included: a deferred import hides a circle, it does not remove it). Imports under
``if TYPE_CHECKING:`` are left out: they exist for annotations only, never at run time."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "memlife"


def module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = REPO / PACKAGE) -> dict[str, set[str]]:
    """module -> the memlife modules it imports (``from memlife.x import y`` counts as
    memlife.x.y when that is a module, else memlife.x)."""
    modules = {module_name(p, root.parent): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against this module's package
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (node.level - 1)]
                    base = ".".join([*pkg, base] if base else pkg)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            for t in targets:
                while t and t not in modules:  # import memlife.a.b -> nearest known module
                    t = t.rpartition(".")[0]
                # A module importing its own parent package is no circle: Python has always
                # loaded the parent first.
                if t and t != name and t.startswith(PACKAGE) and not name.startswith(t + "."):
                    graph[name].add(t)
    return graph


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def circles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.add(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    """None since issue 13 (test_the_walk_finds_a_circle shows the walk can see one)."""
    found = circles(import_graph())
    assert not found, f"import circle(s) in memlife/: {sorted(found)}"


def test_the_walk_finds_a_circle(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from memlife.sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("def f():\n    from memlife import c\n")
    (pkg / "c.py").write_text("import memlife.a\n")
    (pkg / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memlife.e\n"
    )
    (pkg / "e.py").write_text("import memlife.d\n")
    assert circles(import_graph(pkg)) == {("memlife.a", "memlife.c", "memlife.sub.b")}


def test_no_assert_outside_tests() -> None:
    """``python -O`` strips asserts: a check that matters raises a real error instead."""
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in [*(REPO / PACKAGE).rglob("*.py"), *(REPO / "flows").rglob("*.py")]
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert not found, f"assert in production code: {found}"


def global_random_calls(root: Path) -> list[str]:
    """Calls of the random module's own functions (``random.random()``, ``random.uniform``,
    ...): they draw from, and move, the global state a host application may have seeded."""
    found = []
    for path in sorted([*(root / PACKAGE).rglob("*.py"), *(root / "flows").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            f = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                and f.value.id == "random" and f.attr not in ("Random", "SystemRandom")
            ):  # fmt: skip
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_memlife_never_moves_the_global_random_state() -> None:
    """Jitter comes from memlife's own generators: an application that seeds ``random``
    for reproducible runs gets the same sequence with memlife in it."""
    assert not global_random_calls(REPO), global_random_calls(REPO)


def test_the_random_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (tmp_path / "flows").mkdir()
    (pkg / "bad.py").write_text("import random\nx = random.uniform(0, 1)\n")
    (pkg / "good.py").write_text("import random\nR = random.Random()\nx = R.uniform(0, 1)\n")
    assert global_random_calls(tmp_path) == [f"{PACKAGE}/bad.py:2"]


# A module over the 500-line budget says, near its top, why it is one module (a line with
# WHY_MARK in its docstring or a comment): the reason sits where the next editor reads it.
MAX_LINES = 500
WHY_MARK = "Why one module"
HEAD_LINES = 60  # where "near its top" ends


def long_modules_without_why(root: Path) -> list[str]:
    out = []
    for p in sorted([*(root / PACKAGE).rglob("*.py"), *(root / "flows").rglob("*.py")]):
        lines = p.read_text().splitlines()
        if len(lines) > MAX_LINES and not any(WHY_MARK in x for x in lines[:HEAD_LINES]):
            out.append(f"{p.relative_to(root)} ({len(lines)} lines)")
    return out


def test_modules_stay_short_or_say_why() -> None:
    silent = long_modules_without_why(REPO)
    assert not silent, f"over {MAX_LINES} lines: split, or say '{WHY_MARK}' at the top: {silent}"


def test_the_length_check_can_fail(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (tmp_path / "flows").mkdir()
    body = "\n".join(f"x{i} = {i}" for i in range(MAX_LINES + 1))
    (pkg / "long.py").write_text(body)
    (pkg / "short.py").write_text("x = 1\n")
    (pkg / "why.py").write_text(f'"""{WHY_MARK}: one idea."""\n' + body)
    assert long_modules_without_why(tmp_path) == [f"{PACKAGE}/long.py ({MAX_LINES + 1} lines)"]


def test_a_run_without_a_model_never_imports_the_anthropic_sdk() -> None:
    """Benchmark finding: the run key's consolidator name imported the consolidator module
    for a constant, and with it the anthropic SDK: 2.7 s of CPU and ~45 MB in every
    planning process of every run, model or not (a 100k dry run went from 4 s to 6-8 s)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from memlife.pipeline import RunConfig\n"
        "from memlife.run_start import run_behaviour\n"
        "run_behaviour(RunConfig(dry_run=False))\n"
        "print('anthropic' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "False", out.stderr[-2000:]
