"""``backline.app``'s speech options: engines chosen by name or as the best local one
ready, every wrong choice a click error naming the option, before anything starts."""

from __future__ import annotations

from typing import Any

import click
import pytest
from click.testing import CliRunner

import backline
from backline.app import SpeechOptions, build_speech, speech_options
from backline.plugins import PluginManager, RegisterSpeech
from backline.speech import EnergyVAD


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
