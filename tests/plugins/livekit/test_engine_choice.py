"""``--stt``/``--tts``/``--vad`` naming backline's engines: which names are whose, what is
built, and every wrong choice said before LiveKit starts (nothing reaches LiveKit
Inference: its names are checked offline)."""

from __future__ import annotations

import importlib.util
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from backline_livekit import BackendSTT, BackendTTS, BackendVAD, ProviderError, make_speech
from backline_livekit.providers import make_stt, make_tts, make_vad, prepare_engines
from backline_livekit.worker import WorkerConfig, prewarm
from livekit.agents import inference

from backline.plugins import SpeechEngineEntry

from . import local_speech  # noqa: F401  (skips the module without eSpeak NG or PocketSphinx)
from .test_cli import run

LOCAL = "livekit,anthropic,local_speech,speech"
# whisper cannot run without its package, or (with it) without its model: either is named
WHISPER_FIX = (
    "backline speech download whisper/"
    if importlib.util.find_spec("pywhispercpp")
    else "pip install 'backline-local-speech[whisper]'"
)
CREDS = {"LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "s"}


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """backline's speech plugins, and an empty model cache (so whisper cannot run)."""
    monkeypatch.setenv("BACKLINE_PLUGINS", LOCAL)
    monkeypatch.setenv("BACKLINE_MODELS_DIR", str(tmp_path / "models"))


@pytest.fixture
def server() -> Iterator[dict[str, str]]:
    """LiveKit credentials and a server that accepts: the worker's checks reach speech."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield {"LIVEKIT_URL": f"ws://127.0.0.1:{s.getsockname()[1]}", **CREDS}


# -- what a name means ------------------------------------------------------------------
@pytest.mark.usefixtures("local")
def test_backline_engine_names_build_the_adapters() -> None:
    speech = make_speech("pocketsphinx", "espeak", "energy", tts_voice="en-gb", environ={})
    assert isinstance(speech["vad"], BackendVAD) and speech["vad"].model == "energy"
    assert isinstance(speech["stt"], BackendSTT)
    assert speech["stt"].vad is speech["vad"]  # it streams the utterances this VAD finds
    assert speech["stt"].engine.name == "pocketsphinx"
    assert isinstance(speech["tts"], BackendTTS) and speech["tts"].engine.voice == "en-gb"
    # backline: names them whatever LiveKit has installed; one engine per process.
    again = make_speech(
        "backline:pocketsphinx",
        "backline:espeak:",
        "backline:energy",
        tts_voice="en-gb",
        environ={},
    )
    assert again["stt"].engine is speech["stt"].engine
    assert again["tts"].engine is speech["tts"].engine


@pytest.mark.usefixtures("local")
def test_livekits_names_keep_their_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDS.items():  # LiveKit's Inference classes read them themselves
        monkeypatch.setenv(name, value)
    assert isinstance(make_vad(environ={}), inference.VAD)  # silero: LiveKit's bundled model
    assert isinstance(make_vad("silero", environ={}), inference.VAD)
    assert make_vad("none", environ={}) is None
    stt = make_stt(environ=CREDS)  # deepgram/nova-3, built offline (not contacted)
    assert isinstance(stt, inference.STT) and stt.model == "deepgram/nova-3"
    assert isinstance(make_tts("cartesia/sonic-3", environ=CREDS), inference.TTS)


@pytest.mark.usefixtures("local")
def test_an_installed_livekit_plugin_wins_a_shared_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # livekit-plugins-espeak, as LiveKit would import it (livekit is a namespace package).
    plugin = tmp_path / "site" / "livekit" / "plugins" / "espeak"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(
        "class TTS:\n    def __init__(self, model=None):\n        self.model = model\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    before = set(sys.modules)
    try:
        livekits = make_tts("espeak:fast", environ={})
        assert type(livekits).__module__ == "livekit.plugins.espeak"
        assert livekits.model == "fast"
        assert isinstance(make_tts("backline:espeak", environ={}), BackendTTS)
    finally:  # the stand-in plugin is gone for the next test
        for name in set(sys.modules) - before:
            del sys.modules[name]


@pytest.mark.usefixtures("local")
def test_a_worker_process_builds_the_engines_before_its_first_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = WorkerConfig(stt="pocketsphinx", tts="espeak", vad="energy", tts_voice="en-gb")
    monkeypatch.setenv("BACKLINE_LIVEKIT_CONFIG", config.to_env())
    assert WorkerConfig.from_env().speech_choices() == config.speech_choices()
    prewarm(None)  # type: ignore[arg-type]  # LiveKit's JobProcess: not read
    built: list[str] = []
    build = SpeechEngineEntry.build

    def counted(entry: SpeechEngineEntry, **options: Any) -> Any:
        built.append(entry.name)
        return build(entry, **options)

    monkeypatch.setattr(SpeechEngineEntry, "build", counted)
    prepare_engines(**config.speech_choices())
    speech = make_speech(**config.speech_choices())
    assert built == ["energy"]  # the engines were ready; a detector is made per stream
    assert speech["tts"].engine.voice == "en-gb"


# -- every wrong choice, before LiveKit starts ------------------------------------------
@pytest.mark.usefixtures("local")
@pytest.mark.parametrize(
    ("args", "flag", "said"),
    [
        (
            ["--stt", "nosuch"],
            "--stt",
            [
                "unknown STT 'nosuch'",
                "pip install livekit-plugins-nosuch",
                "LiveKit Inference model (provider/model, e.g. deepgram/nova-3; providers: ",
                "backline's speech engines (",
                "pocketsphinx",
            ],
        ),
        (["--vad", "nosuch"], "--vad", ["unknown VAD 'nosuch'", "silero (bundled)", "energy"]),
        (["--stt", "backline:nosuch"], "--stt", ["backline has no stt engine 'nosuch'"]),
        (
            ["--stt", "whisper"],
            "--stt",
            ["backline's whisper cannot run here", WHISPER_FIX],
        ),
        (
            ["--stt", "pocketsphinx", "--vad", "none"],
            "--vad",
            ["needs voice activity detection", "leave out --vad none"],
        ),
        (
            ["--tts", "espeak", "--tts-voice", "klingon"],
            "--tts-voice",
            ["espeak has no voice 'klingon'", "backline speech list"],
        ),
        (["--tts-voice", "en-us"], "--tts-voice", ["--tts cartesia/sonic-3 is LiveKit's"]),
        (["--language", "fr"], "--language", ["neither --stt nor --tts names one"]),
        (
            ["--stt", "pocketsphinx", "--language", "fr"],
            "--stt",
            ["backline's pocketsphinx could not start", "English"],
        ),
    ],
)
def test_a_wrong_speech_choice_names_its_option(
    server: dict[str, str], args: list[str], flag: str, said: list[str]
) -> None:
    result = run("dev", *args, BACKLINE_PLUGINS=LOCAL, **server)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{flag}'" in result.output
    text = " ".join(result.output.split())
    for words in said:
        assert words in text


@pytest.mark.usefixtures("local")
def test_make_speech_raises_provider_errors_with_their_option() -> None:
    with pytest.raises(ProviderError, match="needs voice activity detection") as caught:
        make_speech("pocketsphinx", "espeak", "none", environ={})
    assert caught.value.flag == "--vad"
