"""``backline new-plugin``: the package it writes, installed and tested as a user would.

The generated background is as short as the README's example; the two longer shapes
(interruptible work, a task of its own) are in ``patterns.py``, and the generated
package's own tests cover all three.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from backline.cli import make_cli
from backline.plugins import create_plugin

from .conftest import SUBPROCESS_TIMEOUT, clean_env, plugins_json, run_backline, unique

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def uninstall_after(overlay_python: Path) -> Iterator[list[str]]:
    """Distributions to uninstall from the overlay venv at the end, whatever happens."""
    dists: list[str] = []
    yield dists
    if dists:
        subprocess.run(
            [str(overlay_python), "-m", "pip", "uninstall", "-y", *dists],
            capture_output=True,
            env=clean_env(),
            timeout=SUBPROCESS_TIMEOUT,
            check=False,
        )


def _background_lines(code: str, name: str) -> int:
    """How many lines the function ``name`` of ``code`` spans, decorator included."""
    tree = ast.parse(code)
    (node,) = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == name]
    first = min(d.lineno for d in node.decorator_list)
    assert node.end_lineno is not None
    return node.end_lineno - first + 1


def _readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Write a background plugin", 1)[1].split("```python\n", 1)[1]
    return block.split("```", 1)[0]


def test_the_generated_background_is_as_short_as_the_readme_example(tmp_path: Path) -> None:
    root, _ = create_plugin("weather", tmp_path)
    source = (root / "src/backline_weather/plugin.py").read_text()
    readme = _background_lines(_readme_example(), "weather")
    # Two lines more than the README's: the placeholder for the real work, the final state.
    assert _background_lines(source, "weather") <= readme + 2
    # The longer shapes are alternatives beside it, not in it.
    assert "TaskScope" not in source and "on_interrupt" not in source
    patterns = (root / "src/backline_weather/patterns.py").read_text()
    assert "ctx.on_interrupt(scope.aclose)" in patterns
    assert "TaskScope(" in patterns and "finally:" in patterns


def test_new_plugin_writes_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKLINE_PLUGINS", "")
    result = CliRunner().invoke(make_cli(), ["new-plugin", "Deep.Research", "--dir", str(tmp_path)])

    assert result.exit_code == 0, result.output
    root = tmp_path / "backline-deep-research"
    assert "backline try deep-research   (talk to it, no key needed)" in result.output
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "src/backline_deep_research/__init__.py",
        "src/backline_deep_research/patterns.py",
        "src/backline_deep_research/plugin.py",
        "tests/test_patterns.py",
        "tests/test_plugin.py",
    ]
    pyproject = (root / "pyproject.toml").read_text()
    assert 'name = "backline-deep-research"' in pyproject
    assert '[project.entry-points.backline]\ndeep-research = "backline_deep_research.plugin"' in (
        pyproject
    )
    plugin = (root / "src/backline_deep_research/plugin.py").read_text()
    assert '@background("deep-research", description=' in plugin
    assert "async def deep_research(ctx: BackgroundContext)" in plugin
    for channel in ("silent=True", "ctx.set_state(", 'await ctx.send(f"Finished'):
        assert channel in plugin
    for path in root.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("9lives", "start with a letter"),
        ("backline-", "start with a letter"),
        ("has space", "start with a letter"),
    ],
)
def test_new_plugin_refuses_bad_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, error: str
) -> None:
    monkeypatch.setenv("BACKLINE_PLUGINS", "")
    result = CliRunner().invoke(make_cli(), ["new-plugin", name, "--dir", str(tmp_path)])

    assert result.exit_code == 1
    assert error in result.output
    assert list(tmp_path.iterdir()) == []


def test_new_plugin_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKLINE_PLUGINS", "")
    (tmp_path / "backline-x").mkdir()
    (tmp_path / "backline-x" / "keep.txt").write_text("mine")

    result = CliRunner().invoke(make_cli(), ["new-plugin", "x", "--dir", str(tmp_path)])

    assert result.exit_code == 1
    assert "already exists and is not empty" in result.output
    assert (tmp_path / "backline-x" / "keep.txt").read_text() == "mine"


@pytest.mark.skipif(
    importlib.util.find_spec("hatchling") is None,
    reason="hatchling is needed to build the generated package offline (dev extras)",
)
def test_new_plugin_output_installs_and_its_generated_test_passes(
    overlay_python: Path, tmp_path: Path, uninstall_after: list[str]
) -> None:
    name = unique("tmpl")
    dist = f"backline-{name}"
    created = run_backline("new-plugin", name, "--dir", str(tmp_path), python=overlay_python)
    assert created.returncode == 0, created.stderr
    root = tmp_path / dist
    uninstall_after.append(dist)
    env = {"BACKLINE_PLUGINS": name}

    installed = run_backline("install", "-e", str(root), python=overlay_python, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    listed = plugins_json(run_backline("plugins", "--json", python=overlay_python, env=env))
    assert listed[name]["status"] == "loaded"
    assert listed[name]["distribution"] == dist
    assert listed[name]["backgrounds"] == [name]

    tests = subprocess.run(
        [str(overlay_python), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "4 passed" in tests.stdout

    removed = run_backline("uninstall", dist, python=overlay_python, env=env)
    assert removed.returncode == 0, removed.stderr
    assert name not in plugins_json(
        run_backline("plugins", "--json", python=overlay_python, env=env)
    )
