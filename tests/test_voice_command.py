"""``backline voice`` end to end (issue 28), with real engines (eSpeak NG speaks,
PocketSphinx listens): a recording plays as the microphone in real time, what the
agent says is recorded to a file, the model is scripted."""

from __future__ import annotations

import asyncio
import io
import shutil
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import backline
from backline import BackgroundContext, ChatMessage, background
from backline.app import SessionOptions, SpeechOptions
from backline.io.voice import VoiceOptions, run_voice_front_end
from backline.plugins import PluginManager
from backline.speech import AudioFrame, read_wav, split_frames, write_wav
from backline.testing import ScriptedLLM, text

pytest.importorskip("pocketsphinx", reason="backline-local-speech's pocketsphinx is not installed")
if shutil.which("espeak-ng") is None:  # pragma: no cover - .ci/run installs it
    pytest.skip("eSpeak NG is not installed (apt install espeak-ng)", allow_module_level=True)

from backline_local_speech import plugin as local_speech
from backline_local_speech.espeak import EspeakTTS
from backline_local_speech.sphinx import PocketsphinxSTT

RATE = 16000
LONG_REPLY = (
    "It is sunny in Oslo today. The wind is light from the west. "
    "Tomorrow brings rain in the morning and clouds after noon. "
    "The weekend looks dry and a little warmer than this week."
)


@background("reporter", description="Reports at once.")
async def reporter(ctx: BackgroundContext) -> None:
    await ctx.send("one two three four five")
    async for _ in ctx.messages():
        pass


class Plugin:
    """The scripted model, and a background that reports as it starts."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm = llm

    @backline.hookimpl
    def register_llms(self, register: Any) -> None:
        register("scripted", lambda **options: self.llm)

    @backline.hookimpl
    def register_background_sessions(self, register: Any) -> None:
        register(reporter)


def manager_with(llm: ScriptedLLM) -> PluginManager:
    manager = PluginManager(entry_points=False).load()
    manager.register(local_speech, name="local_speech")
    manager.register(Plugin(llm), name="scripted")
    return manager


async def _speak(words: str) -> AudioFrame:
    frames = [f async for f in EspeakTTS().synthesize(words)]
    return AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate).resample(RATE)


def recording(path: Path, *pieces: str | float) -> Path:
    """A WAV file of ``pieces``: words said by eSpeak NG, and seconds of silence."""
    frames = [
        AudioFrame.silence(p, RATE) if isinstance(p, float) else asyncio.run(_speak(p))
        for p in pieces
    ]
    write_wav(path, frames)
    return path


def talk(
    tmp_path: Path,
    llm: ScriptedLLM,
    audio_in: Path,
    *,
    backgrounds: tuple[str, ...] = (),
    **voice: Any,
) -> tuple[str, Path]:
    """Run ``backline voice`` with ``audio_in`` as the microphone; what it printed, and
    the file of what the agent said."""
    out = tmp_path / "out.wav"
    printed = io.StringIO()
    stdin, stdout = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(""), printed  # a script: the recording, then quit
    try:
        run_voice_front_end(
            SessionOptions(backgrounds=backgrounds, llm="scripted", log=False),
            SpeechOptions(stt="pocketsphinx", tts="espeak", vad="energy"),
            VoiceOptions(audio_in=str(audio_in), audio_out=str(out), plain=True, **voice),
            manager=manager_with(llm),
        )
    finally:
        sys.stdin, sys.stdout = stdin, stdout
    return printed.getvalue(), out


def heard(path: Path) -> str:
    """What PocketSphinx hears in a WAV file."""
    engine = PocketsphinxSTT()
    audio = read_wav(path).resample(engine.sample_rate)
    return " ".join(engine.transcribe(f) for f in split_frames(audio, 30.0))


def said(llm: ScriptedLLM, request: int = -1) -> list[tuple[str, str]]:
    """The conversation in one of the model's requests: (role, text), instructions and
    background messages left out."""
    return [
        (m.role, str(m.content))
        for m in llm.requests[request].chat_ctx.items
        if isinstance(m, ChatMessage)
        and m.role in ("user", "assistant")
        and "background_id" not in m.extra
    ]


def user_turns(llm: ScriptedLLM) -> list[str]:
    """What the user said, in the model's last request."""
    return [t for role, t in said(llm) if role == "user"] if llm.requests else []


@pytest.mark.timeout(120)
def test_spoken_words_reach_the_model_and_a_background_update_is_heard(tmp_path: Path) -> None:
    llm = ScriptedLLM([text("One two three four five."), text("It is sunny.")])
    audio_in = recording(tmp_path / "in.wav", 2.5, "what is the weather", 1.0)
    printed, out = talk(tmp_path, llm, audio_in, backgrounds=("reporter",))
    assert "you (said): what is the weather" in printed
    assert user_turns(llm) == ["what is the weather"]
    assert "two three four five" in heard(out)  # the update, said by the agent
    assert "speech: listening with pocketsphinx" in printed  # the engines are said at start


@pytest.mark.timeout(120)
def test_talking_over_the_agent_interrupts_it_and_it_keeps_what_was_played(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM([text(LONG_REPLY), text("I am fine.")])
    audio_in = recording(tmp_path / "in.wav", 0.5, "what is the weather", 3.5, "how are you", 1.0)
    talk(tmp_path, llm, audio_in)
    assert len(llm.requests) == 2
    conversation = said(llm, 1)
    assert conversation[0] == ("user", "what is the weather")
    role, played = conversation[1]
    assert role == "assistant" and LONG_REPLY.startswith(played)
    assert 0 < len(played) < len(LONG_REPLY) / 2  # about three seconds of it
    assert conversation[2] == ("user", "how are you")


@pytest.mark.timeout(120)
def test_push_to_talk_ignores_speech_outside_the_key(tmp_path: Path) -> None:
    llm = ScriptedLLM([text("It is sunny.")])
    audio_in = recording(tmp_path / "in.wav", 0.5, "what is the weather", 1.0)
    printed, out = talk(tmp_path, llm, audio_in, mode="push")
    assert llm.requests == [] and "you (said)" not in printed
    assert "push-to-talk: hold Space" in printed
    assert read_wav(out).rms() == 0 if out.exists() else True  # nothing was said


@pytest.mark.timeout(120)
def test_the_wake_phrase_gates_the_conversation_and_silence_ends_its_window(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM([text("Sunny."), text("Still sunny.")])
    audio_in = recording(
        tmp_path / "in.wav",
        0.5,
        "what is the weather",  # before the phrase: not for the agent
        1.0,
        "how are you",  # the wake phrase of this test
        0.8,
        "what is the weather",  # in the window
        4.0,  # quiet: the window (2 s) closes
        "one two three four five",  # not for the agent
        1.0,
    )
    printed, _ = talk(
        tmp_path, llm, audio_in, mode="wake", wake_phrase="how are you", wake_window=2.0
    )
    assert user_turns(llm) == ["what is the weather"]
    assert len(llm.requests) == 1
    assert "[voice] listening (wake window)" in printed
    assert "[voice] waiting for the wake phrase" in printed


def test_without_devices_it_says_what_to_install_or_which_option_to_use(tmp_path: Path) -> None:
    audio_in = recording(tmp_path / "in.wav", 0.3)
    with pytest.raises(click.ClickException) as caught:
        run_voice_front_end(
            SessionOptions(llm="scripted", log=False),
            SpeechOptions(),
            VoiceOptions(audio_in=str(audio_in)),  # a speaker is still needed
            manager=manager_with(ScriptedLLM([])),
        )
    message = caught.value.format_message()
    assert "\n" not in message
    assert "--audio-out FILE.wav" in message
    assert "PortAudio" in message or "sounddevice" in message or "--output-device" in message


def test_the_help_groups_the_options() -> None:
    from backline.cli import make_cli

    result = CliRunner().invoke(make_cli(), ["voice", "--help"])
    assert result.exit_code == 0
    for section in ("Session:", "Speech:", "Voice:"):
        assert section in result.output
    assert "--mode [always|push|wake|mute]" in result.output
