"""Observer hooks (session_started / session_closed) and register_commands."""

from __future__ import annotations

from typing import Any

import click
import pytest

import backline
from backline import Agent, Session
from backline.cli import make_cli
from backline.plugins import RESERVED_OWNER, PluginManager
from backline.testing import ScriptedLLM


def bare_manager() -> PluginManager:
    return PluginManager(entry_points=False, builtins=False).load()


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    @backline.hookimpl
    def session_started(self, session: Any) -> None:
        self.calls.append(("started", session))

    @backline.hookimpl
    def session_closed(self, session: Any) -> None:
        self.calls.append(("closed", session))


class RaisingObserver:
    @backline.hookimpl
    def session_started(self) -> None:
        raise RuntimeError("observer exploded")


async def test_observers_see_sessions_start_and_close_and_a_raising_one_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder()
    manager = bare_manager()
    manager.register(RaisingObserver(), name="raising")
    manager.register(recorder, name="recorder")
    manager.activate()
    try:
        async with Session(ScriptedLLM(["hello"])) as session:
            await session.start(Agent("Be brief."))
            assert recorder.calls == [("started", session)]
            result = await session.run(user_input="hi")  # the session is unharmed
            assert result.final_output == "hello"  # type: ignore[attr-defined]
        assert recorder.calls == [("started", session), ("closed", session)]
        assert "plugin 'raising': its session_started observer raised" in caplog.text
        assert "observer exploded" in caplog.text
    finally:
        manager.deactivate()
    assert not manager.active


async def test_an_inactive_manager_observes_nothing() -> None:
    recorder = Recorder()
    manager = bare_manager()
    manager.register(recorder, name="recorder")

    async with Session(ScriptedLLM()) as session:
        await session.start(Agent("Be brief."))

    assert recorder.calls == []


class AddsHello:
    @backline.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        @cli.command()
        def hello() -> None:
            """Say hello."""
            click.echo("hello from a plugin")


class RaisesHalfway:
    @backline.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        @cli.command()
        def half() -> None:
            """Never kept."""

        raise RuntimeError("commands exploded")


class ReplacesPlugins:
    @backline.hookimpl
    def register_commands(self, cli: click.Group) -> None:
        @cli.command("plugins")
        def fake() -> None:
            """Shadows the built-in."""


def test_register_commands_adds_commands_and_isolates_failures() -> None:
    group = make_cli()
    builtin_plugins = group.commands["plugins"]
    manager = bare_manager()
    for plugin, name in (
        (AddsHello(), "adds"),
        (RaisesHalfway(), "raises"),
        (ReplacesPlugins(), "replaces"),
    ):
        manager.register(plugin, name=name)

    manager.register_commands(group)

    assert manager.plugin("adds").commands == ["hello"]
    assert manager.owner("command", "hello") == "adds"
    raises = manager.plugin("raises")
    assert raises.status == "failed"
    assert raises.error == "register_commands raised RuntimeError: commands exploded"
    assert "half" not in group.commands
    replaces = manager.plugin("replaces")
    assert replaces.status == "failed"
    assert replaces.error == (
        f"command 'plugins' is reserved by backline; 'replaces' cannot register it "
        f"(clash with {RESERVED_OWNER})"
    )
    assert group.commands["plugins"] is builtin_plugins


def test_two_plugins_adding_the_same_command_clash() -> None:
    group = make_cli()
    manager = bare_manager()
    manager.register(AddsHello(), name="first")
    manager.register_commands(group)

    info = manager.register(AddsHello(), name="second")  # registered late: commands at once

    assert info.status == "failed"
    assert info.error is not None
    assert "command 'hello' is registered by both 'first' and 'second'" in info.error
    assert manager.plugin("first").commands == ["hello"]
