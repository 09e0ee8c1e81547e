"""GeminiLiveLLM with audio (``use_audio()``, issue 29) against the loopback Live server:
the user's voice reaches the model between ``activityStart`` and ``activityEnd`` and its
transcript is the turn (the session holds it: not sent again as client content), the
answer the server makes by itself is the reply the runtime reads (one response), the
model's voice plays as it comes (nothing synthesized), a barge-in leads to a new session
seeded with what was heard, and a lost socket loses the utterance with a clear error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from backline_google.live import GeminiLiveLLM

from backline import Agent, FunctionTool, LLMMetrics, Session, function_tool
from backline.llm import AudioDelta, ChatContext, TextDelta
from backline.speech import (
    AudioFrame,
    ClockSink,
    EnergyVAD,
    SpeakingModel,
    SpeechInput,
    SpeechOutput,
    STTStream,
    Transcript,
)
from tests.background_kit import ctx_of, worker
from tests.conftest import Recorder
from tests.plugins.google import fake_live as fl
from tests.plugins.google.conftest import TEST_KEY
from tests.plugins.google.fake_live import FakeLiveServer, get
from tests.plugins.realtime_kit import RATE, HandSink, tone, utterance

WAIT = 20.0  # bounds a hang only
WORD = fl.AUDIO_PER_WORD / 2 / 24000  # seconds of the model's voice per word


class NoSynthesis:
    """A TTS engine the test fails if it is ever used: the model speaks itself."""

    name = "none"
    sample_rate = 24000

    def synthesize(self, text: str) -> AsyncIterator[AudioFrame]:
        raise AssertionError(f"synthesized {text!r}")


@function_tool
async def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return f"Sunny in {city}."


class Greeter(Agent):
    """Greets first: the runtime's chat() opens the session with the agent's setup."""

    def __init__(self) -> None:
        super().__init__("Answer about the weather.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet the user")


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeLiveServer]:
    monkeypatch.setenv("SSL_CERT_FILE", str(fl.CERT))  # google-genai trusts the fake's TLS
    async with FakeLiveServer(api_key=TEST_KEY) as fake:
        yield fake


def live(server: FakeLiveServer, **kwargs: Any) -> GeminiLiveLLM:
    return GeminiLiveLLM("gemini-live-test", base_url=server.url, api_key=TEST_KEY, **kwargs)


class Voice:
    """A session on the Live model with a microphone pipeline and a speaker."""

    def __init__(
        self,
        server: FakeLiveServer,
        sink: HandSink | None = None,
        tools: Sequence[FunctionTool] = (),
        background: Sequence[Any] = (),
    ) -> None:
        self.llm = live(server)
        assert isinstance(self.llm, SpeakingModel)
        hearing = self.llm.use_audio()
        self.played: list[AudioFrame] = []
        self._frame = asyncio.Event()
        self.sink = ClockSink(on_frame=self._on_frame)
        self.output = SpeechOutput(NoSynthesis(), sink or self.sink)
        self.session: Session[Any] = Session(
            self.llm,
            output=self.output,
            tools=tools,
            background=list(background),
            user_away_timeout=None,
        )
        self.input = SpeechInput(self.session, stt=hearing, vad=EnergyVAD())
        self.rec = Recorder(self.session)

    async def start(self, agent: Agent) -> Voice:
        await self.session.start(agent)
        self.input.start()
        return self

    async def aclose(self) -> None:
        await self.input.aclose()
        await self.session.aclose()
        await self.output.aclose()
        await self.llm.aclose()

    def _on_frame(self, frame: AudioFrame) -> None:
        self.played.append(frame)
        self._frame.set()

    def said(self) -> list[tuple[str, str, bool]]:
        return [
            (it.role, it.content, it.interrupted)
            for it in self.session.history.items
            if it.type == "message"
        ]

    async def speak(self, speech: float = 0.6) -> None:
        for frame in utterance(speech):
            self.input.push(frame)
        await asyncio.wait_for(self.input.settled(), WAIT)


def kinds(server: FakeLiveServer) -> list[str]:
    """What the client sent, by kind (realtime input by its field)."""
    out = []
    for kind, body in server.received:
        if kind == "realtimeInput":
            kind = next(iter(body))
        out.append(kind)
    return out


async def test_the_user_speaks_to_the_model_and_it_answers_in_its_own_voice(
    server: FakeLiveServer, no_leaked_tasks: Callable[[], Any]
) -> None:
    server.push(fl.audio("Hello there."), fl.audio("It is sunny"))
    server.hear.append("what is the weather")
    v = Voice(server)
    try:
        await v.start(Greeter())
        assert await v.session.wait_for_idle(timeout=WAIT)
        await v.speak()
        assert await v.session.wait_for_idle(timeout=WAIT)
        assert v.said() == [
            ("assistant", "Hello there.", False),
            ("user", "what is the weather", False),
            ("assistant", "It is sunny", False),
        ]
        # The model's audio played as it came: five words of it, at its rate.
        assert sum(f.duration for f in v.played) == pytest.approx(5 * WORD)
        assert {f.sample_rate for f in v.played} == {24000}
        metrics = v.rec.of("llm_metrics")[-1]
        assert isinstance(metrics, LLMMetrics)
        assert metrics.ttfa is not None and metrics.ttft is not None
        assert v.llm.background_work_running is False
    finally:
        await v.aclose()
    await no_leaked_tasks()

    (setup,) = server.setups
    assert get(setup, "generationConfig")["responseModalities"] == ["AUDIO"]
    assert get(setup, "outputAudioTranscription") == {}
    assert get(setup, "inputAudioTranscription") == {}
    # backline's voice pipeline decides the turn: the server's detection is off.
    detection = get(get(setup, "realtimeInputConfig"), "automaticActivityDetection")
    assert detection == {"disabled": True}
    assert server.texts(get(setup, "systemInstruction")) == "Answer about the weather."
    # The greeting asked for, then the utterance: activity start, its audio, its end.
    sent = kinds(server)
    assert sent[:2] == ["setup", "clientContent"]
    assert sent[2] == "activityStart" and sent[-1] == "activityEnd"
    assert set(sent[3:-1]) == {"audio"}
    assert {mime for mime, _ in server.audio_in} == {"audio/pcm;rate=16000"}
    # One utterance at 16 kHz: its lead, the tone, the silence until the detector ended it.
    (heard,) = server.utterances
    assert 0.85 <= len(heard) / (2 * RATE) <= 1.6
    # The model heard the user: the turn was not sent again as text.
    assert len(server.sent("clientContent")) == 1
    assert server.connections == 1
    assert [t["role"] for t in server.session.history] == ["user", "model", "user", "model"]
    assert server.errors == []


async def test_before_any_reply_the_voice_is_answered_by_a_session_with_the_agents_setup(
    server: FakeLiveServer,
) -> None:
    """The first thing is the user's voice: the session was opened at the start with the
    agent's instructions (``agent_changed``), so the answer the server makes by itself
    to the utterance is the reply, played; one connection, nothing sent as text."""
    server.push(fl.audio("It is sunny"))
    server.hear.append("what is the weather")
    v = Voice(server, tools=[get_weather])
    opened = asyncio.Event()
    server.probe = lambda kind, _: opened.set() if kind == "setup" else None
    try:
        await v.start(Agent("Answer about the weather."))
        await asyncio.wait_for(opened.wait(), WAIT)  # before the user says a word
        assert server.utterances == []
        await v.speak()
        assert await v.session.wait_for_idle(timeout=WAIT)
        assert v.said() == [
            ("user", "what is the weather", False),
            ("assistant", "It is sunny", False),
        ]
        assert sum(f.duration for f in v.played) == pytest.approx(3 * WORD)
    finally:
        await v.aclose()

    assert server.connections == 1
    (setup,) = server.setups
    assert server.texts(get(setup, "systemInstruction")) == "Answer about the weather."
    declared = get(setup, "tools")[0]["functionDeclarations"]
    assert "get_weather" in [d["name"] for d in declared]
    assert kinds(server)[:2] == ["setup", "activityStart"]
    assert server.sent("clientContent") == [] and server.sent("contextUpdate") == []
    assert server.errors == []


async def test_a_silent_update_reaches_the_voices_session_and_its_answer_is_the_reply(
    server: FakeLiveServer,
) -> None:
    """A background's silent update goes to the session the voice speaks to at once
    (client content, no turn asked): it holds the update before the utterance, as the
    runtime's context does, so the server's answer to the voice is the reply."""
    server.push(fl.audio("It is sunny"), fl.audio("A second answer."))
    server.hear.append("what is the weather")
    v = Voice(server, background=[worker])
    arrived = asyncio.Event()
    server.probe = lambda kind, _: arrived.set() if kind == "clientContent" else None
    try:
        await v.start(Agent("Answer about the weather."))
        await ctx_of(v.session).send("the forecast is ready", silent=True)
        await asyncio.wait_for(arrived.wait(), WAIT)
        await v.speak()
        assert await v.session.wait_for_idle(timeout=WAIT)
        said = v.said()
    finally:
        await v.aclose()

    heard = [("user", "what is the weather", False), ("assistant", "It is sunny", False)]
    assert said[-2:] == heard
    assert server.connections == 1
    (note,) = server.sent("clientContent")
    assert "the forecast is ready" in server.texts(get(note, "turns")[0])
    assert not get(note, "turnComplete")
    sent = kinds(server)
    assert sent[:3] == ["setup", "clientContent", "activityStart"] and sent[-1] == "activityEnd"
    assert len(server.script) == 1  # the answer to the voice was the reply: no other asked
    assert server.errors == []


async def test_after_a_handoff_the_voice_speaks_to_a_session_set_up_for_the_new_agent(
    server: FakeLiveServer,
) -> None:
    """At a handoff to an agent with a context of its own, a new session is set up for it
    ahead (the old one holds another conversation): the next utterance goes there, and
    the server's answer to it is the new agent's reply."""

    class Billing(Agent):
        def __init__(self) -> None:
            super().__init__("You handle billing.")

    class Front(Agent):
        def __init__(self) -> None:
            super().__init__("You are the front desk.")

        @function_tool
        async def to_billing(self) -> tuple[str, Agent]:
            """Transfer to billing."""
            return "transferring", Billing()

    server.push(fl.audio("One moment.") + fl.call("to_billing"), fl.audio("Billing here."))
    server.hear.extend(["billing please", "my invoice"])
    v = Voice(server)
    setups = asyncio.Event()
    server.probe = lambda kind, _: setups.set() if len(server.setups) == 2 else None
    try:
        await v.start(Front())
        await v.speak()
        assert await v.session.wait_for_idle(timeout=WAIT)
        assert type(v.session.current_agent) is Billing
        await asyncio.wait_for(setups.wait(), WAIT)  # before the user speaks again
        await v.speak()
        assert await v.session.wait_for_idle(timeout=WAIT)
        said = v.said()
        assert v.llm.background_work_running is False
    finally:
        await v.aclose()

    assert said[-2:] == [("user", "my invoice", False), ("assistant", "Billing here.", False)]
    assert server.connections == 2
    second = server.setups[1]
    assert server.texts(get(second, "systemInstruction")) == "You handle billing."
    assert get(second, "sessionResumption") == {}
    assert server.sent("clientContent") == []  # Billing's context had nothing to seed
    assert len(server.utterances) == 2
    assert server.errors == []


async def test_a_barge_in_opens_a_session_seeded_with_what_was_heard(
    server: FakeLiveServer,
) -> None:
    hold = asyncio.Event()
    server.push(
        [("audio", "Once upon a time there was a fox"), ("wait", hold)],
        fl.audio("Sure."),  # the answer to the voice on the old session: not played
        fl.audio("Here is another."),
    )
    server.hear.append("another one")
    sink = HandSink()
    v = Voice(server, sink)
    try:
        await v.start(Agent("Tell stories."))
        v.session.push_user_turn("tell me a story")
        while len(sink.frames) < 8:  # all eight words' audio came; the turn waits
            sink.wrote.clear()
            await asyncio.wait_for(sink.wrote.wait(), WAIT)
        sink.play(0.3)  # three words of it played
        sink.instant = True
        await v.speak()  # the user talks over it: a barge-in
        assert await v.session.wait_for_idle(timeout=WAIT)
        said = v.said()
    finally:
        await v.aclose()

    assert said[0] == ("user", "tell me a story", False)
    role, heard, interrupted = said[1]
    assert role == "assistant" and interrupted
    assert heard and "Once upon a time there was a fox".startswith(heard) and "fox" not in heard
    assert said[2:] == [("user", "another one", False), ("assistant", "Here is another.", False)]
    played = [f for f in sink.frames if f.sample_rate == 24000]
    assert sum(f.duration for f in played) == pytest.approx(11 * WORD)  # the story and the reply
    # The activity start cut the model's turn on the server, which holds what it had sent
    # (the whole story): not what was heard. Gemini Live cannot cut a turn, so a new
    # session got the context as the runtime has it, in one message.
    assert server.interrupted.is_set()
    assert server.connections == 2
    assert get(server.setups[1], "sessionResumption") == {}
    seeded = server.sent("clientContent")[-1]
    turns = get(seeded, "turns")
    assert [t["role"] for t in turns] == ["user", "model", "user"]
    assert [server.texts(t) for t in turns] == ["tell me a story", heard, "another one"]
    assert get(seeded, "turnComplete") is True
    assert server.errors == []


async def next_final(stream: STTStream) -> tuple[list[str], Transcript]:
    """The interim texts, then the final transcript."""
    interim = []
    async with asyncio.timeout(WAIT):
        async for transcript in stream:
            if transcript.final:
                return interim, transcript
            interim.append(transcript.text)
    raise AssertionError("the stream ended")


async def test_a_streams_transcripts(server: FakeLiveServer) -> None:
    llm = live(server)
    stream = llm.use_audio().stream()
    server.push(fl.audio("Hi."), fl.audio("Hm?"))
    try:
        # The transcription says it is finished: final before the model answers.
        server.hear.append("hello there")
        server.hear_finished = True
        stream.push(tone(0.5, 48000))  # any rate: 16 kHz mono to the model
        stream.flush()
        interim, final = await next_final(stream)
        assert interim == ["hello", "hello there"]
        assert (final.text, final.error) == ("hello there", None)
        assert len(server.utterances[0]) == 2 * 8000
        # Nothing was heard: an empty final, no error (the model's answer is nobody's).
        server.hear_finished = False
        stream.push(AudioFrame.silence(0.2, RATE))
        stream.flush()
        interim, final = await next_final(stream)
        assert (interim, final.text, final.error) == ([], "", None)
        # A flush with no audio at all: an empty final at once, nothing sent.
        sent = len(server.received)
        stream.flush()
        assert (await next_final(stream))[1].text == ""
        assert len(server.received) == sent
    finally:
        await stream.aclose()
        await llm.aclose()
    assert server.errors == []


async def test_a_socket_lost_mid_utterance_loses_it_with_a_clear_error_and_the_next_resumes(
    server: FakeLiveServer,
) -> None:
    llm = live(server)
    stream = llm.use_audio().stream()
    idle = asyncio.Event()
    llm.add_background_work_listener(lambda busy: idle.set() if not busy else None)
    server.push(fl.audio("Hi."), fl.audio("Yes?"))
    try:
        server.hear.append("hello")
        stream.push(tone(0.3))
        stream.flush()
        assert (await next_final(stream))[1].text == "hello"
        await asyncio.wait_for(idle.wait(), WAIT)  # its answer is complete: a handle
        assert llm.resumption_handle == "handle-1"
        # The connection drops while the user speaks: the rest is not sent, and the
        # utterance's final transcript says why.
        server.drop_in_activity = True
        stream.push(tone(0.3))
        await asyncio.wait_for(server.dropped.wait(), WAIT)
        stream.push(tone(0.3))
        stream.flush()
        _, final = await next_final(stream)
        assert final.text == "" and final.error is not None
        assert "Gemini Live" in final.error and "resume" in final.error
        # The next utterance resumes the session with the handle, and is heard.
        server.drop_in_activity = False
        server.hear.append("are you there")
        stream.push(tone(0.3))
        stream.flush()
        _, final = await next_final(stream)
        assert (final.text, final.error) == ("are you there", None)
    finally:
        await stream.aclose()
        await llm.aclose()
    assert (server.connections, llm.connects, llm.resumed) == (2, 2, 1)
    assert get(server.setups[1], "sessionResumption") == {"handle": "handle-1"}
    assert server.errors == []


async def test_the_answer_to_the_voice_calls_a_tool(server: FakeLiveServer) -> None:
    """The claimed answer is a turn like any other: its call runs and the result goes
    back as a tool response (scheduled WHEN_IDLE), nothing as client content."""

    server.push(fl.audio("Hello."), fl.call("get_weather", city="Oslo"), fl.audio("Sunny in Oslo"))
    server.hear.append("weather in Oslo")
    v = Voice(server, tools=[get_weather])
    try:
        await v.start(Greeter())
        assert await v.session.wait_for_idle(timeout=WAIT)
        await v.speak()
        assert await v.session.wait_for_idle(timeout=WAIT)
        said = v.said()
        assert v.llm.background_work_running is False
    finally:
        await v.aclose()
    assert said[-2:] == [("user", "weather in Oslo", False), ("assistant", "Sunny in Oslo", False)]
    (response,) = server.sent("toolResponse")
    (answer,) = get(response, "functionResponses")
    assert answer["response"] == {"output": "Sunny in Oslo."}
    assert answer["scheduling"] == "WHEN_IDLE"
    assert len(server.sent("clientContent")) == 1  # the greeting's only
    assert server.connections == 1 and server.errors == []


async def test_an_answer_that_does_not_come_leaves_what_was_heard_final_in_time(
    server: FakeLiveServer,
) -> None:
    hold = asyncio.Event()
    llm = live(server, hearing_timeout=0.2)
    stream = llm.use_audio().stream()
    server.push([("wait", hold), ("audio", "Late.")])
    server.hear.append("hello")
    try:
        stream.push(tone(0.3))
        stream.flush()
        interim, final = await next_final(stream)
        assert (interim, final.text, final.error) == (["hello"], "hello", None)
        # The answer is not waited for: the model is not busy with it.
        assert llm.background_work_running is False
    finally:
        hold.set()
        await stream.aclose()
        await llm.aclose()
    assert server.errors == []


async def test_use_audio_after_a_text_session_sets_up_a_new_one_for_audio(
    server: FakeLiveServer,
) -> None:
    server.push(fl.text("Hi."), fl.audio("Hello again."))
    llm = live(server, text_modality=True)
    try:
        ctx = ChatContext()
        ctx.add_message(role="user", content="hi")
        async with llm.chat(ctx) as stream:
            assert [c.text async for c in stream if isinstance(c, TextDelta)] == ["Hi."]
        llm.use_audio()
        ctx.add_message(role="assistant", content="Hi.")
        ctx.add_message(role="user", content="and now?")
        async with llm.chat(ctx) as stream:
            chunks = [c async for c in stream]
    finally:
        await llm.aclose()
    audio = [c for c in chunks if isinstance(c, AudioDelta)]
    assert "".join(c.transcript for c in audio) == "Hello again."
    assert sum(len(c.data) for c in audio) == 2 * fl.AUDIO_PER_WORD
    assert {c.sample_rate for c in audio} == {24000}
    modalities = [get(s, "generationConfig")["responseModalities"] for s in server.setups]
    assert modalities == [["TEXT"], ["AUDIO"]]
    assert get(server.setups[1], "sessionResumption") == {}  # the modality is the setup's
    seeded = server.sent("clientContent")[-1]
    assert [server.texts(t) for t in get(seeded, "turns")] == ["hi", "Hi.", "and now?"]


async def test_closing_while_the_session_is_opened_ahead_leaves_nothing_running(
    server: FakeLiveServer,
) -> None:
    """``agent_changed`` returns at once and opens the voice's session in the background;
    closing the model while the server has not finished the setup ends that work in
    time, and a closed model follows nothing."""
    server.hold_setup = asyncio.Event()  # never set: the setup never completes
    asked = asyncio.Event()
    server.probe = lambda kind, _: asked.set() if kind == "setup" else None
    llm = live(server)
    llm.use_audio()
    ctx = ChatContext()
    ctx.add_message(role="system", content="Answer about the weather.")
    assert llm.agent_changed(ctx, [get_weather]) is None
    await asyncio.wait_for(asked.wait(), WAIT)
    await asyncio.wait_for(llm.aclose(), WAIT)
    server.hold_setup.set()  # the fake's own handler ends (its client is gone)
    llm.agent_changed(ctx, [])
    ctx.add_message(role="user", content="a silent note")
    llm.context_changed(ctx)
    # The model's tasks (the follow task among them) ended with its close.
    assert llm._follower is not None and llm._follower.done()
    assert len(llm._scope) == 0
    assert llm.connects == 0 and server.connections == 1
    assert server.errors == []
