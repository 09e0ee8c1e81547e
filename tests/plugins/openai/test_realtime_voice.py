"""``backline voice --llm openai-realtime`` end to end (issue 29): a recording plays as
the microphone, the model hears it (no speech-to-text engine is built) and answers in
its own voice, which is what the speaker plays; the start-up line says so. And the
engines a front end builds for a model that speaks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from backline_openai import plugin as openai_plugin

from backline.app import SpeechOptions, build_speech
from backline.plugins import PluginManager
from backline.speech import read_wav
from tests.plugins.openai import fake_realtime as fr
from tests.plugins.openai.fake_realtime import ThreadedRealtimeServer
from tests.plugins.realtime_kit import talk_by_voice

pytest.importorskip("pocketsphinx", reason="backline-local-speech's pocketsphinx is not installed")
if shutil.which("espeak-ng") is None:  # pragma: no cover - .ci/run installs it
    pytest.skip("eSpeak NG is not installed (apt install espeak-ng)", allow_module_level=True)

from backline_local_speech import plugin as local_speech


def manager() -> PluginManager:
    made = PluginManager(entry_points=False).load()
    made.register(local_speech, name="local_speech")
    made.register(openai_plugin, name="openai")
    return made


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
    text, out = talk_by_voice("openai-realtime", manager(), tmp_path)
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
