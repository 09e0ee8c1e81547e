"""The plugin registers `openai` speech-to-text and text-to-speech through its entry point:
remote (never the default), their models and voices, what stops them here, and engines
built from the registry that reach the endpoint."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from backline_openai._audio import OpenAISpeechError
from backline_openai.stt import OpenAISTT
from backline_openai.tts import OpenAITTS

from backline.keys import set_key
from backline.plugins import PluginError, PluginManager, SpeechEngineEntry
from backline.speech import AudioFrame
from tests.plugins.openai import fake_audio as fa
from tests.plugins.openai.fake_audio import FakeAudioServer

VOICES = [
    "alloy",
    "ash",
    "ballad",
    "coral",
    "echo",
    "fable",
    "nova",
    "onyx",
    "sage",
    "shimmer",
    "verse",
    "marin",
    "cedar",
]


ONLY_OPENAI = {"BACKLINE_PLUGINS": "openai,anthropic"}


def entry(kind: str) -> SpeechEngineEntry:
    plugins = PluginManager.from_environment(ONLY_OPENAI).load()
    found = plugins.speech_engine(kind, "openai")
    assert found.plugin == "openai"
    return found


def test_both_engines_are_registered_as_remote_with_their_models() -> None:
    stt, tts = entry("stt"), entry("tts")
    assert (stt.kind, stt.local, stt.rank) == ("stt", False, 0)
    assert (tts.kind, tts.local, tts.rank) == ("tts", False, 0)
    assert stt.known_models() == ["gpt-4o-mini-transcribe", "gpt-4o-transcribe", "whisper-1"]
    assert tts.known_models() == ["gpt-4o-mini-tts", "tts-1", "tts-1-hd"]
    assert (stt.default_model, tts.default_model, tts.default_voice) == (
        "gpt-4o-mini-transcribe",
        "gpt-4o-mini-tts",
        "alloy",
    )
    assert "OpenAI" in stt.description and "OpenAI" in tts.description


def test_without_a_key_they_say_why_and_are_never_the_default() -> None:
    stt, tts = entry("stt"), entry("tts")
    why = (
        "OPENAI_API_KEY is not set for OpenAI at https://api.openai.com/v1 (export it, or "
        "`backline keys set OPENAI_API_KEY`; a server of your own at OPENAI_AUDIO_BASE_URL "
        "needs none)"
    )
    assert (stt.why_unavailable(), tts.why_unavailable()) == (why, why)
    assert not stt.ready()
    with pytest.raises(OpenAISpeechError, match="OPENAI_API_KEY is not set, so the openai"):
        tts.build()
    set_key("OPENAI_API_KEY", "sk-stored")  # a stored key counts
    assert (stt.why_unavailable(), tts.why_unavailable()) == (None, None)
    assert stt.ready() and tts.ready()
    plugins = PluginManager.from_environment(ONLY_OPENAI).load()
    for kind in ("stt", "tts"):  # ready, but remote: the best-local default never picks them
        with pytest.raises(PluginError, match="engine is ready on this machine"):
            plugins.speech_engine(kind)


def test_on_a_hosted_endpoint_its_own_key_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-o")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.groq.com/openai/v1")
    assert entry("stt").why_unavailable() == (
        "GROQ_API_KEY is not set for Groq at https://api.groq.com/openai/v1 (export it, or "
        "`backline keys set GROQ_API_KEY`; a server of your own at OPENAI_AUDIO_BASE_URL "
        "needs none)"
    )


def test_a_server_of_your_own_needs_no_key_and_takes_any_voice(
    audio_server: FakeAudioServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")  # the chat model's
    monkeypatch.setenv("OPENAI_AUDIO_BASE_URL", audio_server.url)  # speech's, Speaches say
    stt, tts = entry("stt"), entry("tts")
    assert (stt.why_unavailable(), tts.why_unavailable()) == (None, None)
    assert tts.known_voices() == []  # its voices are its own (af_heart ...): none refused
    engine = tts.build(model="speaches-ai/Kokoro-82M-v1.0-ONNX", voice="af_heart", language="en")
    assert isinstance(engine, OpenAITTS)
    assert (engine.base_url, engine.voice) == (audio_server.url, "af_heart")
    built = stt.build(model="Systran/faster-whisper-small", language="fr")
    assert isinstance(built, OpenAISTT)
    audio_server.push(fa.Transcript("salut"))
    tone = AudioFrame.from_samples((int(8000 * math.sin(i / 5)) for i in range(8000)), 16000)
    assert built.transcribe(tone) == "salut"
    (request,) = audio_server.requests
    assert request.fields["model"] == "Systran/faster-whisper-small"
    assert request.fields["language"] == "fr"
    assert request.api_key == "unused"
    built.close()


def test_on_openai_the_voices_are_openais() -> None:
    assert entry("tts").known_voices() == VOICES


def test_loading_the_plugin_does_not_import_openai() -> None:
    code = (
        "import sys\n"
        "from backline.plugins import PluginManager\n"
        "m = PluginManager.from_environment({'BACKLINE_PLUGINS': 'openai,anthropic'}).load()\n"
        "e = m.speech_engine('tts', 'openai')\n"
        "e.why_unavailable(), e.known_voices()\n"
        "assert 'openai' not in sys.modules, 'openai was imported'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
