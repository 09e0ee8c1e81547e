"""MCP servers mounted as voice tools: a server written with the ``mcp`` package, called by
the voice agent (ScriptedLLM), with a timeout, a crash, list_changed and clashes."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backline import Agent, FunctionCallOutput, Limits, Session, function_tool
from backline.mcp import MCPServerHTTP, MCPServerStdio, McpToolset
from backline.testing import LLMRequest, ScriptedLLM, ScriptedResponse, text, tool_calls
from tests.mcp.conftest import in_own_task

WEATHER = Path(__file__).with_name("weather_server.py")
RUN = 60.0  # bounds a run: starting the server (importing mcp) is the slow part

pytestmark = pytest.mark.timeout(180)


class Caller:
    """A scripted voice model: calls the tools it is told to, one turn each, then says
    what the last output was; a scheduled reply (tools off) says "update"."""

    def __init__(self) -> None:
        self.next_calls: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[LLMRequest] = []

    def __call__(self, request: LLMRequest) -> ScriptedResponse:
        self.requests.append(request)
        if request.tool_choice == "none":
            return text("update")
        last = request.chat_ctx.items[-1]
        if isinstance(last, FunctionCallOutput):
            return text(f"output: {last.output}")
        return tool_calls(*self.next_calls)

    @property
    def outputs(self) -> list[FunctionCallOutput]:
        return [
            i for r in self.requests for i in r.chat_ctx.items if isinstance(i, FunctionCallOutput)
        ]


def weather(pids: Path, **options: Any) -> MCPServerStdio:
    return MCPServerStdio(
        "weather",
        command=sys.executable,
        args=[str(WEATHER)],
        env={"WEATHER_PID_FILE": str(pids)},
        **options,
    )


def started_pids(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def ask(session: Session[Any], caller: Caller, *calls: tuple[str, dict[str, Any]]) -> str:
    """One user turn in which the model calls ``calls``; the output the model read."""
    caller.next_calls = list(calls)
    result = await session.run(user_input="go", timeout=RUN)
    outputs = [e.item for e in result.events if isinstance(e.item, FunctionCallOutput)]
    return "\n".join(o.output for o in outputs)


@pytest.fixture
def pids(tmp_path: Path) -> Path:
    return tmp_path / "pids"


@pytest.fixture
async def mounted(pids: Path) -> AsyncIterator[tuple[Session[Any], Caller]]:
    caller = Caller()
    session: Session[Any] = Session(
        ScriptedLLM(caller), mcp_servers=[weather(pids, timeout=1.0)], user_away_timeout=None
    )
    await session.start(Agent("You check the weather."))
    try:
        yield session, caller
    finally:
        await session.aclose()


async def test_the_voice_agent_calls_a_mounted_tool(
    mounted: tuple[Session[Any], Caller], pids: Path
) -> None:
    session, caller = mounted

    output = await ask(session, caller, ("weather__forecast", {"city": "Paris"}))

    assert output == "Sunny in Paris, 21 degrees."
    offered = {t.name: t for t in caller.requests[0].tools}
    assert {"weather__forecast", "weather__slow", "weather__crash"} <= set(offered)
    forecast = offered["weather__forecast"]
    assert forecast.description == "The forecast for a city."
    assert forecast.parameters["properties"]["city"]["type"] == "string"
    assert forecast.parameters["required"] == ["city"]
    assert len(started_pids(pids)) == 1


async def test_arguments_are_checked_against_the_schema_before_the_call(
    mounted: tuple[Session[Any], Caller],
) -> None:
    session, caller = mounted

    output = await ask(session, caller, ("weather__forecast", {"town": "Paris"}))

    assert output.startswith("Invalid arguments for tool 'weather__forecast'")
    assert "'city' is a required property" in output


async def test_a_tool_error_of_the_server_reaches_the_model(
    mounted: tuple[Session[Any], Caller],
) -> None:
    session, caller = mounted

    output = await ask(session, caller, ("weather__fail", {}))

    assert "the weather station is offline" in output


async def test_a_call_that_times_out_is_an_error_and_the_next_call_reconnects(
    mounted: tuple[Session[Any], Caller], pids: Path
) -> None:
    session, caller = mounted
    (first,) = started_pids(pids)

    timed_out = await ask(session, caller, ("weather__slow", {"seconds": 30}))
    after = await ask(session, caller, ("weather__forecast", {"city": "Oslo"}))

    assert timed_out == (
        "the tool 'slow' of MCP server 'weather' did not answer within 1 s. It was stopped; "
        "the next call starts the server again."
    )
    assert after == "Sunny in Oslo, 21 degrees."
    assert not alive(first)  # the hung server was stopped
    assert len(started_pids(pids)) == 2


async def test_a_crash_is_an_error_the_model_reads_and_the_next_call_restarts_the_server(
    mounted: tuple[Session[Any], Caller], pids: Path
) -> None:
    session, caller = mounted

    crashed = await ask(session, caller, ("weather__crash", {}))
    after = await ask(session, caller, ("weather__forecast", {"city": "Rome"}))

    assert crashed.startswith("the tool 'crash' of MCP server 'weather' failed: the server stopped")
    assert "it said: weather server: crashing on purpose" in crashed
    assert "The next call starts it again." in crashed
    assert after == "Sunny in Rome, 21 degrees."
    assert len(started_pids(pids)) == 2


async def test_progress_makes_the_call_a_deferred_tool(
    mounted: tuple[Session[Any], Caller],
) -> None:
    session, caller = mounted
    updates: list[str] = []
    session.on("tool_updated", lambda e: updates.append(e.message))

    first = await ask(session, caller, ("weather__progress", {"steps": 3}))

    assert first.startswith("The task is still running in the background. Progress so far: ")
    assert updates[:3] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    finals = [o.output for o in caller.outputs if o.call_id.endswith("_final")]
    assert finals == ["all 3 steps done"]


async def test_tools_list_changed_refreshes_the_tools(mounted: tuple[Session[Any], Caller]) -> None:
    session, caller = mounted
    changed = asyncio.Event()
    (toolset,) = session.parts
    assert isinstance(toolset, McpToolset)
    toolset.on_change = changed.set

    assert await ask(session, caller, ("weather__grow", {})) == "added humidity"
    await asyncio.wait_for(changed.wait(), RUN)
    assert "weather__humidity" in {t.name for t in session.tools}
    output = await ask(session, caller, ("weather__humidity", {"city": "Lima"}))

    assert output == "60% in Lima"
    assert "weather__humidity" in {t.name for t in caller.requests[-2].tools}


async def test_closing_the_session_stops_every_server_it_started(pids: Path) -> None:
    session: Session[Any] = Session(
        ScriptedLLM(), mcp_servers=[weather(pids)], user_away_timeout=None
    )
    await session.start(Agent("Hi."))
    (pid,) = started_pids(pids)
    assert alive(pid)

    await session.aclose()

    assert not alive(pid)
    assert session.tools == []


async def test_a_clash_with_another_tool_is_a_clear_error_at_start_and_nothing_stays(
    pids: Path,
) -> None:
    @function_tool(name="weather__forecast")
    def forecast(city: str) -> str:
        """Our own forecast."""
        return "cloudy"

    session: Session[Any] = Session(
        ScriptedLLM(), tools=[forecast], mcp_servers=[weather(pids)], user_away_timeout=None
    )
    with pytest.raises(ValueError, match="the tool 'weather__forecast' of MCP server 'weather'"):
        await session.start(Agent("Hi."))

    assert [alive(pid) for pid in started_pids(pids)] == [False]
    assert session.closed


async def test_two_servers_with_one_name_are_refused_at_once(pids: Path) -> None:
    with pytest.raises(ValueError, match="MCP server name\\(s\\) given twice: weather"):
        Session(ScriptedLLM(), mcp_servers=[weather(pids), weather(pids)])
    with pytest.raises(TypeError, match="mcp_servers takes MCPServerStdio or MCPServerHTTP"):
        Session(ScriptedLLM(), mcp_servers=[{"command": "x"}])  # type: ignore[list-item]


SAYS_WHY = (
    "import sys, time; print('loading weather.toml', file=sys.stderr); "
    "print('Error: WEATHER_KEY is not set', file=sys.stderr, flush=True); "
    "time.sleep(600) if sys.argv[1:] == ['hang'] else sys.exit(4)"
)


async def test_a_server_that_cannot_start_fails_the_start_with_its_last_stderr_lines() -> None:
    broken = MCPServerStdio("broken", command=sys.executable, args=["-c", SAYS_WHY])
    session: Session[Any] = Session(ScriptedLLM(), mcp_servers=[broken], user_away_timeout=None)

    with pytest.raises(RuntimeError, match=r"MCP server 'broken' .* could not be started") as info:
        await session.start(Agent("Hi."))

    assert str(info.value).endswith("it said: loading weather.toml / Error: WEATHER_KEY is not set")
    assert session.tools == []


async def test_a_server_that_never_answers_fails_the_start_in_time_saying_what_it_said() -> None:
    hangs = MCPServerStdio("hangs", command=sys.executable, args=["-c", SAYS_WHY, "hang"])
    session: Session[Any] = Session(
        ScriptedLLM(),
        mcp_servers=[hangs],
        user_away_timeout=None,
        limits=Limits(mcp_start_timeout=5.0),  # (time for the process to write first)
    )

    with pytest.raises(RuntimeError, match=r"did not start within 5 s") as info:
        await session.start(Agent("Hi."))

    assert "it said: loading weather.toml / Error: WEATHER_KEY is not set" in str(info.value)


async def test_a_handoff_to_an_agent_whose_server_fails_is_not_made_and_says_why() -> None:
    class Front(Agent):
        def __init__(self) -> None:
            super().__init__("Front.")

        @function_tool
        async def to_weather(self) -> Agent:
            """Hand over to the weather agent."""
            broken = MCPServerStdio("broken", command=sys.executable, args=["-c", SAYS_WHY])
            return Agent("Weather.", mcp_servers=[broken])

    session: Session[Any] = Session(
        ScriptedLLM([tool_calls(("to_weather", {}))]), user_away_timeout=None
    )
    errors: list[Any] = []
    session.on("error", errors.append)
    async with session:
        front = Front()
        await session.start(front)
        await session.run(user_input="The weather, please.")

        assert session.current_agent is front  # nothing half-started: the old agent stays
        (failed,) = errors
        assert failed.source == "handoff" and failed.recoverable
        assert "could not be started" in str(failed.error)
        assert "it said: loading weather.toml / Error: WEATHER_KEY is not set" in str(failed.error)


async def test_one_server_failing_to_start_stops_the_others(pids: Path) -> None:
    exits = ["-c", "import sys; sys.exit(4)"]
    broken = MCPServerStdio("broken", command=sys.executable, args=exits)
    session: Session[Any] = Session(
        ScriptedLLM(), mcp_servers=[weather(pids), broken], user_away_timeout=None
    )

    with pytest.raises(RuntimeError, match="MCP server 'broken'"):
        await session.start(Agent("Hi."))

    assert [alive(pid) for pid in started_pids(pids)] in ([], [False])
    assert session.tools == []


async def test_an_agents_servers_run_while_it_runs(pids: Path) -> None:
    class Forecaster(Agent):
        def __init__(self) -> None:
            super().__init__("Forecasts.", mcp_servers=[weather(pids)])

        @function_tool
        async def leave(self) -> Agent:
            """Hand over to the plain agent."""
            return Agent("Plain.")

    caller = Caller()
    session: Session[Any] = Session(ScriptedLLM(caller), user_away_timeout=None)
    async with session:
        agent = Forecaster()
        await session.start(agent)
        assert "weather__forecast" in {t.name for t in agent.tools}
        assert await ask(session, caller, ("weather__forecast", {"city": "Kyiv"})) == (
            "Sunny in Kyiv, 21 degrees."
        )
        (pid,) = started_pids(pids)
        await ask(session, caller, ("leave", {}))

        assert not alive(pid)  # the agent stopped running: its server stopped
        assert "weather__forecast" not in {t.name for t in agent.tools}


async def test_a_server_over_streamable_http(tmp_path: Path) -> None:
    import uvicorn

    from backline.mcp.channel import stop_sse_watchers
    from tests.mcp.weather_server import build

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # listening now: connections wait until the server serves them
    port = sock.getsockname()[1]
    app = build().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        caller = Caller()
        http = MCPServerHTTP("weather", url=f"http://127.0.0.1:{port}/mcp", headers={"X-A": "b"})
        session: Session[Any] = Session(ScriptedLLM(caller), mcp_servers=[http])
        async with session:
            await session.start(Agent("Hi."))
            output = await ask(session, caller, ("weather__forecast", {"city": "Lagos"}))
    finally:
        server.should_exit = True
        await serving
        await stop_sse_watchers()  # what the mcp server's event streams leave on the loop

    assert output == "Sunny in Lagos, 21 degrees."


async def test_a_session_restarts_with_its_servers(pids: Path) -> None:
    caller = Caller()
    session: Session[Any] = Session(
        ScriptedLLM(caller), mcp_servers=[weather(pids)], user_away_timeout=None
    )
    await session.start(Agent("One."))
    await session.aclose()
    await session.start(Agent("Two."))
    try:
        output = await ask(session, caller, ("weather__forecast", {"city": "Lima"}))
    finally:
        await session.aclose()

    assert output == "Sunny in Lima, 21 degrees."
    assert [alive(pid) for pid in started_pids(pids)] == [False, False]


async def test_a_client_of_its_own_task_sees_the_same_tools(pids: Path) -> None:
    """What the session mounts is what the mcp package lists (in-process check)."""
    from mcp import Client

    from tests.mcp.weather_server import build

    async with in_own_task(Client(build())) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
    assert {"forecast", "slow", "crash", "progress", "grow", "fail"} == listed
