"""GeminiLiveLLM against a Gemini Live server on loopback (``fake_live``): a text turn,
a tool call (NON_BLOCKING, its response's scheduling), a background's silent and spoken
updates, an urgent one (sent at once, cutting the answer), a barge-in and the new
session it leads to, a handoff, the busy flag, a dropped socket resumed with the
server's handle, a refused handle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from backline_google.live import GeminiLiveLLM

from backline import Agent, BackgroundContext, LLMMetrics, Session, background, function_tool
from backline.llm import ChatContext, LLMError, TextDelta, ToolCallChunk, Usage
from backline.testing.clock import virtual_clock
from tests.conftest import Recorder
from tests.plugins.google import fake_live as fl
from tests.plugins.google.conftest import TEST_KEY
from tests.plugins.google.fake_live import FakeLiveServer, get

WAIT = 20.0  # bounds a hang only


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLiveServer]:
    monkeypatch.setenv("SSL_CERT_FILE", str(fl.CERT))  # google-genai trusts the fake's TLS
    async with FakeLiveServer(api_key=TEST_KEY) as fake:
        yield fake


@pytest.fixture
async def make_llm(server: FakeLiveServer) -> AsyncIterator[Callable[..., GeminiLiveLLM]]:
    made: list[GeminiLiveLLM] = []

    def make(**kwargs: Any) -> GeminiLiveLLM:
        kwargs.setdefault("model", "gemini-live-test")
        kwargs.setdefault("base_url", server.url)
        kwargs.setdefault("api_key", TEST_KEY)
        kwargs.setdefault("text_modality", True)
        llm = GeminiLiveLLM(**kwargs)
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


def user_texts(server: FakeLiveServer) -> list[tuple[str, bool]]:
    """Each clientContent's turns' text, and its turnComplete."""
    return [
        (
            " | ".join(server.texts(t) for t in get(body, "turns") or []),
            bool(get(body, "turnComplete")),
        )
        for body in server.sent("clientContent")
    ]


async def drain(llm: GeminiLiveLLM, ctx: ChatContext) -> list[Any]:
    async with llm.chat(ctx) as stream:
        return [c async for c in stream]


async def test_a_text_turn_in_a_session(
    server: FakeLiveServer,
    make_llm: Callable[..., GeminiLiveLLM],
    no_leaked_tasks: Callable[[], Any],
) -> None:
    server.push(fl.text("Hello, how can I help?"))
    llm = make_llm()
    session: Session[Any] = Session(llm)
    rec = Recorder(session)
    await session.start(Agent("Be brief."))
    result = await session.run(user_input="hi", timeout=WAIT)
    result.expect.next_event().is_message(role="assistant", content="Hello, how can I help?")
    await session.aclose()
    await llm.aclose()
    await no_leaked_tasks()

    assert server.paths == [
        "/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent"
    ]
    (setup,) = server.setups
    assert setup["model"] == "models/gemini-live-test"
    assert get(setup, "generationConfig")["responseModalities"] == ["TEXT"]
    assert server.texts(get(setup, "systemInstruction")) == "Be brief."
    assert get(setup, "sessionResumption") == {}
    assert user_texts(server) == [("hi", True)]
    assert server.errors == []
    (metrics,) = rec.of("llm_metrics")
    assert isinstance(metrics, LLMMetrics)
    assert (metrics.llm, metrics.model, metrics.status) == (
        "GeminiLiveLLM",
        "gemini-live-test",
        "completed",
    )
    assert metrics.ttft is not None and metrics.output_tokens == 7


async def test_a_tool_call_is_non_blocking_and_its_result_scheduled(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    server.push(fl.call("get_weather", city="Oslo"), fl.text("It is sunny in Oslo."))
    llm = make_llm()
    changes: list[bool] = []
    llm.add_background_work_listener(changes.append)
    session: Session[Any] = Session(llm, tools=[get_weather])
    await session.start(Agent("Help."))
    result = await session.run(user_input="weather in Oslo?", timeout=WAIT)
    result.expect.next_event().is_function_call(name="get_weather", arguments={"city": "Oslo"})
    result.expect.next_event().is_function_call_output(output="Sunny in Oslo.")
    result.expect.next_event().is_message(role="assistant", content="It is sunny in Oslo.")
    await session.aclose()

    assert server.errors == []
    (declaration,) = get(server.setups[0]["tools"][0], "functionDeclarations")
    assert declaration["name"] == "get_weather" and declaration["behavior"] == "NON_BLOCKING"
    (response,) = server.sent("toolResponse")
    (answer,) = get(response, "functionResponses")
    assert answer == {
        "id": "function-call-1",
        "name": "get_weather",
        "response": {"output": "Sunny in Oslo."},
        "scheduling": "WHEN_IDLE",
    }
    assert user_texts(server) == [("weather in Oslo?", True)]  # nothing sent twice
    assert server.connections == 1
    # Catalog 132: busy from the request, through the open call and the continuation.
    assert changes == [True, False]
    assert llm.background_work_running is False


async def test_silent_and_spoken_background_updates(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
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
        fl.call("backline_send", background_session_id="coder", content="fix the login"),
        fl.text("I asked the coder."),
        fl.text("The login is fixed."),
    )
    llm = make_llm()
    session: Session[Any] = Session(llm, background=[coder])
    rec = Recorder(session)
    spoken = asyncio.Event()
    session.on("background_reply", lambda e: spoken.set() if e.status == "completed" else None)
    await session.start(Agent("You front a coding agent."))
    await session.run(user_input="fix the login", timeout=WAIT)
    assert len(server.sent("clientContent")) == 1 and len(server.sent("toolResponse")) == 1
    # The silent note reaches the model at once (ContextFollower.context_changed): client
    # content that asks for no turn, before any other request.
    arrived = asyncio.Event()

    def probe(kind: str, body: Any) -> None:
        turns = get(body, "turns") or [] if kind == "clientContent" else []
        if any("started:" in server.texts(t) for t in turns):
            arrived.set()

    server.probe = probe
    go_silent.set()
    await asyncio.wait_for(arrived.wait(), WAIT)
    kind, body = server.received[-1]
    assert kind == "clientContent" and not get(body, "turnComplete")
    assert len(server.sent("clientContent")) == 2 and len(server.sent("toolResponse")) == 1
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
    sent = user_texts(server)
    assert sent[0] == ("fix the login", True)
    # The silent note only joined the context (turnComplete false); the spoken update
    # asked for the reply (its own instructions after it, turnComplete true).
    silent, spoken_update = sent[1], sent[2]
    assert "started: fix the login" in silent[0] and silent[1] is False
    assert "finished: fix the login" in spoken_update[0]
    assert sent[-1][1] is True and all(not complete for _, complete in sent[1:-1])
    # Held once sent: the spoken update's request did not send the note again.
    assert sum("started: fix the login" in text for text, _ in sent) == 1
    assert server.connections == 1
    assert server.texts(server.session.history[-1]) == "The login is fixed."


async def test_barge_in_and_the_new_session_seeded_with_the_context(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    release = asyncio.Event()
    server.push(
        [("text", "Once upon a time"), ("wait", release), ("text", "there was a fox.")],
        fl.text("Sure."),
    )
    llm = make_llm(settle_timeout=5.0)
    session: Session[Any] = Session(llm, user_away_timeout=None)
    await session.start(Agent("Tell stories."))
    speaking = asyncio.Event()
    session.on("agent_state_changed", lambda e: speaking.set() if e.new == "speaking" else None)
    session.push_user_turn("a story")
    await asyncio.wait_for(speaking.wait(), WAIT)
    session.interrupt()
    assert await session.wait_for_idle(timeout=WAIT)
    # Closing the stream sends nothing (a client-content turn has no cancel): the model
    # is still busy on the server until its turn ends.
    assert [k for k, _ in server.received] == ["setup", "clientContent"]
    assert llm.background_work_running
    release.set()
    result = await session.run(user_input="another one", timeout=WAIT)
    result.expect.contains_message(role="assistant", content="Sure.")
    await session.aclose()

    assert server.errors == []
    # The reply was cut to what was heard: the session held more, and cannot delete it.
    # A new session got the whole context in one message, ending with the new turn.
    assert server.connections == 2
    assert get(server.setups[1], "sessionResumption") == {}  # fresh, not resumed
    seeded = server.sent("clientContent")[-1]
    turns = get(seeded, "turns")
    assert [t["role"] for t in turns] == ["user", "model", "user"]
    assert server.texts(turns[0]) == "a story" and server.texts(turns[2]) == "another one"
    assert server.texts(turns[1]) == "Once upon a time"  # what was shown, not the fox
    assert get(seeded, "turnComplete") is True


async def test_a_handoff_reuses_the_model_with_the_new_agents_context(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
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

    server.push(fl.text("One moment.") + fl.call("to_billing"), fl.text("Billing here."))
    llm = make_llm()
    session: Session[Any] = Session(llm)
    await session.start(Front())
    result = await session.run(user_input="billing please", timeout=WAIT)
    result.expect.contains_message(role="assistant", content="Billing here.")
    assert type(session.current_agent) is Billing
    assert len(llm._listeners) == 1
    await session.aclose()
    assert llm._listeners == []

    assert server.errors == []
    assert llm.background_work_running is False  # the handoff's call is not left open
    # The new agent starts with a context of its own: the session held another one and
    # cannot delete it, so a new session is set up with the new agent's instructions
    # and tools (the reply's own instructions as its last turn).
    assert server.connections == 2
    second = server.setups[1]
    assert server.texts(get(second, "systemInstruction")) == "You handle billing."
    assert "tools" not in second
    (greet,) = get(server.sent("clientContent")[-1], "turns")
    assert server.texts(greet).endswith("greet")
    assert server.texts(server.session.history[-1]) == "Billing here."


async def test_a_dropped_socket_fails_the_turn_and_the_next_resumes_with_the_handle(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    server.push(fl.text("Hello."), [("text", "Hel"), ("drop",)], fl.text("Hello again."))
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    await drain(llm, ctx)
    handle = llm.resumption_handle
    assert handle == "handle-1"
    ctx.add_message(role="assistant", content="Hello.")
    ctx.add_message(role="user", content="still there?")
    with pytest.raises(LLMError, match="connection was lost") as raised:
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    assert "resumes" in str(raised.value) and raised.value.retryable
    assert llm.background_work_running is False
    ctx.add_message(role="user", content="are you there?")
    chunks = await drain(llm, ctx)
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "Hello again."
    assert (server.connections, llm.connects, llm.resumed) == (2, 2, 1)
    assert get(server.setups[1], "sessionResumption") == {"handle": handle}
    # The resumed session holds what was sent: only the new turn goes.
    assert user_texts(server)[-1] == ("are you there?", True)


async def test_a_refused_handle_falls_back_to_a_fresh_seeded_session(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    server.push(fl.text("Hello."), [("drop",)], fl.text("Back."))
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    await drain(llm, ctx)
    ctx.add_message(role="assistant", content="Hello.")
    ctx.add_message(role="user", content="one")
    with pytest.raises(LLMError):
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    server.refuse_handles = True
    ctx.add_message(role="user", content="two")
    chunks = await drain(llm, ctx)
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "Back."
    assert server.errors == ["refused handle handle-1"]
    assert server.connections == 3
    assert get(server.setups[2], "sessionResumption") == {}
    seeded = server.sent("clientContent")[-1]
    assert [server.texts(t) for t in get(seeded, "turns")] == ["hi", "Hello.", "one", "two"]


async def test_usage_and_the_stream(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    server.push(fl.text("One two three"))
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="count")
    chunks = await drain(llm, ctx)
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["One", " two", " three"]
    usage = chunks[-1]
    assert isinstance(usage, Usage)
    assert (usage.input_tokens, usage.output_tokens) == (21, 7)
    assert usage.stop_reason == "turn_complete" and usage.ttft is not None


async def test_a_model_that_refuses_text_answers_with_its_transcript(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    server.refuse_text = True
    server.push(fl.audio("Hi there."))
    llm = make_llm(text_modality=None)
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    chunks = await drain(llm, ctx)
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "Hi there."
    assert [get(s, "generationConfig")["responseModalities"] for s in server.setups] == [
        ["TEXT"],
        ["AUDIO"],
    ]
    assert get(server.setups[1], "outputAudioTranscription") == {}


async def test_a_wrong_key_says_what_to_do(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    llm = make_llm(api_key="wrong-key")
    ctx = ChatContext()
    ctx.add_message(role="user", content="hi")
    with pytest.raises(LLMError, match="API key was rejected") as raised:
        await asyncio.wait_for(drain(llm, ctx), WAIT)
    assert "wrong-key" not in str(raised.value) and raised.value.status == 401


async def test_a_cancelled_turns_calls_are_not_left_open(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    hold = asyncio.Event()
    server.push([*fl.call("get_weather", city="Oslo"), ("wait", hold)])
    llm = make_llm()
    ctx = ChatContext()
    ctx.add_message(role="user", content="weather?")
    stream = llm.chat(ctx, tools=[get_weather])
    assert isinstance(await anext(stream), ToolCallChunk)
    await stream.aclose()  # a barge-in: the runtime runs none of its calls
    assert llm.background_work_running
    settled = asyncio.Event()
    llm.add_background_work_listener(lambda busy: settled.set() if not busy else None)
    hold.set()
    await asyncio.wait_for(settled.wait(), WAIT)
    assert llm.background_work_running is False


async def test_a_slow_tool_keeps_the_user_present_while_the_model_works(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    """Catalog 130-132 through Gemini Live: the call is open (the model is busy) while the
    tool runs, and the user is not marked away meanwhile (on the virtual clock)."""
    release, started = asyncio.Event(), asyncio.Event()

    @function_tool
    async def build() -> str:
        """Build the project."""
        started.set()
        await release.wait()
        return "built"

    server.push(fl.call("build"), fl.text("The build is done."))
    llm = make_llm()
    trace: list[bool] = []
    llm.add_background_work_listener(trace.append)
    session: Session[Any] = Session(llm, tools=[build], user_away_timeout=5.0)
    rec = Recorder(session)
    await session.start(Agent("Help."))
    session.push_user_turn("build it")
    await asyncio.wait_for(started.wait(), WAIT)
    assert llm.background_work_running  # the call is open
    with virtual_clock():
        await asyncio.sleep(15.0)
    assert session.user_state == "listening" and session.agent_state == "thinking"
    release.set()
    assert await session.wait_for_idle(timeout=WAIT)
    await session.aclose()
    assert trace == [True, False]  # false -> true (request, call, continuation) -> false
    assert "away" not in rec.user_states
    assert rec.agent_states[-2:] == ["speaking", "listening"]


async def test_a_handoff_that_keeps_the_history_updates_the_session_ahead(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    """The new agent's context goes on from what the session holds: its instructions
    and tools reach the open session at once (a context update), before any request."""

    class Billing(Agent):
        def __init__(self, chat_ctx: ChatContext) -> None:
            super().__init__("You handle billing.", tools=[get_weather], chat_ctx=chat_ctx)

    class Front(Agent):
        def __init__(self) -> None:
            super().__init__("You are the front desk.")

        @function_tool
        async def to_billing(self) -> tuple[str, Agent]:
            """Transfer to billing."""
            return "transferring", Billing(self.chat_ctx)

    server.push(fl.text("One moment.") + fl.call("to_billing"))
    updated = asyncio.Event()
    server.probe = lambda kind, _: updated.set() if kind == "contextUpdate" else None
    llm = make_llm()
    session: Session[Any] = Session(llm)
    await session.start(Front())
    await session.run(user_input="billing please", timeout=WAIT)
    assert type(session.current_agent) is Billing
    await asyncio.wait_for(updated.wait(), WAIT)
    await session.aclose()

    assert server.connections == 1
    assert [k for k, _ in server.received] == ["setup", "clientContent", "contextUpdate"]
    (update,) = server.sent("contextUpdate")
    assert server.texts(get(update, "systemInstruction")) == "You handle billing."
    declared = get(get(update, "tools"), "tools")
    assert [d["name"] for t in declared for d in get(t, "functionDeclarations")] == ["get_weather"]
    assert server.errors == []


@background("ci", description="Watches the build.")
async def ci(ctx: BackgroundContext) -> None:
    async for _ in ctx.messages():
        pass


async def test_an_urgent_background_update_cuts_the_held_answer_at_once(
    server: FakeLiveServer,
    make_llm: Callable[..., GeminiLiveLLM],
    no_leaked_tasks: Callable[[], Any],
) -> None:
    """``ctx.send(..., interrupt=True)`` while the model's answer is held on the server:
    the update is sent without waiting for that turn (a settle would outlast WAIT), the
    server cuts it, and the answer to the update is spoken; what was shown of the cut
    answer is what the session holds, so it is kept."""
    hold = asyncio.Event()  # never set: the answer ends only by being cut
    server.push([("text", "Well,"), ("wait", hold)], fl.text("The build broke."), fl.text("Ok."))
    llm = make_llm(settle_timeout=3 * WAIT)
    session: Session[Any] = Session(llm, background=[ci], user_away_timeout=None)
    await session.start(Agent("Tell stories."))
    speaking = asyncio.Event()
    session.on("agent_state_changed", lambda e: speaking.set() if e.new == "speaking" else None)
    session.push_user_turn("tell me a story")
    await asyncio.wait_for(speaking.wait(), WAIT)
    await session.background.context("ci").send("the build broke", interrupt=True)
    await asyncio.wait_for(server.interrupted.wait(), WAIT)
    assert await session.wait_for_idle(timeout=WAIT)
    replies = [
        (m.content, m.interrupted)
        for m in session.history.items
        if getattr(m, "role", None) == "assistant"
    ]
    assert replies == [("Well,", True), ("The build broke.", False)]
    assert not hold.is_set() and server.connections == 1
    # The update, then the reply's instructions asking for the answer (turnComplete).
    update, ask = user_texts(server)[-2:]
    assert "the build broke" in update[0] and ask[1] is True
    # The session holds the cut answer before the update, as the context does: the next
    # turn goes on on the same session.
    history = server.session.history
    assert [t["role"] for t in history[:3]] == ["user", "model", "user"]
    assert server.texts(history[1]) == "Well,"
    result = await session.run(user_input="thanks", timeout=WAIT)
    result.expect.contains_message(role="assistant", content="Ok.")
    await session.aclose()
    await llm.aclose()
    await no_leaked_tasks()
    assert server.connections == 1
    assert user_texts(server)[-1] == ("thanks", True)
    assert server.errors == []


async def test_an_urgent_update_after_an_answer_heard_in_part_seeds_a_new_session_at_once(
    server: FakeLiveServer, make_llm: Callable[..., GeminiLiveLLM]
) -> None:
    """The cut answer was heard in part (less than came): the session holds more and
    cannot delete it. It is closed, not waited for, and a new one is seeded with the
    context, the update last."""
    hold = asyncio.Event()
    server.push([("text", "Once upon a time"), ("wait", hold)], fl.text("The build broke."))
    llm = make_llm(settle_timeout=3 * WAIT)
    ctx = ChatContext()
    ctx.add_message(role="system", content="Tell stories.")
    ctx.add_message(role="user", content="a story")
    shown = ""
    async with llm.chat(ctx) as stream:
        async for chunk in stream:
            shown += chunk.text if isinstance(chunk, TextDelta) else ""
            if shown == "Once upon a time":
                break
    ctx.add_message(role="assistant", content="Once upon", interrupted=True)
    extra = {"background_id": "ci", "silent": False, "interrupt": True}
    ctx.add_message(role="user", content="ci: the build broke", extra=extra)
    chunks = await asyncio.wait_for(drain(llm, ctx), WAIT)  # a settle would outlast it
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "The build broke."
    assert not hold.is_set() and server.connections == 2
    assert get(server.setups[1], "sessionResumption") == {}  # fresh: not the old history
    seeded = server.sent("clientContent")[-1]
    turns = get(seeded, "turns")
    assert [server.texts(t) for t in turns] == ["a story", "Once upon", "ci: the build broke"]
    assert get(seeded, "turnComplete") is True
    assert server.errors == []
