"""``backline livekit console`` as a user runs it: a real process, a terminal.

The subprocesses load ``audio_knob/sitecustomize.py``: PortAudio missing
(``BACKLINE_TEST_AUDIO=none``), or a stand-in ``sounddevice`` with devices
(``devices``) or without (``silent``), or one whose microphone plays a file and whose
speaker records (``files``), so each case holds on any machine. The model is the fake
Anthropic server on loopback; no LiveKit key is set.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect
import pytest

from backline.speech import AudioFrame, split_frames, write_wav
from backline.testing import fake_anthropic as fa

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"
KNOB = str(Path(__file__).parent / "audio_knob")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def console_env(audio: str, server: fa.FakeAnthropicServer | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "LIVEKIT_", "BACKLINE_"))
    }
    path = os.pathsep.join(p for p in (KNOB, env.get("PYTHONPATH")) if p)
    env.update(
        PYTHONPATH=path,
        BACKLINE_TEST_AUDIO=audio,
        BACKLINE_PLUGINS="anthropic,livekit",
        BACKLINE_LOG="0",
        ANTHROPIC_API_KEY="sk-ant-test",
    )
    if server is not None:
        env["ANTHROPIC_BASE_URL"] = server.url
    return env


def run_audio_console(audio: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BACKLINE, "livekit", "console", *args],
        env=console_env(audio),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.timeout(90)
def test_text_mode_needs_no_audio_no_speech_and_no_livekit_key() -> None:
    out = io.StringIO()
    with fa.FakeAnthropicServer(["Hi! How can I help?"]) as server:
        child = pexpect.spawn(
            BACKLINE,
            ["livekit", "console", "--text"],
            env=console_env("none", server),
            encoding="utf-8",
            timeout=30,
            dimensions=(40, 120),
        )
        child.logfile_read = out
        try:
            child.expect("Type to talk to your agent")
            child.send("hello there\n")
            child.expect("Hi! How can I help?")
            child.expect("Type to talk to your agent")  # the prompt again
            # Ctrl-T would switch LiveKit's console to audio. A key typed before the
            # prompt reads is dropped by the prompt (it flushes the terminal's input),
            # so it is pressed until the console answers, a bounded number of times.
            for _ in range(20):
                child.sendcontrol("t")
                if child.expect(["Audio is off", pexpect.TIMEOUT], timeout=0.5) == 0:
                    break
            else:
                raise AssertionError("Ctrl-T was never answered")
            child.sendintr()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0, out.getvalue()
    shown = ANSI.sub("", out.getvalue())
    assert "Traceback" not in shown and "Error" not in shown
    for noise in ("inference", "TurnDetector", "warmed process", "LIVEKIT_API_KEY", "retry"):
        assert noise.lower() not in shown.lower(), noise  # no provider, no detector, no pool
    ((request,),) = [r.messages[-1]["content"] for r in server.requests]
    assert request == {"type": "text", "text": "hello there"}  # the turn reached backline


def test_audio_mode_without_portaudio_says_what_to_install() -> None:
    line = one_line(run_audio_console("none"))
    assert line.startswith("Error: the console needs PortAudio for the microphone and speaker")
    assert "apt-get install libportaudio2" in line and "or use --text" in line


def test_audio_mode_without_a_microphone_says_so() -> None:
    line = one_line(run_audio_console("silent"))
    assert line.startswith("Error: no microphone found")
    assert "--input-device" in line and "or use --text" in line


def test_audio_mode_without_livekit_keys_says_what_to_set() -> None:
    line = one_line(run_audio_console("devices"))
    assert line.startswith("Error: --stt deepgram/nova-3 is a LiveKit Inference model")
    assert "set LIVEKIT_API_KEY and LIVEKIT_API_SECRET" in line


@pytest.mark.parametrize(
    "flag",
    [["--stt", "openai"], ["--input-device", "1"], ["--tts-voice", "en-us"], ["--language", "fr"]],
)
def test_text_mode_refuses_audio_options(flag: list[str]) -> None:
    result = run_audio_console("none", "--text", *flag)
    assert result.returncode == 2
    assert f"{flag[0]} has no use with --text" in result.stderr


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll a condition another process makes true (bounded)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def played(path: Path, rate: int = 24000) -> AudioFrame:
    raw = path.read_bytes() if path.exists() else b""
    return AudioFrame(raw[: len(raw) // 2 * 2], rate)


def spoken(audio: AudioFrame) -> list[AudioFrame]:
    """What the speaker played from its first sound to its last (gaps kept), with 0.3 s of
    silence either side (PocketSphinx hears best with a little lead)."""
    samples = audio.samples()
    sounding = [i for i, v in enumerate(samples) if v]
    speech = AudioFrame(audio.data[2 * sounding[0] : 2 * sounding[-1] + 2], audio.sample_rate)
    quiet = AudioFrame.silence(0.3, audio.sample_rate)
    return [quiet, speech, quiet]


def a_reply_played_out(path: Path) -> bool:
    """Some speech, then half a second of silence after it."""
    blocks = [f.rms() > 100 for f in split_frames(played(path), 0.1)]
    if True not in blocks:
        return False
    last = len(blocks) - 1 - blocks[::-1].index(True)
    return sum(blocks) >= 5 and len(blocks) - 1 - last >= 5


@pytest.mark.timeout(120)
def test_the_audio_console_runs_with_backlines_own_engines(tmp_path: Path) -> None:
    # ``--stt pocketsphinx --tts espeak --vad energy``: no speech cloud, no LiveKit key,
    # no download. The microphone says a question; the reply is heard on the speaker.
    from .local_speech import HOW_ARE_YOU, speak, to_livekit, transcribe

    question = asyncio.run(speak(HOW_ARE_YOU)).resample(24000)  # the console's rate
    microphone, speaker = tmp_path / "in.wav", tmp_path / "out.raw"
    write_wav(microphone, [AudioFrame.silence(1.0, 24000), question])
    out = io.StringIO()
    with fa.FakeAnthropicServer(["How are you?"]) as server:
        env = console_env("files", server)
        env.update(
            BACKLINE_PLUGINS="anthropic,livekit,local_speech,speech",
            BACKLINE_TEST_AUDIO_IN=str(microphone),
            BACKLINE_TEST_AUDIO_OUT=str(speaker),
        )
        args = ["--stt", "pocketsphinx", "--tts", "espeak", "--vad", "energy"]
        child = pexpect.spawn(
            BACKLINE,
            ["livekit", "console", *args],
            env=env,
            encoding="utf-8",
            timeout=60,
            dimensions=(40, 120),
        )
        child.logfile_read = out
        try:
            child.expect("e2e:")  # LiveKit's metrics line: the reply's first audio is out
            wait_for(lambda: a_reply_played_out(speaker), "the reply to play out")
            child.sendintr()
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0, out.getvalue()
    assert "Traceback" not in ANSI.sub("", out.getvalue())
    (turn,) = [r.last_user_text for r in server.requests]
    # PocketSphinx heard the question through LiveKit's console (its echo canceller and
    # resampler), where it loses the first word of eSpeak NG's voice: measured, every run.
    assert turn is not None and turn.endswith("are you"), turn
    reply = asyncio.run(transcribe([to_livekit(f) for f in spoken(played(speaker))]))
    assert reply == HOW_ARE_YOU, f"the speaker said {reply!r}; the model heard {turn!r}"
