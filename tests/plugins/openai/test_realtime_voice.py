"""``backline voice --llm openai-realtime`` end to end (issue 29): a recording plays as
the microphone, the model hears it (no speech-to-text engine is built) and answers in
its own voice, which is what the speaker plays; the start-up line says so. And the
engines a front end builds for a model that speaks."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path

import pytest
from backline_openai import plugin as openai_plugin

from backline.app import SessionOptions, SpeechOptions, build_speech
from backline.io.voice import VoiceOptions, run_voice_front_end
from backline.plugins import PluginManager
from backline.speech import AudioFrame, read_wav, write_wav
from tests.plugins.openai import fake_realtime as fr
from tests.plugins.openai.fake_realtime import ThreadedRealtimeServer

pytest.importorskip("pocketsphinx", reason="backline-local-speech's pocketsphinx is not installed")
if shutil.which("espeak-ng") is None:  # pragma: no cover - .ci/run installs it
    pytest.skip("eSpeak NG is not installed (apt install espeak-ng)", allow_module_level=True)

from backline_local_speech import plugin as local_speech

RATE = 16000


def manager() -> PluginManager:
    made = PluginManager(entry_points=False).load()
    made.register(local_speech, name="local_speech")
    made.register(openai_plugin, name="openai")
    return made


def tone(seconds: float) -> AudioFrame:
    return AudioFrame.from_samples(
        [(8000 if (i // 20) % 2 else -8000) for i in range(int(seconds * RATE))], RATE
    )


@pytest.fixture
def realtime(monkeypatch: pytest.MonkeyPatch) -> fr.FakeRealtimeServer:
    with ThreadedRealtimeServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield server  # type: ignore[misc]


def test_a_model_that_speaks_needs_no_speech_to_text_engine(
    realtime: fr.FakeRealtimeServer,
) -> None:
    engines = build_speech(
        manager(), SpeechOptions(tts="espeak", vad="energy"), llm="openai-realtime"
    )
    assert engines.stt is None and engines.model == "openai-realtime"
    assert engines.describe() == (
        "speech: openai-realtime hears you and speaks in its own voice (other words: espeak), "
        "voice activity by energy"
    )
    assert engines.as_dict()["stt"] == "openai-realtime"
    # A named engine still listens (the model hears its transcripts, and speaks).
    named = build_speech(
        manager(),
        SpeechOptions(stt="pocketsphinx", tts="espeak", vad="energy"),
        llm="openai-realtime",
    )
    assert named.stt is not None and named.model == "openai-realtime"
    assert "pocketsphinx (en-us), openai-realtime speaks in its own voice" in named.describe()
    # Another model: as before.
    plain = build_speech(manager(), SpeechOptions(tts="espeak", vad="energy"), llm="anthropic")
    assert plain.stt is not None and plain.model is None


@pytest.mark.timeout(120)
def test_backline_voice_talks_with_a_realtime_model(
    realtime: fr.FakeRealtimeServer, tmp_path: Path
) -> None:
    realtime.transcripts.append("what is the weather")
    realtime.push(fr.text("It is sunny today"))
    audio_in, out = tmp_path / "in.wav", tmp_path / "out.wav"
    write_wav(audio_in, [AudioFrame.silence(0.5, RATE), tone(0.6), AudioFrame.silence(2.0, RATE)])
    printed = io.StringIO()
    stdin, stdout = sys.stdin, sys.stdout
    sys.stdin, sys.stdout = io.StringIO(""), printed  # the recording, then quit
    try:
        run_voice_front_end(
            SessionOptions(llm="openai-realtime", log=False),
            SpeechOptions(tts="espeak", vad="energy"),
            VoiceOptions(audio_in=str(audio_in), audio_out=str(out), plain=True),
            manager=manager(),
        )
    finally:
        sys.stdin, sys.stdout = stdin, stdout
    text = printed.getvalue()
    assert "openai-realtime hears you and speaks in its own voice" in text
    assert "you (said): what is the weather" in text
    assert "It is sunny today" in text
    # The speaker played the model's own voice: four words of it, nothing synthesized.
    samples = read_wav(out).resample(24000).samples()
    spoken = sum(1 for s in samples if s == 4096) / 24000
    assert spoken == pytest.approx(4 * fr.WORD_MS / 1000, abs=0.02)
    assert len(realtime.sent("input_audio_buffer.commit")) == 1
    assert realtime.sent("conversation.item.create") == []  # heard, not typed
    assert realtime.errors == []
