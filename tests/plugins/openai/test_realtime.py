"""OpenAIRealtimeLLM against a Realtime server on loopback (``fake_realtime``): a text
turn, a tool call, a background's silent (synced at once) and spoken updates, a barge-in, the
background-work flag and the away timer (catalog 130-134), a dropped socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from backline_openai.realtime import OpenAIRealtimeLLM

from backline import (
    Agent,
    AgentTask,
    BackgroundContext,
    LLMMetrics,
    Session,
    StopResponse,
    background,
    function_tool,
)
from backline.llm import (
    ChatContext,
    LLMError,
    LLMTimeoutError,
    TextDelta,
    ToolCallChunk,
    Usage,
)
from backline.testing.clock import virtual_clock
from tests.background_kit import worker
from tests.conftest import Recorder
from tests.plugins.openai import fake_realtime as fr
from tests.plugins.openai.fake_realtime import FakeRealtimeServer

WAIT = 20.0  # bounds a hang only


@pytest.fixture
async def server() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer() as fake:
        yield fake


@pytest.fixture
async def make_llm(server: FakeRealtimeServer) -> AsyncIterator[Callable[..., OpenAIRealtimeLLM]]:
    made: list[OpenAIRealtimeLLM] = []

    def make(**kwargs: Any) -> OpenAIRealtimeLLM:
        kwargs.setdefault("base_url", server.url)
        kwargs.setdefault("api_key", "sk-test")
        kwargs.setdefault("ping_interval", None)
        llm = OpenAIRealtimeLLM(**kwargs)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()


@function_tool
async def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


def created(server: FakeRealtimeServer) -> list[dict[str, Any]]:
    return [e["item"] for e in server.sent("conversation.item.create")]


async def test_a_text_turn_in_a_session(
    server: FakeRealtimeServer,
    make_llm: Callable[..., OpenAIRealtimeLLM],
    no_leaked_tasks: Callable[[], Any],
) -> None:
    server.push(fr.text("Hello, how can I help?"))
    llm = make_llm(model="gpt-realtime")
    session: Session[Any] = Session(llm)
    rec = Recorder(session)
    await session.start(Agent("Be brief."))
    result = await session.run(user_input="hi", timeout=WAIT)
    result.expect.next_event().is_message(role="assistant", content="Hello, how can I help?")
    await session.aclose()
    await llm.aclose()
    await no_leaked_tasks()

    (update,) = server.sent("session.update")
    assert update["session"] == {"type": "realtime", "output_modalities": ["text"]}
    assert [(i["type"], i["role"], i["content"]) for i in created(server)] == [
        ("message", "user", [{"type": "input_text", "text": "hi"}])
    ]
    (create,) = server.sent("response.create")
    assert create["response"]["instructions"] == "Be brief."
    assert create["response"]["output_modalities"] == ["text"]
    assert server.errors == []
    (metrics,) = rec.of("llm_metrics")
    assert isinstance(metrics, LLMMetrics)
    assert (metrics.llm, metrics.model, metrics.status) == (
        "OpenAIRealtimeLLM",
        "gpt-realtime",
        "completed",
    )
    assert metrics.ttft is not None and metrics.output_tokens == 5


async def test_usage_and_the_stream(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    server.push(fr.text("One two three"))
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="count")
    async with llm.chat(ctx) as stream:
        chunks = [c async for c in stream]
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["One", " two", " three"]
    usage = chunks[-1]
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == (17, 5, 3)
    assert usage.ttft is not None and usage.stop_reason == "completed"
    assert server.sent("session.update")[0]["session"]["output_modalities"] == ["text"]


async def test_a_tool_call_and_its_continuation(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    server.push(fr.call("get_weather", city="Oslo"), fr.text("It is sunny in Oslo."))
    llm = make_llm()
    seen: list[tuple[str, bool]] = []
    server.probe = lambda e: seen.append((e["type"], llm.background_work_running))
    changes: list[bool] = []
    llm.add_background_work_listener(changes.append)
    assert llm.background_work_running is False
    session: Session[Any] = Session(llm, tools=[get_weather])
    await session.start(Agent("Help."))
    result = await session.run(user_input="weather in Oslo?", timeout=WAIT)
    result.expect.next_event().is_function_call(name="get_weather", arguments={"city": "Oslo"})
    result.expect.next_event().is_function_call_output(output="Sunny in Oslo.")
    result.expect.next_event().is_message(role="assistant", content="It is sunny in Oslo.")
    await session.aclose()

    assert server.errors == []
    creates = server.sent("response.create")
    assert len(creates) == 2
    assert creates[0]["response"]["tools"][0]["name"] == "get_weather"
    assert [i["type"] for i in server.conversation] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    (output,) = [i for i in created(server) if i["type"] == "function_call_output"]
    assert output["output"] == "Sunny in Oslo."
    assert server.sent("conversation.item.delete") == []  # the server's items were kept
    # Catalog 132: busy from the first response.create; still busy while the call is
    # open, when its output goes and the continuation is asked for; idle at the end.
    assert seen[0] == ("session.update", False)
    assert [busy for kind, busy in seen if kind == "response.create"] == [True, True]
    assert [busy for kind, busy in seen if kind == "conversation.item.create"][1:] == [True]
    assert llm.background_work_running is False


async def test_silent_and_spoken_background_updates(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    go_silent, go_spoken = asyncio.Event(), asyncio.Event()

    @background("coder", description="Writes code in the repository.")
    async def coder(ctx: BackgroundContext) -> None:
        async for task in ctx.messages():
            async with ctx.turn():
                await go_silent.wait()
                await ctx.send(f"started: {task}", silent=True)
                await go_spoken.wait()
                await ctx.send(f"finished: {task}")

    server.push(
        fr.call("backline_send", background_session_id="coder", content="fix the login"),
        fr.text("I asked the coder."),
        fr.text("The login is fixed."),
    )
    llm = make_llm()
    session: Session[Any] = Session(llm, background=[coder])
    rec = Recorder(session)
    spoken = asyncio.Event()
    session.on("background_reply", lambda e: spoken.set() if e.status == "completed" else None)
    await session.start(Agent("You front a coding agent."))
    await session.run(user_input="fix the login", timeout=WAIT)
    assert len(server.sent("response.create")) == 2  # the tool call, its continuation
    # The silent note reaches the model at once: an item, no response.
    arrived = asyncio.Event()
    server.probe = lambda e: arrived.set() if "started:" in json_text(e.get("item") or {}) else None
    go_silent.set()
    await asyncio.wait_for(arrived.wait(), WAIT)
    assert server.received[-1]["type"] == "conversation.item.create"
    assert len(server.sent("response.create")) == 2
    assert await session.wait_for_idle(timeout=WAIT)
    go_spoken.set()
    await asyncio.wait_for(spoken.wait(), WAIT)
    assert await session.wait_for_idle(timeout=WAIT)
    await session.aclose()

    assert server.errors == []
    assert [e.content for e in rec.of("background_message")] == [
        "started: fix the login",
        "finished: fix the login",
    ]
    # The spoken update: its item and its one response.create (the silent note is
    # held already: not sent again).
    tail = [(e["type"], json_text(e.get("item") or {})) for e in server.received[-2:]]
    assert [kind for kind, _ in tail] == ["conversation.item.create", "response.create"]
    assert "finished: fix the login" in tail[0][1]
    assert (
        len(
            [
                e
                for e in server.sent("conversation.item.create")
                if "started:" in json_text(e["item"])
            ]
        )
        == 1
    )
    assert len(server.sent("response.create")) == 3
    assert server.conversation[-1]["content"][0]["text"] == "The login is fixed."


async def drain(llm: OpenAIRealtimeLLM, ctx: ChatContext) -> None:
    async with llm.chat(ctx) as stream:
        async for _ in stream:
            pass


def json_text(item: dict[str, Any]) -> str:
    return " ".join(str(c.get("text", "")) for c in item.get("content") or ())


async def test_barge_in_cancels_and_the_next_sync_replaces_the_reply(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    release = asyncio.Event()
    server.push([("text", "Once upon a time"), ("wait", release)], fr.text("Sure."))
    server.hold_cancel = asyncio.Event()  # the cancelled response ends when told
    llm = make_llm()
    session: Session[Any] = Session(llm, user_away_timeout=5.0)
    rec = Recorder(session)
    await session.start(Agent("Tell stories."))
    speaking = asyncio.Event()
    session.on("agent_state_changed", lambda e: speaking.set() if e.new == "speaking" else None)
    session.push_user_turn("a story")
    await asyncio.wait_for(speaking.wait(), WAIT)
    idle = asyncio.Event()
    session.on("agent_state_changed", lambda e: idle.set() if e.new == "listening" else None)
    session.interrupt()
    await asyncio.wait_for(server.cancelled.wait(), WAIT)
    assert server.sent("response.cancel")
    # The server still works on the cancelled response: the model is busy, and the
    # away timer holds while both are listening (catalog 130, on the virtual clock).
    await asyncio.wait_for(idle.wait(), WAIT)
    assert llm.background_work_running
    with virtual_clock():
        await asyncio.sleep(15.0)
    assert session.user_state == "listening"
    assert "away" not in rec.user_states
    server.hold_cancel.set()
    settled = asyncio.Event()
    llm.add_background_work_listener(lambda busy: settled.set() if not busy else None)
    await asyncio.wait_for(settled.wait(), WAIT)

    result = await session.run(user_input="another one", timeout=WAIT)
    result.expect.contains_message(role="assistant", content="Sure.")
    await session.aclose()

    assert server.errors == []
    # The server kept more than was shown ("... and more"); the next sync deleted it and
    # created the reply as the runtime holds it (what was heard).
    (deleted,) = server.sent("conversation.item.delete")
    kept = [i for i in server.conversation if i.get("role") == "assistant"]
    assert deleted["item_id"] not in [i["id"] for i in server.conversation]
    first = kept[0]["content"][0]["text"]
    assert first.startswith("Once") and "and more" not in first
    assert [i["role"] for i in server.conversation if i["type"] == "message"] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_a_dropped_socket_fails_clearly_and_the_next_call_reconnects(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    server.push([("text", "Hel"), ("drop",)], fr.text("Hello again."))
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    with pytest.raises(LLMError, match="connection") as raised:
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    assert "reconnects" in str(raised.value)
    assert llm.background_work_running is False
    ctx.add_message(role="user", content="are you there?")
    async with llm.chat(ctx) as stream:
        texts = [c.text async for c in stream if isinstance(c, TextDelta)]
    assert "".join(texts) == "Hello again."
    assert (server.connections, llm.connects) == (2, 2)
    # The new session got the whole conversation again.
    assert [json_text(i) for i in server.conversation if i.get("role") == "user"] == [
        "hi",
        "are you there?",
    ]


async def test_no_server_is_one_clear_error(unused_tcp_port: int) -> None:
    llm = OpenAIRealtimeLLM(
        base_url=f"http://127.0.0.1:{unused_tcp_port}/v1", api_key="k", connect_timeout=5.0
    )
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    with pytest.raises(LLMError, match="Could not open OpenAI Realtime"):
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    await llm.aclose()


def test_the_url_and_the_key() -> None:
    llm = OpenAIRealtimeLLM(api_key="k")
    assert llm.url == "wss://api.openai.com/v1/realtime?model=gpt-realtime"
    assert llm.realtime is llm
    missing = OpenAIRealtimeLLM()
    assert missing.missing_key is not None and "OPENAI_API_KEY" in missing.missing_key


async def test_a_handoff_reuses_the_session_with_the_new_agents_context(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    class Billing(Agent):
        def __init__(self) -> None:
            super().__init__("You handle billing.")

        async def on_enter(self) -> None:
            self.session.generate_reply(instructions="greet")

    class Front(Agent):
        def __init__(self) -> None:
            super().__init__("You are the front desk.")

        @function_tool
        async def to_billing(self) -> tuple[str, Agent]:
            """Transfer to billing."""
            return "transferring", Billing()

    server.push(fr.text("One moment.") + fr.call("to_billing"), fr.text("Billing here."))
    llm = make_llm()
    listeners: list[int] = []
    server.probe = lambda e: listeners.append(len(llm._listeners))
    session: Session[Any] = Session(llm)
    await session.start(Front())
    result = await session.run(user_input="billing please", timeout=WAIT)
    result.expect.contains_message(role="assistant", content="Billing here.")
    assert type(session.current_agent) is Billing
    assert len(llm._listeners) == 1  # the new agent's activity holds the one listener
    await session.aclose()
    assert llm._listeners == []

    assert server.errors == []
    assert server.connections == 1  # the same session, reused
    first, second = server.sent("response.create")
    assert first["response"]["instructions"] == "You are the front desk."
    assert "You handle billing." in second["response"]["instructions"]
    assert "to_billing" not in [t["name"] for t in second["response"]["tools"]]
    # What the server holds is what the new agent's context says.
    assert server.conversation[-1]["content"][0]["text"] == "Billing here."


async def test_a_refused_request_is_one_clear_error(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    server.refuse_next = "the model is not available to this project"
    with pytest.raises(LLMError, match="invalid_request: the model is not available"):
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    assert llm.background_work_running is False
    server.push(fr.text("fine"))  # the session goes on
    async with llm.chat(ctx) as stream:
        assert "".join([c.text async for c in stream if isinstance(c, TextDelta)]) == "fine"
    assert server.connections == 1


async def test_no_first_token_in_time_is_a_timeout(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    hold = asyncio.Event()
    server.push([("wait", hold)])
    llm = make_llm(first_token_timeout=0.2, settle_timeout=5.0)
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    with pytest.raises(LLMTimeoutError, match="first_token_timeout"):
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    await asyncio.wait_for(server.cancelled.wait(), WAIT)  # the response was cancelled
    hold.set()


async def test_a_cancelled_responses_calls_are_not_left_open(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    hold = asyncio.Event()
    server.push([*fr.call("get_weather", city="Oslo"), ("wait", hold)])
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="weather?")
    stream = llm.chat(ctx, tools=[get_weather])
    assert isinstance(await anext(stream), ToolCallChunk)
    await stream.aclose()  # a barge-in: the runtime runs none of its calls
    await asyncio.wait_for(server.cancelled.wait(), WAIT)
    settled = asyncio.Event()
    llm.add_background_work_listener(lambda busy: settled.set() if not busy else None)
    await asyncio.wait_for(settled.wait(), WAIT)  # the cancelled response's done ends it
    assert llm.background_work_running is False


async def test_the_handshake_carries_the_model_and_the_key(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    server.push(fr.text("ok"))
    llm = make_llm(model="gpt-realtime-mini", api_key="sk-secret")
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    await asyncio.wait_for(drain(llm, ctx), WAIT)
    assert server.paths == ["/v1/realtime?model=gpt-realtime-mini"]
    assert server.headers[0]["authorization"] == "Bearer sk-secret"


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (401, "the API key was rejected \\(HTTP 401\\) — OPENAI_API_KEY is missing or wrong"),
        (404, "not found \\(HTTP 404\\) — check -m MODEL"),
        (503, "refused the connection: HTTP 503"),
    ],
)
async def test_a_refused_handshake_says_what_to_do(
    server: FakeRealtimeServer,
    make_llm: Callable[..., OpenAIRealtimeLLM],
    status: int,
    says: str,
) -> None:
    server.reject_status = status
    llm = make_llm(api_key="sk-secret")
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    with pytest.raises(LLMError, match=says) as raised:
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    assert "sk-secret" not in str(raised.value)
    assert raised.value.status == status
    assert raised.value.retryable == (status == 503)


async def test_a_refused_item_is_warned_about_and_not_sent_again(
    server: FakeRealtimeServer,
    make_llm: Callable[..., OpenAIRealtimeLLM],
    caplog: pytest.LogCaptureFixture,
) -> None:
    server.refuse_text = "forbidden"
    server.push(fr.text("Answered anyway."), fr.text("Next."))
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="something forbidden")
    async with llm.chat(ctx) as stream:
        texts = [c.text async for c in stream if isinstance(c, TextDelta)]
    assert "".join(texts) == "Answered anyway."
    assert server.errors == ["invalid_value: this item is refused"]
    assert "the model does not see it" in caplog.text
    ctx.add_message(role="assistant", content="Answered anyway.")
    ctx.add_message(role="user", content="next")
    async with llm.chat(ctx) as stream:
        assert [c async for c in stream]
    sent = [json_text(i) for i in created(server)]
    assert sent == ["something forbidden", "next"]  # neither re-sent nor shuffled
    assert server.sent("conversation.item.delete") == []


async def test_a_slow_tool_keeps_the_agent_thinking_and_the_user_present(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    """Catalog 119 and 122 through the realtime model: the agent is "thinking" while
    the tool runs, and the user is not marked away meanwhile (on the virtual clock);
    the continuation is spoken, then "listening"."""
    release, started = asyncio.Event(), asyncio.Event()

    @function_tool
    async def build() -> str:
        """Build the project."""
        started.set()
        await release.wait()
        return "built"

    server.push(fr.call("build"), fr.text("The build is done."))
    llm = make_llm()
    session: Session[Any] = Session(llm, tools=[build], user_away_timeout=5.0)
    rec = Recorder(session)
    await session.start(Agent("Help."))
    session.push_user_turn("build it")
    await asyncio.wait_for(started.wait(), WAIT)
    assert session.agent_state == "thinking"
    assert llm.background_work_running  # the call is open
    with virtual_clock():
        await asyncio.sleep(15.0)
    assert session.user_state == "listening" and session.agent_state == "thinking"
    release.set()
    assert await session.wait_for_idle(timeout=WAIT)
    await session.aclose()
    assert rec.agent_states[-2:] == ["speaking", "listening"]
    assert "away" not in rec.user_states
    assert server.conversation[-1]["content"][0]["text"] == "The build is done."


async def test_a_tool_that_stops_the_reply_closes_its_call_at_once(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    """A tool that asks for no reply (``StopResponse``): its output reaches the model
    at once, without a response, so the call is not left open (the model not "busy")
    until the next request."""

    @function_tool
    async def hang_up() -> str:
        """End the call."""
        raise StopResponse()

    server.push(fr.call("hang_up"))
    llm = make_llm()
    session: Session[Any] = Session(llm, tools=[hang_up])
    await session.start(Agent("Help."))
    idle = asyncio.Event()
    llm.add_background_work_listener(lambda busy: idle.set() if not busy else None)
    await session.run(user_input="bye", timeout=WAIT)
    await asyncio.wait_for(idle.wait(), WAIT)
    assert llm.background_work_running is False
    (output,) = [e for e in created(server) if e["type"] == "function_call_output"]
    assert server.received[-1]["item"] == output  # no response.create after it
    assert len(server.sent("response.create")) == 1
    await session.aclose()
    assert server.errors == []


async def test_an_urgent_background_update_cancels_the_response_and_is_spoken(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    """``ctx.send(..., interrupt=True)``: the model's response is cancelled (what was
    shown is kept) and the update gets a response of its own at once."""
    hold = asyncio.Event()
    server.push([("text", "Once upon a time"), ("wait", hold)], fr.text("The build broke."))
    llm = make_llm()
    session: Session[Any] = Session(llm, background=[worker])
    await session.start(Agent("Help."))
    speaking = asyncio.Event()
    session.on("agent_state_changed", lambda e: speaking.set() if e.new == "speaking" else None)
    session.push_user_turn("tell me a story")
    await asyncio.wait_for(speaking.wait(), WAIT)
    await session.background.context("worker").send("the build broke", interrupt=True)
    await asyncio.wait_for(server.cancelled.wait(), WAIT)
    assert await session.wait_for_idle(timeout=WAIT)
    replies = [
        (m.content, m.interrupted)
        for m in session.history.items
        if getattr(m, "role", None) == "assistant"
    ]
    assert replies[0][1] and "Once upon a time".startswith(replies[0][0])
    assert replies[-1] == ("The build broke.", False)
    assert len(server.sent("response.create")) == 2
    assert "the build broke" in json_text(server.sent("conversation.item.create")[-1]["item"])
    await session.aclose()
    assert server.errors == []


async def test_an_inline_agent_task_runs_on_the_same_realtime_session(
    server: FakeRealtimeServer, make_llm: Callable[..., OpenAIRealtimeLLM]
) -> None:
    """An ``AgentTask`` awaited from a tool takes the conversation and gives it back: the
    one socket carries both agents' contexts (each request syncs its own)."""

    class AskName(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__("Ask the user's name.")

        async def on_enter(self) -> None:
            self.session.generate_reply(instructions="ask for the name")

        @function_tool
        async def record_name(self, name: str) -> None:
            """Record the name."""
            self.complete(name)

    class Root(Agent):
        def __init__(self) -> None:
            super().__init__("Help.")

        @function_tool
        async def get_name(self) -> str:
            """Find out the user's name."""
            return f"the name is {await AskName()}"

    server.push(
        fr.call("get_name"),
        fr.text("What is your name?"),
        [("call", "record_name", {"name": "Ada"})],
        fr.text("Nice to meet you, Ada."),
    )
    llm = make_llm()
    session: Session[Any] = Session(llm)
    await session.start(Root())
    first = await session.run(user_input="hi", timeout=WAIT)
    first.expect.contains_message(role="assistant", content="What is your name?")
    second = await session.run(user_input="Ada", timeout=WAIT)
    second.expect.contains_message(role="assistant", content="Nice to meet you, Ada.")
    assert isinstance(session.current_agent, Root)
    await session.aclose()
    assert server.connections == 1
    assert server.errors == []
    outputs = [
        e["item"]["output"]
        for e in server.sent("conversation.item.create")
        if e["item"]["type"] == "function_call_output"
    ]
    assert "the name is Ada" in outputs
    instructions = [e["response"]["instructions"] for e in server.sent("response.create")]
    assert instructions[1].startswith("Ask the user's name.")
