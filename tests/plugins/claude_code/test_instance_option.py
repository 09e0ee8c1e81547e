"""``--background claude_code:NAME=DIR`` (issue 30, item 5): Claude Code in that folder,
named NAME, described by its folder; the folder checked before anything starts; the
rest of the configuration shared (read when the session starts)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from backline_claude_code import claude_code_background
from backline_claude_code.background import INSTANCE_VALUE

from backline import Agent, Session
from backline.app import SessionOptions, check_options, default_instructions
from backline.plugins import PluginManager
from backline.testing import ScriptedLLM

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "services" / "api").mkdir(parents=True)
    (tmp_path / "web").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_instance_is_claude_code_in_its_folder(folders: Path) -> None:
    base = claude_code_background()
    assert base.instance_value == INSTANCE_VALUE
    api = base.instance("api", "./services/api")
    assert (api.id, api.value, api.instance_of) == ("api", "./services/api", "claude_code")
    assert api.description.startswith(
        "Claude Code in ./services/api, a coding agent working in that folder. Send it"
    )
    assert api.voice_instructions is not None
    assert "background session `api`" in api.voice_instructions
    assert "`claude_code`" not in api.voice_instructions
    # A plain --background claude_code is exactly as before.
    assert base.id == "claude_code" and base.value is None
    assert "the user's repository" in base.description
    web = base.instance("web", "./web")
    instructions = default_instructions([api, web])
    assert "- api: Claude Code in ./services/api, a coding agent working in that folder." in (
        instructions
    )
    assert "- web: Claude Code in ./web, a coding agent working in that folder." in instructions


def test_a_folder_that_is_missing_or_home_is_refused_at_once(
    folders: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = claude_code_background()
    with pytest.raises(ValueError, match="does not exist"):
        base.instance("api", "./nope")
    monkeypatch.setenv("HOME", str(folders / "web"))
    with pytest.raises(ValueError, match="your home directory"):
        base.instance("web", "./web")


def test_the_front_ends_options_choose_instances(folders: Path) -> None:
    manager = PluginManager.from_environment().load()
    chosen = check_options(
        manager,
        SessionOptions(
            backgrounds=("claude_code:api=./services/api", "claude_code:web=./web"),
            llm="anthropic",
            plugin_options={"--claude-model": "m"},  # the plugin's options apply to both
        ),
    )
    assert [(d.id, d.value) for d in chosen] == [("api", "./services/api"), ("web", "./web")]
    with pytest.raises(click.BadParameter, match=r"claude_code:api=\./nope: the working directory"):
        check_options(manager, SessionOptions(backgrounds=("claude_code:api=./nope",)))


async def test_an_instance_reads_the_rest_from_the_environment_but_works_in_its_folder(
    folders: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BACKLINE_CLAUDE_CODE_CWD", str(folders / "web"))
    monkeypatch.setenv("BACKLINE_CLAUDE_CODE_MODEL", "claude-test-model")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    seen: list[Any] = []
    asked = asyncio.Event()

    class Refused:
        """The SDK client, as far as the plugin gets: it refuses to start."""

        def __init__(self, options: Any) -> None:
            seen.append(options)
            asked.set()

        async def connect(self) -> None:
            raise RuntimeError("not in this test")

    api = claude_code_background(client_factory=Refused).instance("api", "./services/api")
    session: Session[Any] = Session(ScriptedLLM(["Okay."] * 5), background=[api])
    async with session:
        await session.start(Agent("Help."))
        assert session.background is not None
        session.background.deliver("api", "look around")
        await asyncio.wait_for(asked.wait(), 30)
    (options,) = seen
    assert Path(options.cwd) == (folders / "services" / "api").resolve()
    assert options.model == "claude-test-model"


def _console(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BACKLINE_CLAUDE_CODE_")}
    return subprocess.run(
        [BACKLINE, "console", "--plain", "--no-log", *args],
        cwd=cwd,
        env={**clean, "ANTHROPIC_API_KEY": "sk-ant-fake"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_bad_background_values_are_usage_errors_before_anything_starts(folders: Path) -> None:
    missing = _console("-b", "claude_code:api=./nope", cwd=folders)
    assert missing.returncode == 2, missing.stderr
    err = " ".join(missing.stderr.split())
    assert "Invalid value for '--background': claude_code:api=./nope: the working directory" in err
    twice = _console("-b", "claude_code:api=./web", "-b", "claude_code:api=./web", cwd=folders)
    assert twice.returncode == 2
    assert "two backgrounds are named 'api'" in " ".join(twice.stderr.split())
    typo = _console("-b", "claude_cod:api=./web", cwd=folders)
    assert typo.returncode == 2 and "Did you mean 'claude_code'?" in typo.stderr
