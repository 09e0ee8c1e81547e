"""Echo (issue 28): WebRTC's echo canceller through ``livekit.rtc`` takes the agent's
voice out of the microphone and leaves the user's; without it, ``EchoGuard`` lets
through only what is clearly louder than the echo."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import pytest

from backline.speech import (
    AudioFrame,
    EchoCanceller,
    EchoGuard,
    EnergyVAD,
    SpeechInput,
    echo_canceller,
    echo_unavailable,
    split_frames,
)
from backline.speech import echo as echo_module

from .conftest import speak as speak_en_us

RATE = 16000
FRAME = 0.02
DELAY = 0.08  # seconds from the speaker to the microphone
AGENT = ("It is sunny in Oslo today. The wind is light.", "Tomorrow brings rain in the morning.")
USER = "what is the weather"  # a phrase PocketSphinx hears from eSpeak (test_pipeline.py)


def db(x: float) -> float:
    return 20 * math.log10(max(x, 1e-9))


def mix(*parts: tuple[int, AudioFrame, float], length: int) -> list[int]:
    """Samples at RATE: each part (its first sample, the audio, a gain) added in."""
    out = [0] * length
    for at, audio, gain in parts:
        for i, v in enumerate(audio.resample(RATE).samples()):
            if at + i < length:
                out[at + i] += round(v * gain)
    return [max(-32768, min(32767, v)) for v in out]


@dataclass
class Scene:
    """The agent says two sentences with a pause; the speaker plays them (``far``, at
    eSpeak's own rate); the microphone hears them ``DELAY`` later at ``echo_gain``, and
    the user, in another voice, says ``USER`` in the pause (``near``)."""

    far: AudioFrame
    near: AudioFrame
    user: tuple[int, int]  # the user's samples in ``near``: [start, end)

    @classmethod
    async def make(
        cls, *, echo_gain: float, user_gain: float = 1.0, user_at: float | None = None
    ) -> Scene:
        """``user_at``: when the user starts, in seconds from the agent's start (None:
        in the pause, once the first sentence has played)."""
        first, second = [await speak(s) for s in AGENT]
        user = (await speak(USER, voice="en-us+m3")).resample(RATE)
        rate = first.sample_rate
        pause = AudioFrame.silence(user.duration + 0.8, rate)
        far = AudioFrame(first.data + pause.data + second.data, rate)
        start = round((first.duration + 0.3 if user_at is None else user_at) * RATE)
        length = round((far.duration + DELAY + 0.5) * RATE)
        near = mix((round(DELAY * RATE), far, echo_gain), (start, user, user_gain), length=length)
        end = start + round(user.duration * RATE)
        return cls(far, AudioFrame.from_samples(near, RATE), (start, end))

    def run(self, canceller: EchoCanceller) -> AudioFrame:
        """The far end told as it plays and the near end processed, 20 ms at a time."""
        far = list(split_frames(self.far, FRAME))
        out: list[bytes] = []
        for i, frame in enumerate(split_frames(self.near, FRAME)):
            if i < len(far):
                canceller.far_end(far[i])
            out.append(canceller.process(frame).data)
        return AudioFrame(b"".join(out), RATE)

    def echo_only(self, frame: AudioFrame) -> AudioFrame:
        """``frame`` without the user's part (and a margin around it)."""
        a, b = self.user[0] - RATE // 4, self.user[1] + RATE // 4
        return AudioFrame(frame.data[: 2 * a] + frame.data[2 * b :], RATE)

    def users_part(self, frame: AudioFrame) -> AudioFrame:
        a, b = self.user[0] - RATE // 4, self.user[1] + RATE // 4
        return AudioFrame(frame.data[2 * a : 2 * b], RATE)


async def speak(text: str, voice: str = "en-us") -> AudioFrame:
    """``text`` said by eSpeak NG in ``voice`` (the user is another voice than the agent)."""
    if voice == "en-us":
        return await speak_en_us(text)
    from backline_local_speech.espeak import EspeakTTS

    frames = [f async for f in EspeakTTS(voice=voice).synthesize(text)]
    return AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate)


def transcribe(frame: AudioFrame) -> str:
    from backline_local_speech.sphinx import PocketsphinxSTT

    return PocketsphinxSTT().transcribe(frame)


# -- WebRTC's canceller ----------------------------------------------------------------------------
needs_livekit = pytest.mark.skipif(echo_unavailable() is not None, reason=f"{echo_unavailable()}")


@needs_livekit
async def test_the_agents_voice_is_removed_and_the_users_survives() -> None:
    scene = await Scene.make(echo_gain=0.5)
    canceller = echo_canceller(sample_rate=RATE, delay=DELAY)
    assert canceller is not None and isinstance(canceller, EchoCanceller)
    out = scene.run(canceller)
    assert out.duration == pytest.approx(scene.near.duration, abs=FRAME)
    reduction = db(scene.echo_only(out).rms()) - db(scene.echo_only(scene.near).rms())
    # Measured: -38.4 dB (eSpeak at 22 kHz resampled; 80 ms, half as loud at the mic).
    assert reduction < -20, f"the echo is only {reduction:.1f} dB quieter"
    user = scene.users_part(out)
    assert abs(db(user.rms()) - db(scene.users_part(scene.near).rms())) < 3
    assert transcribe(user) == USER
    assert transcribe(scene.users_part(scene.near)) == USER  # the test's own premise


@needs_livekit
async def test_frames_that_are_not_whole_10_ms_are_carried_over() -> None:
    canceller = echo_canceller(sample_rate=RATE)
    assert canceller is not None
    lengths = []
    for frame in split_frames(AudioFrame.silence(0.06, RATE), 0.015):
        canceller.far_end(AudioFrame.from_samples([1000] * 240, RATE))
        lengths.append(round(canceller.process(frame).duration, 4))
    assert lengths == [0.01, 0.02, 0.01, 0.02]  # 5 ms carried, then 5 ms more: 20 ms


@needs_livekit
async def test_with_nothing_played_the_users_voice_is_kept() -> None:
    canceller = echo_canceller(sample_rate=RATE)
    assert canceller is not None
    user = (await speak(USER, voice="en-us+m3")).resample(RATE)
    out = AudioFrame(b"".join(canceller.process(f).data for f in split_frames(user, FRAME)), RATE)
    assert out.duration == pytest.approx(user.duration, abs=0.01)  # under 10 ms carried
    assert abs(db(out.rms()) - db(user.rms())) < 1
    assert transcribe(out) == USER


def test_without_livekit_there_is_no_canceller_and_the_reason_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(echo_module, "_unavailable", [])
    monkeypatch.setitem(sys.modules, "livekit.rtc", None)  # as if not installed
    assert echo_canceller() is None
    assert echo_unavailable() == (
        "echo cancellation needs the livekit package: pip install 'backline[echo]' "
        "(the livekit package)"
    )


def test_the_rate_must_allow_10_ms_blocks() -> None:
    with pytest.raises(ValueError, match="multiple of 100 Hz"):
        echo_module.WebRTCEchoCanceller(sample_rate=22050)


# -- the guard, without a canceller --------------------------------------------------------------
async def test_the_guard_silences_the_echo_and_the_user_is_heard_after_the_agent() -> None:
    scene = await Scene.make(echo_gain=0.1)
    guard = EchoGuard()
    assert isinstance(guard, EchoCanceller)
    out = scene.run(guard)
    reduction = db(scene.echo_only(out).rms()) - db(scene.echo_only(scene.near).rms())
    assert reduction < -40, f"the echo is only {reduction:.1f} dB quieter"  # measured: -inf
    assert 0.05 < guard.coupling < 0.1  # learned: the echo's loudest is 0.1 of what plays
    assert transcribe(scene.users_part(out)) == USER


@pytest.mark.parametrize(
    ("user_gain", "kept_db"),
    [
        (1.0, (-1.5, 0.0)),  # 20 dB louder than the echo: through (measured: -0.8 dB)
        (0.1, (-math.inf, -12.0)),  # as loud as the echo: not (measured: all of it silenced)
    ],
)
async def test_talking_over_the_agent_passes_only_clearly_louder_than_the_echo(
    user_gain: float, kept_db: tuple[float, float]
) -> None:
    scene = await Scene.make(echo_gain=0.1, user_gain=user_gain, user_at=1.2)
    out = scene.run(EchoGuard())
    kept = db(scene.users_part(out).rms()) - db(scene.users_part(scene.near).rms())
    assert kept_db[0] < kept < kept_db[1], f"{kept:.1f} dB of the user's part kept"
    reduction = db(scene.echo_only(out).rms()) - db(scene.echo_only(scene.near).rms())
    assert reduction < -20, f"the echo is only {reduction:.1f} dB quieter"


def test_the_guard_makes_barge_in_need_longer_speech_and_more_words() -> None:
    class Session:
        agent_state = "speaking"

    class NoSTT:  # never started: SpeechInput only keeps it
        name = "none"

    listening = SpeechInput(Session(), stt=NoSTT(), vad=EnergyVAD())  # type: ignore[arg-type]
    assert (listening.min_interruption_speech, listening.min_interruption_words) == (0.5, 2)
    EchoGuard(min_interruption_speech=1.2, min_interruption_words=5).apply(listening)
    assert (listening.min_interruption_speech, listening.min_interruption_words) == (1.2, 5)
