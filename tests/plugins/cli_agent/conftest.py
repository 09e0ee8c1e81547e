"""cli_agent driven by a scripted voice agent, with a fake agent CLI or the real Claude Code."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from backline_cli_agent import AgentConfig, cli_agent_background

from backline.testing import BackgroundDriver

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
WAIT = 60.0  # bounds a hang: a run takes well under a second (a few with the real CLI)


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "runtime"
    monkeypatch.setenv("BACKLINE_RUNTIME_DIR", str(directory))
    for name in (
        "BACKLINE_MCP_URL",
        "BACKLINE_MCP_TOKEN",
        "BACKLINE_MCP_PORT",
        "BACKLINE_AGENT_CMD",
        "BACKLINE_AGENT_MAX_OUTPUT_LINES",
        "BACKLINE_AGENT_MAX_LINE_BYTES",
    ):
        monkeypatch.delenv(name, raising=False)
    return directory


def git(folder: Path, *args: str) -> str:
    """Run the real git in ``folder`` (quietly, as a test user)."""
    done = subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=Test", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The agent's folder: a git repository without changes (nothing to warn about)."""
    folder = tmp_path / "work"
    folder.mkdir()
    git(folder, "init", "-q")
    return folder


@pytest.fixture
async def drive(work: Path) -> AsyncIterator[Callable[..., Any]]:
    """``await drive(argv, env=..., grace=0.0, cwd=None, **config)``: a started
    ``BackgroundDriver`` running ``cli_agent`` with that command in ``cwd`` (default:
    ``work``), closed after the test;
    ``config`` goes to ``AgentConfig`` (``max_output_lines=`` ...). ``env`` is set for
    the agent, without backline's own variables (which it never gets)."""
    made: list[BackgroundDriver] = []

    async def make(
        argv: tuple[str, ...] | None,
        *,
        env: dict[str, str] | None = None,
        grace: float = 0.0,
        cwd: Path | None = None,
        **options: Any,
    ) -> BackgroundDriver:
        own = {k: v for k, v in (env or {}).items() if not k.startswith("BACKLINE_")}
        config = AgentConfig(argv=argv, cwd=cwd or work, env=own, **options)
        definition = cli_agent_background(config, interrupt_grace=grace)
        driver = BackgroundDriver(definition, timeout=WAIT, user_away_timeout=None)
        await driver.__aenter__()
        made.append(driver)
        return driver

    try:
        yield make
    finally:
        for driver in made:
            await driver.__aexit__(None, None, None)


FAKE = (sys.executable, str(FAKE_AGENT))


def silent(driver: BackgroundDriver) -> list[str]:
    return driver.result().silent


def state(driver: BackgroundDriver) -> dict[str, Any]:
    value = driver.result().state
    assert isinstance(value, dict), value
    return value


def cmdline(pid: int) -> str:
    """What every local user reads of process ``pid``'s command line."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode()
