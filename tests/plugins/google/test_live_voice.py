"""``backline voice --llm gemini-live`` end to end (issue 29): a recording plays as the
microphone, Gemini Live hears it (no speech-to-text engine is built) and answers in its
own voice, which is what the speaker plays; the start-up line says so."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from backline_google import plugin as google_plugin

from backline.app import SpeechOptions, build_speech
from backline.plugins import PluginManager
from backline.speech import read_wav
from tests.plugins.google import fake_live as fl
from tests.plugins.google.conftest import TEST_KEY
from tests.plugins.google.fake_live import FakeLiveServer, ThreadedLiveServer, get
from tests.plugins.realtime_kit import talk_by_voice

pytest.importorskip("pocketsphinx", reason="backline-local-speech's pocketsphinx is not installed")
if shutil.which("espeak-ng") is None:  # pragma: no cover - .ci/run installs it
    pytest.skip("eSpeak NG is not installed (apt install espeak-ng)", allow_module_level=True)

from backline_local_speech import plugin as local_speech

WORD = fl.AUDIO_PER_WORD / 2 / 24000  # seconds of the model's voice per word


def manager() -> PluginManager:
    made = PluginManager(entry_points=False).load()
    made.register(local_speech, name="local_speech")
    made.register(google_plugin, name="google")
    return made


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLiveServer]:
    with ThreadedLiveServer(api_key=TEST_KEY) as server:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        monkeypatch.setenv("GEMINI_API_KEY", TEST_KEY)
        monkeypatch.setenv("SSL_CERT_FILE", str(fl.CERT))
        yield server


def test_gemini_live_needs_no_speech_to_text_engine(live: FakeLiveServer) -> None:
    engines = build_speech(manager(), SpeechOptions(tts="espeak", vad="energy"), llm="gemini-live")
    assert engines.stt is None and engines.model == "gemini-live"
    assert "gemini-live hears you and speaks in its own voice" in engines.describe()


@pytest.mark.timeout(120)
def test_backline_voice_talks_with_gemini_live(live: FakeLiveServer, tmp_path: Path) -> None:
    live.hear.append("what is the weather")
    # The session is opened at the start with the agent's instructions (agent_changed):
    # the answer the server makes to the utterance by itself is the reply, played.
    live.push(fl.audio("It is sunny today"), fl.audio("A second answer is never asked."))
    text, out = talk_by_voice("gemini-live", manager(), tmp_path)
    assert "gemini-live hears you and speaks in its own voice" in text
    assert "you (said): what is the weather" in text
    assert "It is sunny today" in text and "second answer" not in text
    # The speaker played the model's own voice: four words of it, nothing synthesized.
    samples = read_wav(out).resample(24000).samples()
    spoken = sum(1 for s in samples if s == fl.SAMPLE) / 24000
    assert spoken == pytest.approx(4 * WORD, abs=0.02)
    assert len(live.utterances) == 1
    assert {mime for mime, _ in live.audio_in} == {fl.INPUT_MIME}
    # One connection, set up with the agent's instructions before the user spoke; the
    # transcript was never sent back as text, and the first answer is the one played.
    assert live.connections == 1
    (setup,) = live.setups
    assert get(setup, "systemInstruction") is not None
    assert live.sent("clientContent") == []
    assert len(live.script) == 1  # the second answer was never asked for
    assert live.errors == []
