"""The docs run: every ```python block in README.md, docs/ and the plugins' READMEs.

A block runs as a standalone script in a fresh interpreter (no network, no key);
a block that defines tests (``def test_...``) runs under pytest instead. A block
that cannot run that way is fenced ```python no-run. Hidden directives in an
HTML comment just before a block set it up without showing the reader anything:

- ``<!-- docs-test: continues -->``: the block continues the previous runnable
  block of the same file: it runs with that block's code before it (and the
  previous block still runs on its own). ``continues N`` continues the file's
  N-th runnable block instead (1 is the first).
- ``<!-- docs-test: anthropic-script [fa.text("Hi."), ...] -->``: a fake
  Anthropic server (``backline.testing.fake_anthropic as fa``) scripted with
  that list answers the block's ``AnthropicLLM`` (``ANTHROPIC_BASE_URL`` and a
  key are set for it).
- ``<!-- docs-test: timeout 60 -->``: a longer bound than the default.
- ``<!-- docs-test: excerpt-of new-plugin:PATH -->``: the block is an excerpt of
  the file PATH of the package ``backline new-plugin weather`` writes: instead of
  running, each of its code lines (comments aside) must appear there, in order.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "plugins").glob("*/README.md"),
        *(ROOT / "examples").glob("*/README.md"),
    ]
)
DEFAULT_TIMEOUT = 120.0  # a bound against hangs, not a speed check (CI machines are busy)

_FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
_DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(?P<body>.*?)-->", re.S)


@dataclass
class Block:
    path: Path
    line: int
    code: str
    script: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    excerpt_of: str | None = None
    parts: list[int] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_test(self) -> bool:
        return re.search(r"^(async )?def test_", self.code, re.M) is not None


def _directives(text: str, fence_start: int) -> list[str]:
    """The docs-test directives in the comments right before a fence (blank lines allowed)."""
    found: list[str] = []
    before = text[:fence_start].rstrip()
    while before.endswith("-->"):
        start = before.rfind("<!--")
        match = _DIRECTIVE.fullmatch(before[start:])
        if match is None:
            break
        found.insert(0, " ".join(match["body"].split()))
        before = before[:start].rstrip()
    return found


def collect(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    blocks: list[Block] = []
    for match in _FENCE.finditer(text):
        info = match["info"].split()
        if "no-run" in info:
            continue
        assert not info, f"{path}: unknown fence info {info} (use ```python or ```python no-run)"
        line = text.count("\n", 0, match.start()) + 1
        block = Block(path, line, match["code"], parts=[line])
        for directive in _directives(text, match.start()):
            word, _, rest = directive.partition(" ")
            if word == "continues":
                own = [b for b in blocks if b.path == path]
                assert own, f"{block.id}: 'continues' needs a runnable block before it"
                previous = own[int(rest) - 1] if rest else own[-1]  # it still runs alone
                block.code = previous.code + "\n\n" + block.code
                block.parts = [*previous.parts, line]
                block.script = previous.script
            elif word == "anthropic-script":
                block.script = rest
            elif word == "timeout":
                block.timeout = float(rest)
            elif word == "excerpt-of":
                block.excerpt_of = rest
            else:
                raise AssertionError(f"{block.id}: unknown docs-test directive {directive!r}")
        blocks.append(block)
    return blocks


BLOCKS = [block for path in DOCS for block in collect(path)]

PYTEST_CONFIG = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def _environment(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "BACKLINE_", "CLAUDE_", "OPENAI_", "PYTEST_"))
    }
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    (tmp_path / "home").mkdir()
    return env


def _code_lines(code: str) -> list[str]:
    lines = []
    for line in code.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()  # trailing comments differ freely
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def _check_excerpt(block: Block, tmp_path: Path) -> None:
    source, _, relative = (block.excerpt_of or "").partition(":")
    assert source == "new-plugin", f"{block.id}: excerpt-of takes new-plugin:PATH"
    from backline.plugins._scaffold import create_plugin

    root, _ = create_plugin("weather", tmp_path)
    whole = _code_lines((root / relative).read_text(encoding="utf-8"))
    at = 0
    for line in _code_lines(block.code):
        assert line in whole[at:], (
            f"{block.id}: the excerpt of {relative} drifted: {line!r} is not in the generated "
            "file (after the lines before it); update the docs or the template"
        )
        at = whole.index(line, at) + 1


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_block_runs(block: Block, tmp_path: Path) -> None:
    if block.excerpt_of is not None:
        _check_excerpt(block, tmp_path)
        return
    env = _environment(tmp_path)
    code = textwrap.dedent(block.code)
    if block.is_test:
        (tmp_path / "pytest.ini").write_text(PYTEST_CONFIG)
        script = tmp_path / "test_doc_block.py"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)]
    else:
        script = tmp_path / "doc_block.py"
        command = [sys.executable, str(script)]
    script.write_text(code, encoding="utf-8")
    server = None
    if block.script is not None:
        from backline.testing import fake_anthropic as fa

        server = fa.FakeAnthropicServer(eval(block.script, {"fa": fa}))  # the doc's own script
        server.start()
        env["ANTHROPIC_BASE_URL"] = server.url
        env["ANTHROPIC_API_KEY"] = "sk-ant-docs-test"
    try:
        result = subprocess.run(
            command,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=block.timeout,
            check=False,
        )
    finally:
        if server is not None:
            server.stop()
    where = f"{block.id} (lines of blocks at {block.parts})"
    assert result.returncode == 0, (
        f"the docs block at {where} failed:\n--- code\n{code}\n--- stdout\n{result.stdout}"
        f"\n--- stderr\n{result.stderr}"
    )


def test_every_fence_is_known() -> None:
    """A block the harness skips must say so (```python no-run); no other info strings."""
    bad = []
    for path in DOCS:
        for match in _FENCE.finditer(path.read_text(encoding="utf-8")):
            info = match["info"].split()
            if info and info != ["no-run"]:
                bad.append(f"{path.relative_to(ROOT)}: ```python {' '.join(info)}")
    assert not bad, bad


README_FILES = sorted((ROOT / "plugins").glob("*/README.md"))


def test_the_readme_links_resolve_in_a_clone() -> None:
    """The project README's links into the project are relative and name files that
    exist (the package index gets absolute ones: tests/test_packaging.py)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # code blocks are not links
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for target in links:
        assert "backline-dev/backline" not in target, f"README.md: {target} is not relative"
        if not target.startswith(("https://", "http://", "#")):
            assert (ROOT / target.split("#")[0]).exists(), f"README.md: {target} is not a file"


@pytest.mark.parametrize(
    "readme", README_FILES, ids=[str(p.relative_to(ROOT)) for p in README_FILES]
)
def test_readme_links_work_outside_the_repository(readme: Path) -> None:
    """A README is also shown on a package index: every link is absolute, and the ones
    into this project name files that exist (the base is the pyproject's Source URL)."""
    import tomllib

    source = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]
    owner_repo = source.removeprefix("https://github.com/")
    own = (
        f"{source}/blob/main/",
        f"{source}/tree/main/",
        f"https://raw.githubusercontent.com/{owner_repo}/main/",
    )
    text = readme.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # code blocks are not links
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        assert target.startswith(("https://", "http://", "#")), (
            f"{readme.relative_to(ROOT)}: link {target!r} is relative: it breaks outside the "
            f"repository (use {own[0]}...)"
        )
        for prefix in own:
            if target.startswith(prefix):
                path = target[len(prefix) :].split("#")[0]
                assert (ROOT / path).exists(), (
                    f"{readme.relative_to(ROOT)}: {target} is not a file here"
                )
