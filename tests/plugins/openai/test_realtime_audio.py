"""OpenAIRealtimeLLM with audio (``use_audio()``, issue 29) against the loopback server:
the user's voice reaches the model and its transcript is the turn (not sent again as
text), the model's voice plays as it comes (nothing synthesized), a barge-in cuts the
spoken item on the server at what was heard (``conversation.item.truncate``), too
little audio is no turn, and a lost socket loses the utterance with a clear error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from backline_openai.realtime import DEFAULT_TRANSCRIPTION_MODEL, OpenAIRealtimeLLM

from backline import Agent, LLMMetrics, Session, function_tool
from backline.speech import (
    AudioFrame,
    ClockSink,
    EnergyVAD,
    SpeakingModel,
    SpeechInput,
    SpeechOutput,
)
from tests.conftest import Recorder
from tests.plugins.openai import fake_realtime as fr
from tests.plugins.openai.fake_realtime import FakeRealtimeServer
from tests.plugins.realtime_kit import RATE, HandSink, utterance  # (the model takes 24 kHz)

WAIT = 20.0  # bounds a hang only


class NoSynthesis:
    """A TTS engine the test fails if it is ever used: the model speaks itself."""

    name = "none"
    sample_rate = 24000

    def synthesize(self, text: str) -> AsyncIterator[AudioFrame]:
        raise AssertionError(f"synthesized {text!r}")


@pytest.fixture
async def server() -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer() as fake:
        yield fake


class Voice:
    """A session on the realtime model with a microphone pipeline and a speaker."""

    def __init__(
        self, server: FakeRealtimeServer, sink: HandSink | None = None, tools: Any = ()
    ) -> None:
        self.llm = OpenAIRealtimeLLM(base_url=server.url, api_key="sk-test", ping_interval=None)
        assert isinstance(self.llm, SpeakingModel)
        hearing = self.llm.use_audio()
        self.played: list[AudioFrame] = []
        self._frame = asyncio.Event()
        self.sink = ClockSink(on_frame=self._on_frame)
        self.output = SpeechOutput(NoSynthesis(), sink or self.sink)
        self.session: Session[Any] = Session(
            self.llm, output=self.output, user_away_timeout=None, tools=tools
        )
        self.input = SpeechInput(self.session, stt=hearing, vad=EnergyVAD())
        self.rec = Recorder(self.session)

    async def __aenter__(self) -> Voice:
        await self.session.start(Agent("Answer about the weather."))
        self.input.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.input.aclose()
        await self.session.aclose()
        await self.output.aclose()
        await self.llm.aclose()

    def _on_frame(self, frame: AudioFrame) -> None:
        self.played.append(frame)
        self._frame.set()

    async def frames(self, n: int) -> None:
        """Until ``n`` frames of the model's audio were written to the speaker."""
        while len(self.played) < n:
            self._frame.clear()
            await asyncio.wait_for(self._frame.wait(), WAIT)

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


async def test_the_user_speaks_to_the_model_and_it_answers_in_its_own_voice(
    server: FakeRealtimeServer, no_leaked_tasks: Callable[[], Any]
) -> None:
    server.transcripts.append("what is the weather")
    server.push(fr.text("It is sunny"))
    async with Voice(server) as v:
        await v.speak()
        assert await v.session.wait_for_idle(timeout=WAIT)
        assert v.said() == [
            ("user", "what is the weather", False),
            ("assistant", "It is sunny", False),
        ]
        # The model's audio played as it came: three words of it, at its rate.
        assert sum(f.duration for f in v.played) == pytest.approx(3 * fr.WORD_MS / 1000)
        assert {f.sample_rate for f in v.played} == {24000}
        (metrics,) = v.rec.of("llm_metrics")
        assert isinstance(metrics, LLMMetrics)
        assert metrics.ttfa is not None and metrics.ttft is not None
    await no_leaked_tasks()

    config = server.sent("session.update")[0]["session"]
    assert config["output_modalities"] == ["audio"]
    assert config["audio"]["input"] == {
        "format": {"type": "audio/pcm", "rate": 24000},
        "transcription": {"model": DEFAULT_TRANSCRIPTION_MODEL},
        "turn_detection": None,  # backline's voice pipeline ends the turn
    }
    # One utterance at 24 kHz: its lead, the tone, the silence until the detector ended it.
    (heard,) = server.heard
    assert 0.85 <= len(heard) / 48000 <= 1.6
    assert len(server.sent("input_audio_buffer.commit")) == 1
    # The model heard the user: the turn is not sent again as text.
    assert server.sent("conversation.item.create") == []
    (create,) = server.sent("response.create")
    assert create["response"]["output_modalities"] == ["audio"]
    assert server.errors == []


async def test_a_barge_in_cuts_the_spoken_item_on_the_server_at_what_was_heard(
    server: FakeRealtimeServer,
) -> None:
    hold = asyncio.Event()
    server.push([("text", "Once upon a time there was a fox"), ("wait", hold)])
    server.push(fr.text("Sure"))
    sink = HandSink()
    async with Voice(server, sink) as v:
        v.session.push_user_turn("tell me a story")
        # All eight words' audio (1.6 s) comes; the reply waits on the server.
        while len(sink.frames) < 8:
            sink.wrote.clear()
            await asyncio.wait_for(sink.wrote.wait(), WAIT)
        sink.play(0.5)  # half a second of it played
        sink.instant = True
        v.session.interrupt()
        assert await v.session.wait_for_idle(timeout=WAIT)
        result = await v.session.run(user_input="another one", timeout=WAIT)
        result.expect.contains_message(role="assistant", content="Sure")
        said = v.said()
    role, heard, interrupted = said[1]
    assert role == "assistant" and interrupted and heard == "Once upon"
    assert len(server.sent("response.cancel")) == 1
    (spoken_id,) = [i for i in server.audio_ms if server.audio_ms[i] == 1600]
    # 9 of the 32 characters were heard (cut back to a word): 9/32 of 1,600 ms.
    assert server.truncated == [(spoken_id, 450)]
    assert server.sent("conversation.item.delete") == []  # cut, not replaced
    assert [(i["role"], i["type"]) for i in server.conversation] == [
        ("user", "message"),
        ("assistant", "message"),
        ("user", "message"),
        ("assistant", "message"),
    ]
    assert server.errors == []


async def test_too_little_audio_is_no_turn_and_no_error(server: FakeRealtimeServer) -> None:
    llm = OpenAIRealtimeLLM(base_url=server.url, api_key="sk-test", ping_interval=None)
    stream = llm.use_audio().stream()
    try:
        stream.push(AudioFrame.silence(0.05, RATE))
        stream.flush()
        transcript = await asyncio.wait_for(anext(aiter(stream)), WAIT)
        assert (transcript.text, transcript.final, transcript.error) == ("", True, None)
        assert [e.split(":")[0] for e in server.errors] == ["input_audio_buffer_commit_empty"]
        # The next utterance is heard as usual.
        server.transcripts.append("hello there")
        stream.push(AudioFrame.silence(0.5, RATE))
        stream.flush()
        texts = []
        async for t in stream:
            texts.append((t.text, t.final))
            if t.final:
                break
        assert texts == [("hello", False), ("hello there", True)]
    finally:
        await stream.aclose()
        await llm.aclose()


async def test_a_lost_socket_loses_the_utterance_with_a_clear_error(
    server: FakeRealtimeServer,
) -> None:
    llm = OpenAIRealtimeLLM(base_url=server.url, api_key="sk-test", ping_interval=None)
    stream = llm.use_audio().stream()
    server.drop_on_commit = True  # the connection drops before the transcript comes
    try:
        stream.push(AudioFrame.silence(0.5, RATE))
        stream.flush()
        transcript = await asyncio.wait_for(anext(aiter(stream)), WAIT)
        assert transcript.final and transcript.text == ""
        assert transcript.error is not None and "connection" in transcript.error
        # The next utterance reconnects and is heard.
        server.drop_on_commit = False
        server.transcripts.append("again")
        stream.push(AudioFrame.silence(0.5, RATE))
        stream.flush()
        transcript = await asyncio.wait_for(anext(aiter(stream)), WAIT)
        assert (transcript.text, transcript.final, transcript.error) == ("again", True, None)
        assert server.connections == 2
    finally:
        await stream.aclose()
        await llm.aclose()


async def test_a_tool_runs_while_the_models_preamble_plays(server: FakeRealtimeServer) -> None:
    """The model says something and calls a tool in one response: its voice plays while
    the tool runs (the agent "thinking" once it has played, catalog 125), and the
    tool's result, when it comes, gets the spoken continuation."""
    release, started = asyncio.Event(), asyncio.Event()

    @function_tool
    async def get_weather(city: str) -> str:
        """Get the weather.

        Args:
            city: The city.
        """
        started.set()
        await release.wait()
        return f"Sunny in {city}."

    server.push(
        [("text", "Let me check"), ("call", "get_weather", {"city": "Oslo"})],
        fr.text("It is sunny in Oslo"),
    )
    sink = HandSink()
    sink.instant = True
    async with Voice(server, sink, tools=[get_weather]) as v:
        states: list[str] = []
        back_to_thinking = asyncio.Event()

        def on_state(e: Any) -> None:
            states.append(e.new)
            if e.new == "thinking" and "speaking" in states:
                back_to_thinking.set()

        v.session.on("agent_state_changed", on_state)
        v.session.push_user_turn("weather in Oslo?")
        await asyncio.wait_for(started.wait(), WAIT)
        # Catalog 125: the preamble played, the agent waits on its tool: "thinking".
        await asyncio.wait_for(back_to_thinking.wait(), WAIT)
        assert v.session.agent_state == "thinking" and "listening" not in states
        assert len(sink.frames) == 3  # the preamble's voice came before the tool's result
        assert server.sent("conversation.item.create")[-1]["item"]["role"] == "user"
        release.set()
        assert await v.session.wait_for_idle(timeout=WAIT)
        said = v.said()
    assert said == [
        ("user", "weather in Oslo?", False),
        ("assistant", "Let me check", False),
        ("assistant", "It is sunny in Oslo", False),
    ]
    assert len(sink.frames) == 3 + 5  # a frame per word
    (output,) = [
        e
        for e in server.sent("conversation.item.create")
        if e["item"]["type"] == "function_call_output"
    ]
    assert output["item"]["output"] == "Sunny in Oslo."
    assert server.received[-1]["type"] == "response.create"
    assert server.errors == []
