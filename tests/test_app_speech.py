"""``backline.app``'s speech options: engines chosen by name or as the best local one
ready, every wrong choice a click error naming the option, before anything starts."""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import threading
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import backline
from backline.app import SpeechOptions, build_speech, speech_options
from backline.plugins import PluginManager, RegisterSpeech
from backline.speech import EnergyVAD
from backline.speech.models import ModelFile, ModelSpec, is_downloaded


class _Silent:
    """An engine object: these tests check the choice, not the sound."""

    def __init__(self, **options: Any) -> None:
        self.options = options


class Engines:
    """A plugin with a ready remote engine, one that cannot run here and one whose
    factory refuses its options."""

    @backline.hookimpl
    def register_stt(self, register: RegisterSpeech) -> None:
        register("cloudy", _Silent, local=False, rank=100)
        register("broken", _Silent, unavailable=lambda: "the broken package is missing")

    @backline.hookimpl
    def register_tts(self, register: RegisterSpeech) -> None:
        def picky(**options: Any) -> _Silent:
            if options.get("model") == "huge":
                raise ValueError("no model 'huge' (try small)")
            return _Silent(**options)

        register("picky", picky, rank=-5, voices=("anna", "bert"), default_voice="anna")


@pytest.fixture
def manager() -> PluginManager:
    manager = PluginManager(entry_points=False).load()
    manager.register(Engines(), name="engines")
    return manager


def installed() -> PluginManager:
    return PluginManager.from_environment().load()


def test_without_names_the_best_local_engines_that_are_ready_are_chosen() -> None:
    manager = installed()
    if manager.speech_engine("stt").name != "pocketsphinx":
        pytest.skip("a better local speech-to-text engine is installed here")
    engines = build_speech(manager, SpeechOptions())
    assert [e.name for e in engines.entries] == ["pocketsphinx", "espeak", "energy"]
    assert isinstance(engines.vad, EnergyVAD)
    assert engines.describe() == (
        "speech: listening with pocketsphinx (en-us), speaking with espeak (en-us), "
        "voice activity by energy"
    )
    assert engines.as_dict() == {"stt": "pocketsphinx", "tts": "espeak", "vad": "energy"}


def test_a_remote_engine_is_used_only_when_named(manager: PluginManager) -> None:
    with pytest.raises(click.UsageError, match="no speech-to-text engine is ready"):
        build_speech(manager, SpeechOptions(tts="picky"))  # no local STT in this manager
    engines = build_speech(manager, SpeechOptions(stt="cloudy", tts="picky", tts_voice="bert"))
    assert [e.name for e in engines.entries] == ["cloudy", "picky", "energy"]
    assert engines.tts.options == {"voice": "bert"}
    assert engines.as_dict() == {
        "stt": "cloudy",
        "tts": "picky",
        "tts_voice": "bert",
        "vad": "energy",
    }


def test_a_wrong_choice_names_its_option_and_the_fix(manager: PluginManager) -> None:
    cases: list[tuple[SpeechOptions, str, str]] = [
        (SpeechOptions(stt="clouds", tts="picky"), "'--stt'", "Did you mean 'cloudy'?"),
        (SpeechOptions(stt="broken", tts="picky"), "'--stt'", "the broken package is missing"),
        (SpeechOptions(stt="cloudy", tts="picky", tts_voice="ana"), "'--tts-voice'", "'anna'"),
        (SpeechOptions(stt="cloudy", tts="picky", tts_model="huge"), "'--tts'", "try small"),
        (SpeechOptions(stt="cloudy", tts="picky", vad="silence"), "'--vad'", "unknown"),
    ]
    for options, hint, says in cases:
        with pytest.raises(click.BadParameter) as caught:
            build_speech(manager, options)
        assert caught.value.param_hint == hint
        assert says in caught.value.format_message()


def test_the_options_reach_the_command_in_a_section_of_their_own() -> None:
    seen: list[SpeechOptions] = []

    @click.command()
    @speech_options
    def talk(speech_options: SpeechOptions) -> None:
        seen.append(speech_options)

    runner = CliRunner()
    result = runner.invoke(talk, ["--stt", "whisper", "--stt-model", "base.en", "--language", "en"])
    assert result.exit_code == 0, result.output
    assert seen == [SpeechOptions(stt="whisper", stt_model="base.en", language="en")]
    result = runner.invoke(talk, ["--tts", "kokoro"], env={"BACKLINE_STT": "pocketsphinx"})
    assert seen[-1] == SpeechOptions(stt="pocketsphinx", tts="kokoro")
    help_text = runner.invoke(talk, ["--help"]).output
    assert "Speech:" in help_text and "--tts-voice VOICE" in help_text


class _Model(http.server.BaseHTTPRequestHandler):
    body = os.urandom(300_000)

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _modelled(base: str) -> PluginManager:
    spec = ModelSpec(
        "modelled",
        "small",
        (
            ModelFile(
                "model.bin", f"{base}/model.bin", hashlib.sha256(_Model.body).hexdigest(), 300_000
            ),
        ),
    )

    class Modelled:
        @backline.hookimpl
        def register_stt(self, register: RegisterSpeech) -> None:
            def needs_model() -> str | None:
                return None if is_downloaded(spec) else "its model is not downloaded"

            register(
                "modelled", _Silent, models=(spec,), default_model="small", unavailable=needs_model
            )

    manager = PluginManager(entry_points=False).load()
    manager.register(Engines(), name="engines")
    manager.register(Modelled(), name="modelled")
    return manager


def test_a_model_the_user_asked_for_is_downloaded_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BACKLINE_MODELS_DIR", str(tmp_path))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        manager = _modelled(f"http://127.0.0.1:{httpd.server_address[1]}")
        with pytest.raises(click.UsageError, match=r"modelled \(its model is not downloaded"):
            build_speech(manager, SpeechOptions(tts="picky"))  # never by default
        engines = build_speech(manager, SpeechOptions(stt="modelled", tts="picky"))
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    assert engines.entries[0].name == "modelled"
    assert (tmp_path / "modelled" / "small" / "model.bin").read_bytes() == _Model.body
    assert "modelled: downloading modelled/small (0 MB) into" in capsys.readouterr().err


def test_offline_the_first_use_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BACKLINE_MODELS_DIR", str(tmp_path))
    manager = _modelled(f"http://127.0.0.1:{_free_port()}")  # nothing listens there
    with pytest.raises(click.ClickException) as caught:
        build_speech(manager, SpeechOptions(stt="modelled", tts="picky"))
    message = caught.value.format_message()
    assert message.startswith("--stt modelled: could not download modelled/small")
    assert "Are you offline?" in message and "backline speech download modelled/small" in message
    assert not (tmp_path / "modelled" / "small" / "model.bin").exists()
