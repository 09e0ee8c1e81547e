"""Before Claude Code edits (issue 26, item 10): git checks its folder when the session
starts, anything but a clean repository is said in one sentence, and with
``require_clean`` no task starts until the tree is clean. Real git in temporary folders;
the real CLI where a task runs."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from backline_claude_code import ClaudeCodeConfig, claude_code_background

from backline.testing import BackgroundDriver
from backline.testing import fake_anthropic as fa
from tests.plugins.claude_code.conftest import Harness, init_repository, requires_cli

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[3]
WAIT = 30.0


def git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        timeout=30,
    )


def dirty_repository(folder: Path) -> Path:
    """A repository with a commit, then one file changed and one added."""
    init_repository(folder)
    (folder / "app.py").write_text("print('v1')\n")
    git(folder, "add", "app.py")
    git(folder, "commit", "-q", "-m", "v1")
    (folder / "app.py").write_text("print('v2')\n")
    (folder / "notes.txt").write_text("draft\n")
    return folder


def no_client(options: Any) -> Any:
    raise AssertionError("Claude Code was started although no task may run")


def driver(folder: Path, **config: Any) -> BackgroundDriver:
    definition = claude_code_background(
        ClaudeCodeConfig(cwd=folder, **config), client_factory=no_client
    )
    return BackgroundDriver(definition, timeout=WAIT, user_away_timeout=None)


async def test_a_folder_that_is_not_a_repository_is_said_at_start(tmp_path: Path) -> None:
    async with driver(tmp_path) as d:
        (said,) = await d.wait_for_spoken(1)  # before anyone asked anything
        state = d.result().state

    assert said == (
        f"Heads up: {tmp_path} is not a git repository, so changes cannot be undone with git."
    )
    assert state["git"] == {
        "repository": False,
        "uncommitted_changes": 0,
        "summary": "not a git repository",
    }
    assert state["status"] == "idle, waiting for a task"


async def test_uncommitted_changes_are_said_and_a_clean_tree_is_not(tmp_path: Path) -> None:
    dirty = dirty_repository(tmp_path / "dirty")
    clean = init_repository(tmp_path / "clean")

    async with driver(dirty) as d:
        (said,) = await d.wait_for_spoken(1)
        dirty_state = d.result().state
    async with driver(clean) as d:
        clean_state = await d.wait_for_state(lambda s: s["git"] is not None)
        await d.wait_until_done()
        spoken_clean = d.result().spoken

    assert said == (
        f"Heads up: {dirty} has 2 uncommitted changes, so Claude Code's edits will mix with them."
    )
    assert dirty_state["git"]["uncommitted_changes"] == 2
    assert clean_state["git"]["summary"] == "clean" and spoken_clean == []


@requires_cli
async def test_a_required_clean_tree_refuses_tasks_until_the_changes_are_committed(
    tmp_path: Path, harness_factory: Callable[..., Any]
) -> None:
    repo = dirty_repository(tmp_path / "repo")  # the harness's folder, made here
    h: Harness = await harness_factory(
        lambda r: fa.text("Done, on a clean tree."), require_clean=True
    )
    refusal = (
        f"Claude Code will not start editing {repo}: it has 2 uncommitted changes, and a "
        "clean git tree is required (--claude-require-clean). To go on, commit or stash "
        "them; the next message checks again."
    )
    await h.wait_for_state(lambda s: s["status"] == "waiting for a clean git tree", "refusal")
    assert h.state["error"] == refusal

    await h.session.run(user_input="cc: rename the module", timeout=60)
    await h.wait_for_state(lambda s: s["last_task"] == "rename the module", "the refused task")
    refused = h.state
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v2")
    await h.session.run(user_input="cc: rename it now", timeout=60)
    await h.wait_for_state(
        lambda s: s["status"] == "idle, waiting for the next task", "the task on a clean tree"
    )

    assert refused["status"] == "waiting for a clean git tree" and refused["error"] == refusal
    spoken = [e.content for e in h.of("background_message") if not e.silent]
    assert spoken == [refusal, refusal]  # at start, and for the refused task
    assert [r.last_user_text for r in h.world.coder_requests] == ["rename it now"]
    assert h.state["git"]["summary"] == "clean" and h.state["error"] is None


def test_the_git_check_is_the_same_in_both_coding_plugins() -> None:
    """Plugins do not import each other: each has its copy, kept identical."""
    copies = [
        (ROOT / "plugins" / p / "workspace.py").read_text().split("\n", 1)[1]
        for p in ("claude_code/backline_claude_code", "cli_agent/backline_cli_agent")
    ]
    assert copies[0] == copies[1]


def test_require_clean_comes_from_the_environment(tmp_path: Path) -> None:
    env = {"BACKLINE_CLAUDE_CODE_CWD": str(tmp_path), "BACKLINE_CLAUDE_CODE_REQUIRE_CLEAN": "1"}
    assert ClaudeCodeConfig.from_env(env).require_clean
    assert not ClaudeCodeConfig(cwd=tmp_path).require_clean
