"""``backline.app``, the front-end contract: options become a session, bad options and
missing credentials fail first with what to change, the plugin manager is the command's,
and the contract stays light and public."""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import click
import pytest
from click.testing import CliRunner

import backline
from backline import BackgroundContext, background
from backline.app import (
    DEFAULT_INSTRUCTIONS,
    PluginSource,
    SessionOptions,
    available_backgrounds,
    build_session,
    check_options,
    default_instructions,
    hosting_voice_channel,
    plugin_manager,
    prepare_session,
    session_options,
)
from backline.plugins import PluginManager
from backline.testing import ScriptedLLM


@background(
    "notes",
    description="Keeps notes. It never forgets a thing.",
    voice_instructions="Send notes to `notes`.",
)
async def notes(ctx: BackgroundContext) -> None:
    async for _ in ctx.messages():
        pass


class Scripted:
    @backline.hookimpl
    def register_background_sessions(self, register: Any) -> None:
        register(notes)

    @backline.hookimpl
    def register_llms(self, register: Any) -> None:
        register("scripted", lambda **options: ScriptedLLM(["Noted."]))


@pytest.fixture
def manager(plugin_manager: PluginManager) -> PluginManager:
    plugin_manager.register(Scripted(), name="scripted")
    return plugin_manager


# -- options → session ---------------------------------------------------------------------------
async def test_prepare_session_builds_what_the_options_say(manager: PluginManager) -> None:
    session, agent = prepare_session(
        manager, SessionOptions(backgrounds=("notes",), llm="scripted")
    )
    assert session.background is not None and session.background.sorted_ids() == ["notes"]
    assert agent.instructions == f"{DEFAULT_INSTRUCTIONS}\n\nSend notes to `notes`."
    async with session:
        await session.start(agent)
        result = await session.run(user_input="remember the milk")
    assert result.final_output == "Noted."


def test_a_wrong_name_fails_before_the_credentials_are_checked(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(click.BadParameter) as bad:
        prepare_session(manager, SessionOptions(backgrounds=("nope",)))
    assert bad.value.param_hint == "'--background'" and "notes" in str(bad.value)
    with pytest.raises(click.ClickException, match="ANTHROPIC_API_KEY is not set"):
        prepare_session(manager, SessionOptions(backgrounds=("notes",)))


def test_check_options_reads_the_mcp_config_before_anything_runs(
    manager: PluginManager, tmp_path: Any
) -> None:
    broken = tmp_path / ".mcp.json"
    broken.write_text("{not json")
    with pytest.raises(click.BadParameter) as bad:
        check_options(manager, SessionOptions(llm="scripted", mcp_config=str(broken)))
    assert bad.value.param_hint == "'--mcp-config'"


def test_the_log_names_the_front_end_given_or_the_running_command(
    manager: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded: list[Any] = []
    monkeypatch.setattr("backline.logs.attach_log", lambda session, **meta: recorded.append(meta))
    monkeypatch.setenv("BACKLINE_LOG", "1")
    options = SessionOptions(llm="scripted")
    build_session(manager, options, front_end="my front end")

    @click.command("lines")
    def lines() -> None:
        build_session(manager, options)

    CliRunner().invoke(lines, [], prog_name="backline lines", catch_exceptions=False)
    assert [meta["front_end"] for meta in recorded] == ["my front end", "lines"]


# -- the helpers ---------------------------------------------------------------------------------
def test_the_installed_backgrounds_read_one_line_each(manager: PluginManager) -> None:
    assert available_backgrounds(manager) == "  notes: Keeps notes."
    assert default_instructions([]) == DEFAULT_INSTRUCTIONS


async def test_a_session_without_backgrounds_serves_no_voice_channel(
    manager: PluginManager,
) -> None:
    session, _ = build_session(manager, SessionOptions(llm="scripted", log=False))
    async with hosting_voice_channel(session, "test front end") as hosting:
        assert hosting is None  # nothing started, nothing to stop


# -- the plugin manager of a command -------------------------------------------------------------
def test_a_command_run_on_its_own_loads_the_plugins_once() -> None:
    seen: list[PluginManager] = []

    @click.command()
    def front() -> None:
        seen.extend([plugin_manager(), plugin_manager()])

    CliRunner().invoke(front, [], catch_exceptions=False)
    assert seen[0] is seen[1]
    assert "anthropic" in seen[0].llm_names()


def test_a_root_that_loads_plugins_is_asked_for_them(manager: PluginManager) -> None:
    class Root(click.Group):
        def plugin_manager(self, *, strict_errors: bool = True) -> PluginManager:
            return manager

    root = Root("root")
    seen: list[PluginManager] = []

    @root.command()
    def front() -> None:
        seen.append(plugin_manager())

    assert isinstance(root, PluginSource)
    CliRunner().invoke(root, ["front"], catch_exceptions=False)
    assert seen == [manager]


def test_the_session_options_mark_a_command_as_a_front_end() -> None:
    from backline.plugins._options import is_front_end

    @click.command()
    @session_options
    def front(session_options: SessionOptions) -> None:
        click.echo(repr(session_options))

    assert is_front_end(front)
    result = CliRunner().invoke(front, ["-b", "notes", "--llm", "x", "--no-log"])
    assert result.output.strip() == repr(SessionOptions(backgrounds=("notes",), llm="x", log=False))


# -- public and light ----------------------------------------------------------------------------
def test_importing_the_contract_loads_no_server_and_no_model_sdk() -> None:
    code = (
        "import sys, backline.app\n"
        "heavy = ('uvicorn', 'starlette', 'mcp', 'anthropic', 'openai', 'sqlite3', 'backline.io')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_names_that_moved_from_backline_cli_still_work_with_a_warning() -> None:
    import backline.app
    import backline.cli

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        moved = backline.cli.build_session
    assert moved is backline.app.build_session
    assert "backline.cli.build_session moved to backline.app.build_session" in str(
        caught[0].message
    )
