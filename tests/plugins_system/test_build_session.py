"""build_session and session_options: how front ends (console, web) build a session."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import backline
from backline import Agent, BackgroundContext, background, function_tool
from backline.app import DEFAULT_INSTRUCTIONS, SessionOptions, build_session, session_options
from backline.plugins import PluginManager
from backline.testing import ScriptedLLM

from .conftest import unique


@background("alpha", description="First.")
async def alpha(ctx: BackgroundContext) -> None:
    async for _ in ctx.messages():
        pass


@background("beta", description="Second.")
async def beta(ctx: BackgroundContext) -> None:
    async for _ in ctx.messages():
        pass


@function_tool
async def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: The term.
    """
    return term


class Provider:
    def __init__(self) -> None:
        self.llm_options: list[dict[str, Any]] = []

    @backline.hookimpl
    def register_background_sessions(self, register: Any) -> None:
        register(alpha)
        register(beta)

    @backline.hookimpl
    def register_tools(self, register: Any) -> None:
        register(lookup)

    @backline.hookimpl
    def register_llms(self, register: Any) -> None:
        def scripted(**options: Any) -> ScriptedLLM:
            self.llm_options.append(options)
            return ScriptedLLM(["Hi there."])

        register("scripted", scripted)


@pytest.fixture
def provider(plugin_manager: PluginManager) -> Provider:
    provider = Provider()
    plugin_manager.register(provider, name="provider")
    return provider


async def test_build_session_uses_the_registry(
    plugin_manager: PluginManager, provider: Provider
) -> None:
    session, agent = build_session(
        plugin_manager, SessionOptions(backgrounds=("beta",), llm="scripted", model="m-1")
    )

    assert provider.llm_options == [{"model": "m-1"}]
    assert agent.instructions == DEFAULT_INSTRUCTIONS
    generated = {"backline_send", "backline_state", "backline_stop"}
    assert {"lookup", *generated} <= {t.name for t in session.tools}
    async with session:
        await session.start(agent)
        assert session.background is not None and session.background.sorted_ids() == ["beta"]
        result = await session.run(user_input="hello")
        result.expect.next_event().is_message(role="assistant", content="Hi there.")
    assert plugin_manager.active  # plugins observe the session


def test_build_session_runs_no_background_unless_named(
    plugin_manager: PluginManager, provider: Provider
) -> None:
    session, _ = build_session(plugin_manager, SessionOptions(llm="scripted", instructions="Hi."))

    assert not session.background  # a background may change files: the user chooses
    assert provider.llm_options == [{}]  # no --model: the factory's default


def test_unknown_names_are_bad_parameters_listing_what_exists(
    plugin_manager: PluginManager, provider: Provider
) -> None:
    with pytest.raises(
        click.BadParameter, match="unknown background session 'gamma'; available: alpha, beta"
    ):
        build_session(plugin_manager, SessionOptions(backgrounds=("gamma",), llm="scripted"))
    with pytest.raises(
        click.BadParameter, match="unknown LLM 'gpt'; available: anthropic, scripted"
    ):
        build_session(plugin_manager, SessionOptions(llm="gpt"))


def test_instructions_and_agent_are_exclusive(plugin_manager: PluginManager) -> None:
    with pytest.raises(click.UsageError, match="--instructions or --agent"):
        build_session(plugin_manager, SessionOptions(instructions="x", agent="m:A"))


def test_agent_option_loads_a_class_from_the_current_directory(
    plugin_manager: PluginManager,
    provider: Provider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = unique("my_agents_")
    (tmp_path / f"{module}.py").write_text(
        "from backline import Agent\n\n"
        "class Helper(Agent):\n"
        "    def __init__(self):\n"
        "        super().__init__('I help.')\n\n"
        "NOT_AN_AGENT = 3\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        _, agent = build_session(
            plugin_manager, SessionOptions(llm="scripted", agent=f"{module}:Helper")
        )
        assert isinstance(agent, Agent) and agent.instructions == "I help."
        with pytest.raises(click.BadParameter, match="is not an Agent"):
            build_session(
                plugin_manager, SessionOptions(llm="scripted", agent=f"{module}:NOT_AN_AGENT")
            )
        with pytest.raises(click.BadParameter, match="cannot load"):
            build_session(plugin_manager, SessionOptions(llm="scripted", agent=f"{module}:Nope"))
        with pytest.raises(click.BadParameter, match="expected MODULE:CLASS"):
            build_session(plugin_manager, SessionOptions(llm="scripted", agent=module))
    finally:
        sys.modules.pop(module, None)


def test_session_options_adds_the_shared_options_to_a_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[SessionOptions] = []

    @click.command()
    @session_options
    @click.option("--flag", is_flag=True)
    def front_end(session_options: SessionOptions, flag: bool) -> None:
        seen.append(session_options)

    monkeypatch.setenv("BACKLINE_LLM", "from-env")
    args = ["-b", "alpha", "--background", "beta", "-m", "opus", "--instructions", "Hi", "--flag"]
    result = CliRunner().invoke(front_end, args)

    assert result.exit_code == 0, result.output
    assert seen == [
        SessionOptions(
            backgrounds=("alpha", "beta"), llm="from-env", model="opus", instructions="Hi"
        )
    ]
    assert CliRunner().invoke(front_end, []).exit_code == 0
    assert seen[-1] == SessionOptions(llm="from-env")
    help_text = CliRunner().invoke(front_end, ["--help"]).output
    for option in ("--background", "--llm", "--model", "--instructions", "--agent"):
        assert option in help_text
