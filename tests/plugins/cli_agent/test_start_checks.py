"""What cli_agent checks when the session starts, before any task: that the agent's
program can be found (issue 26, item 5) and what git says about the folder, with a
clean tree required on demand (issue 26, item 10). Real git, in temporary folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from backline_cli_agent import AgentConfig
from backline_cli_agent.environment import ProgramNotFound, find_program
from backline_cli_agent.workspace import check_git

from tests.plugins.cli_agent.conftest import FAKE, WAIT, git, silent, state

pytestmark = pytest.mark.timeout(120)
AGENT = Path(FAKE[0]).name  # the agent's name for people: its program


def dirty_repository(folder: Path) -> Path:
    """A repository with a commit, then one file changed and one added."""
    folder.mkdir()
    git(folder, "init", "-q")
    (folder / "app.py").write_text("print('v1')\n")
    git(folder, "add", "app.py")
    git(folder, "commit", "-q", "-m", "v1")
    (folder / "app.py").write_text("print('v2')\n")
    (folder / "notes.txt").write_text("draft\n")
    return folder


async def test_a_program_that_cannot_be_found_is_said_at_start_before_any_task(
    drive: Any,
) -> None:
    driver = await drive(("no-such-agent-cli-xyz", "-p"))

    (said,) = await driver.wait_for_spoken(1)  # nobody has asked anything yet
    first = state(driver)
    await driver.say("hello")
    await driver.wait_for_spoken(2)
    await driver.wait_until_done()

    assert said == (
        "no-such-agent-cli-xyz cannot start: 'no-such-agent-cli-xyz' was not found on "
        "PATH: install it, or give its full path in the agent command (--agent-cmd)."
    )
    assert first["status"] == "cannot start: its program was not found"
    assert first["program"] == "not found" and first["error"] == said
    after = state(driver)
    assert after["process"]["state"] == "not started"  # the task was refused, not run
    assert after["status"] == "cannot start: its program was not found"
    assert driver.result().spoken == [said, said]


async def test_where_the_program_was_found_is_in_the_state(drive: Any) -> None:
    driver = await drive(FAKE)

    found = await driver.wait_for_state(lambda s: s["program"] is not None)

    assert found["program"] == "as given"  # an absolute path: sys.executable
    assert found["program_path"] == FAKE[0]


def test_finding_the_program_on_the_agents_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "my-agent"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)

    found = find_program("my-agent", "generic", {"PATH": str(bin_dir)})

    assert (found.path, found.source) == (str(tool), "from PATH")
    with pytest.raises(ProgramNotFound, match="'my-agent' was not found on PATH"):
        find_program("my-agent", "generic", {"PATH": str(tmp_path)})
    with pytest.raises(ProgramNotFound, match=f"{tmp_path}/nope does not exist"):
        find_program(str(tmp_path / "nope"), "generic", {})
    tool.chmod(0o644)
    with pytest.raises(ProgramNotFound, match="is not executable"):
        find_program(str(tool), "generic", {})


async def test_a_clean_repository_is_reported_in_the_state_and_not_said(drive: Any) -> None:
    driver = await drive(FAKE)  # the fixture's folder: a fresh repository

    checked = await driver.wait_for_state(lambda s: s["git"] is not None)
    await driver.say("print: done")
    await driver.wait_until_done()

    assert checked["git"] == {"repository": True, "uncommitted_changes": 0, "summary": "clean"}
    assert driver.result().spoken == [f"{AGENT} finished: done"]


async def test_a_folder_that_is_not_a_repository_is_said_once_at_start(
    drive: Any, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    driver = await drive(FAKE, cwd=plain)

    (said,) = await driver.wait_for_spoken(1)

    assert said == (
        f"Heads up: {plain} is not a git repository, so changes cannot be undone with git."
    )
    assert state(driver)["git"]["summary"] == "not a git repository"


async def test_uncommitted_changes_are_counted_and_said_at_start(
    drive: Any, tmp_path: Path
) -> None:
    repo = dirty_repository(tmp_path / "repo")
    driver = await drive(FAKE, cwd=repo)

    (said,) = await driver.wait_for_spoken(1)

    assert state(driver)["git"] == {
        "repository": True,
        "uncommitted_changes": 2,
        "summary": "2 uncommitted changes",
    }
    assert said == (
        f"Heads up: {repo} has 2 uncommitted changes, so {AGENT}'s edits will mix with them."
    )


async def test_a_required_clean_tree_refuses_tasks_until_the_changes_are_committed(
    drive: Any, tmp_path: Path
) -> None:
    repo = dirty_repository(tmp_path / "repo")
    driver = await drive(FAKE, cwd=repo, require_clean=True)

    (refusal,) = await driver.wait_for_spoken(1)
    await driver.say("print: edited")
    await driver.wait_for_spoken(2)
    await driver.wait_until_done()
    refused = state(driver)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v2")
    await driver.say("print: edited")
    await driver.wait_for_state(lambda s: s["process"]["state"] == "exited", timeout=WAIT)
    await driver.wait_until_done()

    assert refusal == (
        f"{AGENT} will not start editing {repo}: it has 2 uncommitted changes, and a clean "
        "git tree is required (--agent-require-clean). To go on, commit or stash them; the "
        "next message checks again."
    )
    assert refused["status"] == "waiting for a clean git tree"
    assert refused["process"]["state"] == "not started" and refused["error"] == refusal
    assert driver.result().spoken[1] == refusal  # the first task: refused, said again
    assert "edited" in silent(driver)  # the tree was clean for the second: it ran
    assert state(driver)["git"]["summary"] == "clean"


def test_a_required_clean_tree_needs_a_command_to_refuse(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--agent-require-clean needs an agent command"):
        AgentConfig(argv=None, cwd=tmp_path, require_clean=True)
    config = AgentConfig.from_env(
        {"BACKLINE_AGENT_CMD": "codex exec", "BACKLINE_AGENT_REQUIRE_CLEAN": "1"}, cwd=tmp_path
    )
    assert config.require_clean


async def test_git_is_asked_safely_and_a_missing_git_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = dirty_repository(tmp_path / "repo")
    git(repo, "mv", "app.py", "main.py")  # a rename is one change, not two
    git(repo, "config", "core.fsmonitor", f"touch {tmp_path / 'ran'}; false")

    renamed = await check_git(repo)
    inside_git_dir = await check_git(repo / ".git")
    monkeypatch.setenv("PATH", str(tmp_path))  # no git there
    missing = await check_git(repo)

    assert (renamed.repository, renamed.changes) == (True, 2)  # the rename, and notes.txt
    assert not (tmp_path / "ran").exists()  # the repository's fsmonitor never ran
    assert inside_git_dir.summary == "not a git repository"
    assert missing.summary == "not checked: git is not installed"
    assert missing.heads_up("codex") == (
        f"Heads up: git could not check {repo} (git is not installed), so codex's changes "
        "may not be undoable with git."
    )


async def test_a_missing_program_is_the_one_thing_said_before_a_dirty_tree(
    drive: Any, tmp_path: Path
) -> None:
    repo = dirty_repository(tmp_path / "repo")
    driver = await drive(("no-such-agent-cli-xyz",), cwd=repo, require_clean=True)

    await driver.wait_for_state(lambda s: s["git"] is not None)
    await driver.wait_until_done()

    (said,) = driver.result().spoken
    assert said.startswith("no-such-agent-cli-xyz cannot start:")
    assert state(driver)["status"] == "cannot start: its program was not found"
    assert state(driver)["error"] == said
