"""The server's speech without a browser (issue 27): the audio messages checked at the
boundary, the sink that plays into the page (paced, cleared, drained within a bound)
and the microphone gate."""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backline.io.web import WebSpeech, protocol
from backline.io.web._audio import LEAD, MicrophoneGate, PageAudioSink
from backline.io.web._output import WebOutput
from backline.io.web._voice import SpokenOutput
from backline.limits import Limits
from backline.speech import AudioFrame, AudioSink, EnergyVAD, split_frames
from backline.testing.clock import VirtualClock


# -- the messages -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("message", "says"),
    [
        ({"type": "audio_input"}, "'sample_rate' must be a int"),
        ({"type": "audio_input", "sample_rate": 16000.0}, "'sample_rate' must be a int"),
        ({"type": "audio_input", "sample_rate": 4000}, "8000 to 48000 Hz, got 4000"),
        ({"type": "audio_input", "sample_rate": 96000}, "8000 to 48000 Hz"),
        ({"type": "audio_played", "stream": 0, "seconds": 1, "done": False}, "positive"),
        ({"type": "audio_played", "stream": True, "seconds": 1, "done": False}, "'stream'"),
        ({"type": "audio_played", "stream": 1, "seconds": -1, "done": False}, "0 or more"),
        ({"type": "audio_played", "stream": 1, "seconds": "1", "done": False}, "'seconds'"),
        ({"type": "audio_played", "stream": 1, "seconds": 1, "done": 1}, "'done'"),
    ],
)
def test_bad_audio_messages_are_refused_saying_why(message: dict[str, Any], says: str) -> None:
    with pytest.raises(protocol.ProtocolError, match=says):
        protocol.parse_client_message(json.dumps(message))


def test_a_position_that_is_not_a_number_is_refused() -> None:
    for raw in (
        '{"type":"audio_played","stream":1,"seconds":NaN,"done":false}',
        '{"type":"audio_played","stream":1,"seconds":Infinity,"done":false}',
    ):
        with pytest.raises(protocol.ProtocolError, match="'seconds' must be a number"):
            protocol.parse_client_message(raw, Limits())


def test_good_audio_messages_parse() -> None:
    parse = protocol.parse_client_message
    assert parse('{"type":"audio_input","sample_rate":16000}') == protocol.AudioInput(16000)
    assert parse('{"type":"audio_input_end"}') == protocol.AudioInputEnd()
    played = parse('{"type":"audio_played","stream":3,"seconds":1,"done":true}')
    assert played == protocol.AudioPlayed(3, 1.0, True)


def test_who_speaks_in_a_tab() -> None:
    browser = WebSpeech()
    assert not browser.server_for("server") and browser.page_info(False)["by"] == "browser"
    unready = WebSpeech("auto", unavailable="no speech-to-text engine is ready")
    assert not unready.server_for("server")
    assert "the server has none (no speech-to-text engine is ready)" in unready.start_line()
    with pytest.raises(ValueError, match="needs its engines"):
        WebSpeech("server")
    with pytest.raises(ValueError, match="all three"):
        WebSpeech("auto", tts=object())  # type: ignore[arg-type]


# -- the sink ---------------------------------------------------------------------------------
class Page:
    """What the sink sent to the page."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.audio: list[bytes] = []

    def sink(self, **options: Any) -> PageAudioSink:
        return PageAudioSink(self.messages.append, self.audio.append, **options)

    def sent_seconds(self, rate: int) -> float:
        return sum(len(a) for a in self.audio) / 2 / rate

    def kinds(self) -> list[str]:
        return [m["type"] for m in self.messages]


def tone(seconds: float, rate: int = 22050, channels: int = 1) -> AudioFrame:
    n = round(seconds * rate) * channels
    return AudioFrame.from_samples([(i % 50) * 300 for i in range(n)], rate, channels)


async def test_the_sink_sends_audio_a_bounded_lead_ahead_of_the_page() -> None:
    page = Page()
    sink = page.sink()
    assert isinstance(sink, AudioSink)
    sink.write(tone(5.0))
    assert page.messages == [protocol.audio_start(1, 22050)]
    assert page.sent_seconds(22050) == pytest.approx(LEAD, abs=0.11)
    assert max(len(a) for a in page.audio) <= 0.1 * 22050 * 2 + 2  # 0.1 s a message
    sink.page_played(1, 1.0, done=False)
    assert page.sent_seconds(22050) == pytest.approx(1.0 + LEAD, abs=0.11)
    assert sink.played == 1.0 and sink.queued == pytest.approx(4.0)
    sink.page_played(1, 0.5, done=False)  # never back
    assert sink.played == 1.0
    sent = page.sent_seconds(22050)
    sink.page_played(1, 99.0, done=False)  # never past what was sent
    assert sink.played == pytest.approx(sent)


async def test_clear_stops_the_page_and_freezes_what_was_heard() -> None:
    page = Page()
    sink = page.sink()
    sink.write(tone(3.0))
    sink.page_played(1, 1.25, done=False)
    sink.clear()
    assert page.messages[-1] == protocol.audio_clear(1)
    assert sink.played == 1.25 and sink.queued == 0.0
    sink.page_played(1, 2.0, done=True)  # late: that stream is over
    assert sink.played == 1.25
    sink.write(tone(0.5, rate=16000, channels=2))  # a new stream, made mono
    assert page.messages[-1] == protocol.audio_start(2, 16000)
    assert page.sent_seconds(16000) > 0
    sink.page_played(2, 0.25, done=False)
    assert sink.played == 1.5  # a running total across streams


async def test_drained_waits_for_the_page_to_have_played_the_stream() -> None:
    page = Page()
    sink = page.sink()
    sink.write(tone(3.0))
    drained = asyncio.ensure_future(sink.drained())
    await asyncio.sleep(0)
    assert "audio_end" not in page.kinds()  # not all of it is sent yet
    sink.page_played(1, 1.0, done=False)
    sink.page_played(1, 2.0, done=False)
    assert page.kinds()[-1] == "audio_end"  # after the last of its audio
    sink.page_played(1, 2.5, done=False)
    assert not drained.done()
    sink.page_played(1, 3.0, done=True)
    await asyncio.wait_for(drained, 1)
    assert sink.played == pytest.approx(3.0)


async def test_a_stream_of_another_rate_is_resampled_into_the_stream() -> None:
    page = Page()
    sink = page.sink()
    sink.write(tone(0.2, rate=22050))
    sink.write(tone(0.2, rate=44100))
    assert page.kinds() == ["audio_start"]
    assert page.sent_seconds(22050) == pytest.approx(0.4, abs=0.001)


async def test_drained_is_bounded_when_the_page_stops_answering(
    virtual_clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    page = Page()
    sink = page.sink(drain_slack=5.0)
    sink.write(tone(1.0))
    with caplog.at_level(logging.WARNING, logger="backline"):
        await asyncio.wait_for(sink.drained(), 60)
    assert virtual_clock.elapsed == pytest.approx(1.5 * 1.0 + 5.0, abs=0.01)
    assert page.kinds() == ["audio_start", "audio_end", "audio_clear"]
    assert "did not say it played audio stream 1" in caplog.text


async def test_a_page_that_goes_away_ends_the_wait_at_once() -> None:
    page = Page()
    sink = page.sink()
    sink.write(tone(4.0))
    sink.page_played(1, 0.5, done=False)
    drained = asyncio.ensure_future(sink.drained())
    await asyncio.sleep(0)
    sink.disconnected()
    await asyncio.wait_for(drained, 1)
    assert sink.played == 0.5
    sent = len(page.messages), len(page.audio)
    sink.write(tone(1.0))  # nothing more goes to a page that is gone
    await sink.drained()
    assert (len(page.messages), len(page.audio)) == sent


# -- the microphone gate ----------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_microphone_gate_passes_only_good_audio() -> None:
    heard: list[AudioFrame] = []
    clock = Clock()
    gate = MicrophoneGate(heard.append, clock=clock)
    second = bytes(32000)  # 1 s at 16 kHz
    with pytest.raises(protocol.ProtocolError, match="audio before audio_input"):
        gate.audio(second)
    gate.start(16000)
    for bad, says in (
        (b"", "not whole 16-bit samples"),
        (b"\x00\x01\x02", "3 bytes is not whole 16-bit samples"),
        (bytes(32002), "at most 1 s"),
    ):
        with pytest.raises(protocol.ProtocolError, match=says):
            gate.audio(bad)
    gate.audio(second)
    gate.audio(second)
    gate.audio(second)  # 3 s at once: the burst a network may make
    with pytest.raises(protocol.ProtocolError, match="faster than real time"):
        gate.audio(second)
    gate.audio(second)  # refused quietly: said once
    assert len(heard) == 3 and all(f.sample_rate == 16000 for f in heard)
    clock.now += 2.0  # the clock catches up
    gate.audio(second)
    assert len(heard) == 4
    assert gate.end() == 16000 and gate.end() is None
    with pytest.raises(protocol.ProtocolError, match="audio before audio_input"):
        gate.audio(second)


def test_real_time_audio_is_never_refused() -> None:
    heard: list[AudioFrame] = []
    clock = Clock()
    gate = MicrophoneGate(heard.append, clock=clock)
    gate.start(16000)
    for _ in range(20 * 60 * 10):  # ten minutes of 50 ms messages, on time
        clock.now += 0.05
        gate.audio(bytes(1600))
    assert len(heard) == 12_000


# -- one detector, many tabs ------------------------------------------------------------------
def test_tabs_sharing_one_voice_detector_do_not_share_what_it_heard() -> None:
    """The engines are built once and shared by every tab: a stream of the energy detector
    keeps its own noise floor (one tab's quiet room does not make another's hum speech)."""
    rnd = random.Random(3)
    hum = AudioFrame.from_samples([rnd.choice((-140, 140)) for _ in range(16000)], 16000)
    louder = AudioFrame.from_samples([rnd.choice((-400, 400)) for _ in range(8000)], 16000)
    room = [*split_frames(hum, 0.02), *split_frames(louder, 0.02)]
    vad = EnergyVAD()
    alone = vad.stream()
    assert [e for f in room for e in alone.push(f)] == []  # a louder hum is no speech
    busy, other = vad.stream(), vad.stream()
    events = []
    for frame in room:
        events += busy.push(frame)
        other.push(AudioFrame.silence(0.02, 16000))  # another tab, in a silent room
    assert events == []


async def test_a_speech_engine_that_hangs_cannot_stall_the_conversation(
    virtual_clock: VirtualClock,
) -> None:
    class Stuck:
        """Says half a second of the first sentence, then never anything again."""

        name = "stuck"
        sample_rate = 16000

        async def synthesize(self, text: str) -> AsyncIterator[AudioFrame]:
            yield AudioFrame.silence(0.5, self.sample_rate)
            await asyncio.Event().wait()
            yield AudioFrame.silence(0.5, self.sample_rate)  # pragma: no cover

    page = Page()
    sink = page.sink()
    voice = SpokenOutput(Stuck(), sink)
    output = WebOutput(page.messages.append, lambda _: (None, None), voice)
    reply = "Hello there, this is the first. And this is the second."
    output.begin_segment("speech_1")
    output.write(reply)
    output.flush()
    await asyncio.sleep(0.1)
    sink.page_played(1, 0.5, done=False)  # the page played what came
    result = await asyncio.wait_for(output.wait_for_playout(), 120)
    assert result.interrupted and result.text == "Hello there, this is the first."
    assert virtual_clock.elapsed == pytest.approx(30 + 0.25 * len(reply), abs=0.2)
    assert page.kinds()[-2:] == ["segment_clear", "audio_clear"]
    await voice.aclose()
