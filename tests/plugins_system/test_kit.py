"""The test kit: make_session, plugin_manager, drive_background and BackgroundDriver."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import backline
from backline import BackgroundContext, background
from backline.plugins import PluginError, PluginManager
from backline.testing import (
    BackgroundDriver,
    BackgroundRun,
    ScriptedLLM,
    SessionFactory,
    VirtualClock,
    drive_background,
    text,
)

Drive = Callable[..., Awaitable[BackgroundRun]]


@background("echo", description="Echoes what it is told, on every channel.")
async def echo(ctx: BackgroundContext) -> None:
    ctx.set_state("idle")
    async for message in ctx.messages():
        async with ctx.turn():
            ctx.set_state(f"working on {message}")
            await ctx.send(f"noted {message}", silent=True)
            await asyncio.sleep(5)
            await ctx.send(f"done {message}")
        ctx.set_state("idle")


@background("crasher", description="Crashes on its first message.")
async def crasher(ctx: BackgroundContext) -> None:
    async for message in ctx.messages():
        raise ValueError(f"cannot handle {message}")


@background("stuck", description="Never finishes a turn.")
async def stuck(ctx: BackgroundContext) -> None:
    async for _ in ctx.messages():
        async with ctx.turn():
            await asyncio.Event().wait()


async def test_drive_background_reports_every_channel(
    virtual_clock: VirtualClock, drive_background: Drive
) -> None:
    run = await drive_background(echo, "first", "second")

    assert run.background_id == "echo"
    assert run.silent == ["noted first", "noted second"]
    assert run.spoken == ["done first", "done second"]
    assert run.states == ["idle", "working on first", "idle", "working on second", "idle"]
    assert run.state == "idle"
    assert run.statuses == ["running", "busy", "idle", "busy", "idle"]
    assert "done first" in run.transcript and "done second" in run.transcript
    assert virtual_clock.elapsed >= 10  # two turns of five seconds, instantly


async def test_drive_background_without_the_voice_agent_turn(virtual_clock: VirtualClock) -> None:
    run = await drive_background(echo, "direct", via_voice_agent=False)

    assert run.spoken == ["done direct"]
    assert run.transcript == ["done direct"]  # only the relayed update was spoken


async def test_drive_background_raises_when_the_background_crashes(
    virtual_clock: VirtualClock,
) -> None:
    with pytest.raises(RuntimeError, match="'crasher' crashed: ValueError: cannot handle boom"):
        await drive_background(crasher, "boom")


async def test_drive_background_times_out_on_loop_time(virtual_clock: VirtualClock) -> None:
    with pytest.raises(TimeoutError, match=r"timed out after 30\.0s waiting for the backgrounds"):
        await drive_background(stuck, "hang", timeout=30.0)
    assert virtual_clock.elapsed >= 30


async def test_the_driver_forwards_user_turns_through_backline_send(
    virtual_clock: VirtualClock,
) -> None:
    async with BackgroundDriver(echo) as driver:
        run = await driver.say("check the logs")
        run.expect.next_event().is_function_call(
            name="backline_send",
            arguments={"background_session_id": "echo", "content": "check the logs"},
        )
        spoken = await driver.wait_for_spoken()
        state = await driver.wait_for_state(lambda s: s == "idle")
        await driver.wait_until_done()

    assert spoken == ["done check the logs"]
    assert state == "idle"
    assert driver.result().transcript[0] == "Okay, I've passed that on."


async def test_the_driver_targets_one_of_several_backgrounds(virtual_clock: VirtualClock) -> None:
    @background("other", description="Says one thing.")
    async def other(ctx: BackgroundContext) -> None:
        async for message in ctx.messages():
            await ctx.send(f"other got {message}")

    async with BackgroundDriver(echo, other, target="other") as driver:
        assert await driver.send("hi") == "Message has been delivered."
        assert await driver.wait_for_spoken() == ["other got hi"]
        await driver.wait_until_done()
        assert driver.result("echo").spoken == []

    with pytest.raises(ValueError, match="target 'nope' is not one of echo"):
        BackgroundDriver(echo, target="nope")


async def test_make_session_starts_a_session_with_backgrounds_and_a_scripted_llm(
    make_session: SessionFactory,
) -> None:
    session = await make_session(echo)

    assert isinstance(session.llm, ScriptedLLM)
    assert session.background is not None and session.background.sorted_ids() == ["echo"]
    assert {"backline_send", "backline_state", "backline_stop"} <= {t.name for t in session.tools}
    session.llm.push(text("Hello."))
    result = await session.run(user_input="hi")
    result.expect.next_event().is_message(role="assistant", content="Hello.")


async def test_make_session_closes_its_sessions() -> None:
    factory = SessionFactory()
    session = await factory(llm=ScriptedLLM())

    await factory.aclose()

    assert session.closed


class Observer:
    def __init__(self) -> None:
        self.started: list[Any] = []

    @backline.hookimpl
    def session_started(self, session: Any) -> None:
        self.started.append(session)

    @backline.hookimpl
    def register_background_sessions(self, register: Any) -> None:
        register(echo)


async def test_plugin_manager_fixture_registers_for_this_test_and_observes_sessions(
    plugin_manager: PluginManager, make_session: SessionFactory
) -> None:
    observer = Observer()
    info = plugin_manager.register(observer, name="observer")

    assert info.status == "loaded"
    assert plugin_manager.llm_names() == ["anthropic"]  # built-ins, no installed plugins
    assert plugin_manager.plugins(include_builtin=False) == [info]
    session = await make_session(*plugin_manager.background_definitions())
    assert observer.started == [session]
    assert plugin_manager.active


def test_plugin_manager_fixture_is_strict(plugin_manager: PluginManager) -> None:
    class Broken:
        @backline.hookimpl
        def register_tools(self, register: Any) -> None:
            raise RuntimeError("broken")

    with pytest.raises(PluginError, match="register_tools raised RuntimeError: broken"):
        plugin_manager.register(Broken(), name="broken")


STRICT_MODE_TEST = """
import asyncio

import pytest

from backline import Agent
from backline.testing import text

pytestmark = pytest.mark.asyncio


async def test_fixtures_work_in_strict_mode(virtual_clock, make_session) -> None:
    session = await make_session(agent=Agent("Be brief."))
    session.llm.push(text("Hello."))
    result = await session.run(user_input="hi")
    assert result.final_output == "Hello."
    await asyncio.sleep(60)
    assert virtual_clock.elapsed >= 60
"""


def test_the_kit_fixtures_work_in_pytest_asyncio_strict_mode(tmp_path: Path) -> None:
    (tmp_path / "test_strict.py").write_text(STRICT_MODE_TEST)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = strict\nasyncio_default_fixture_loop_scope = function\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_strict.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
