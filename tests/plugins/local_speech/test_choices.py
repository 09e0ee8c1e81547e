"""What the engines decide before any model runs: whisper's language, its transcript
cleaned of non-speech, Kokoro's voice and language, Piper's voice for a language."""

from __future__ import annotations

from pathlib import Path

import pytest
from backline_local_speech.catalog import PIPER_VOICES
from backline_local_speech.kokoro import choose_voice as kokoro_voice
from backline_local_speech.pipertts import choose_voice as piper_voice
from backline_local_speech.pipertts import voice_for_language
from backline_local_speech.whispercpp import clean, whisper_language

from backline.speech.models import model_dir

from .conftest import lay_out


def test_whisper_language() -> None:
    assert whisper_language("base.en", None) == "en"
    assert whisper_language("base.en", "en-US") == "en"
    assert whisper_language("small", None) == "auto"  # detected
    assert whisper_language("small", "fr_FR") == "fr"
    assert whisper_language("large-v3-turbo", "DE") == "de"
    with pytest.raises(ValueError, match=r"tiny.en understands English only.*tiny\)"):
        whisper_language("tiny.en", "es")


def test_whisper_transcript_without_its_annotations() -> None:
    assert clean(" [BLANK_AUDIO] ") == ""
    assert clean("(music) Hello there. *coughs*  ♪♪") == "Hello there."
    assert clean(" One, two,\nthree.") == "One, two, three."


def test_kokoro_voice_and_language() -> None:
    assert kokoro_voice(None, None) == ("af_heart", "en-us")
    assert kokoro_voice("bm_george", None) == ("bm_george", "en-gb")
    assert kokoro_voice(None, "fr") == ("ff_siwis", "fr-fr")
    assert kokoro_voice(None, "en-GB") == ("bf_emma", "en-gb")
    assert kokoro_voice(None, "pt_BR") == ("pf_dora", "pt-br")
    assert kokoro_voice(None, "zh") == ("zf_xiaoxiao", "cmn")
    assert kokoro_voice("af_bella", "es") == ("af_bella", "es")  # asked for: an accent
    with pytest.raises(ValueError, match="no voice 'af_nobody'"):
        kokoro_voice("af_nobody", None)
    with pytest.raises(ValueError, match="no voice speaks 'sv'"):
        kokoro_voice(None, "sv")


def test_piper_voice_for_a_language_prefers_one_downloaded() -> None:
    assert voice_for_language("en") == "en_US-lessac-medium"
    assert voice_for_language("en-GB") == "en_GB-alba-medium"
    assert voice_for_language("de") == "de_DE-thorsten-medium"
    assert voice_for_language("es_ES") == "es_ES-davefx-medium"
    ryan = next(v for v in PIPER_VOICES if v.name == "en_US-ryan-medium")
    lay_out(ryan)
    assert voice_for_language("en") == "en_US-ryan-medium"
    assert piper_voice(None, None, "en").name == "en_US-ryan-medium"
    assert piper_voice("en_GB-alba-medium", None, "en").name == "en_GB-alba-medium"
    assert piper_voice(None, "fr_FR-siwis-medium", None).name == "fr_FR-siwis-medium"
    assert piper_voice(None, None, None).name == "en_US-lessac-medium"
    assert Path(model_dir(ryan), "en_US-ryan-medium.onnx.json").is_file()
