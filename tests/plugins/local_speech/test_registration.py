"""backline-local-speech registers whisper, kokoro, piper and silero beside pocketsphinx
and espeak (issue 27): their models and voices, what stops each here (a package, a
model) in one sentence, and that a downloaded default makes one the engine used."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from backline_local_speech.catalog import (
    KOKORO_LANGUAGES,
    KOKORO_MODEL,
    PIPER_VOICES,
    SILERO_MODEL,
    WHISPER_MODELS,
)
from backline_local_speech.common import installed, missing_package

from backline.speech.models import ModelSpec, is_downloaded

from .conftest import entry, lay_out, plugins

ENGINES = {  # kind, name -> (the module it imports, its extra, its default model)
    ("stt", "whisper"): ("pywhispercpp", "whisper", "whisper/base.en"),
    ("tts", "kokoro"): ("kokoro_onnx", "kokoro", "kokoro/v1.0"),
    ("tts", "piper"): ("piper", "piper", "piper/en_US-lessac-medium"),
    ("vad", "silero"): ("onnxruntime", "silero", "silero/v6.2"),
}
HEAVY = ("pywhispercpp", "_pywhispercpp", "kokoro_onnx", "piper", "onnxruntime", "numpy")


def test_the_engines_and_their_models_and_voices() -> None:
    whisper = entry("stt", "whisper")
    assert whisper.plugin == "local_speech" and whisper.local
    assert whisper.rank > entry("stt", "pocketsphinx").rank
    assert [m.name for m in whisper.known_models() if isinstance(m, ModelSpec)] == [
        "base.en",  # the default first
        "tiny.en",
        "small.en",
        "medium.en",
        "tiny",
        "base",
        "small",
        "medium",
        "large-v3-turbo",
        "large-v3",
    ]

    kokoro = entry("tts", "kokoro")
    assert kokoro.model() == KOKORO_MODEL
    voices = kokoro.known_voices()
    assert voices[0] == "af_heart" and len(voices) == len(set(voices)) == 54
    assert {v[0] for v in voices} == set(KOKORO_LANGUAGES)  # every voice has its language

    piper = entry("tts", "piper")
    assert piper.known_voices()[0] == "en_US-lessac-medium"
    assert piper.known_voices() == [model.name for model in piper.known_models()]  # type: ignore[union-attr]
    assert {v.split("_")[0] for v in piper.known_voices()} == {"en", "de", "fr", "it", "es"}

    silero = entry("vad", "silero")
    assert silero.model() == SILERO_MODEL
    assert silero.rank > entry("vad", "energy").rank
    for tts in (kokoro, piper):
        assert tts.rank > entry("tts", "espeak").rank


@pytest.mark.parametrize(
    "spec", [*WHISPER_MODELS, KOKORO_MODEL, *PIPER_VOICES, SILERO_MODEL], ids=lambda s: s.id
)
def test_every_model_file_has_a_pinned_url_an_exact_size_and_a_sha256(spec: ModelSpec) -> None:
    assert spec.description
    assert len({f.name for f in spec.files}) == len(spec.files)
    for file in spec.files:
        assert re.fullmatch(r"[0-9a-f]{64}", file.sha256), file
        assert file.size > 1000, file
        assert file.url.startswith("https://") and file.url.endswith("/" + file.name), file
    urls = " ".join(f.url for f in spec.files)
    if spec.engine == "piper":  # its configs changed over time: a commit, never main
        assert re.search(r"/resolve/[0-9a-f]{40}/", urls)
        locale = spec.name.split("-")[0]
        assert f"/{locale.split('_')[0]}/{locale}/" in urls
    if spec.engine == "whisper":
        assert spec.files[0].name == f"ggml-{spec.name}.bin"


def test_with_nothing_downloaded_each_says_what_to_download_and_the_defaults_stay() -> None:
    manager = plugins()
    for (kind, name), (module, extra, default) in ENGINES.items():
        engine = manager.speech_engine(kind, name)
        why = engine.why_unavailable()
        assert why is not None and not engine.ready()
        if installed(module):
            assert why.endswith(f"backline speech download {default} ({_mb(default)} MB)"), why
        else:
            assert f"pip install 'backline-local-speech[{extra}]'" in why, why
    assert manager.speech_engine("vad").name == "energy"
    assert manager.speech_engine("stt").name != "whisper"
    assert manager.speech_engine("tts").name not in ("kokoro", "piper")


def _mb(model_id: str) -> str:
    engine, name = model_id.split("/")
    specs = [*WHISPER_MODELS, KOKORO_MODEL, *PIPER_VOICES, SILERO_MODEL]
    spec = next(s for s in specs if s.engine == engine and s.name == name)
    return f"{spec.size / 1e6:,.0f}"


@pytest.mark.parametrize(("kind", "name"), list(ENGINES), ids=lambda v: str(v))
def test_a_downloaded_default_makes_it_the_engine_used(kind: str, name: str) -> None:
    module = ENGINES[(kind, name)][0]
    engine = entry(kind, name)
    default = engine.model()
    assert isinstance(default, ModelSpec)
    lay_out(default)
    assert is_downloaded(default)
    chosen = plugins().speech_engine(kind).name
    if installed(module):
        assert engine.why_unavailable() is None and engine.ready()
        # kokoro outranks piper; piper is chosen only when kokoro is not ready
        assert chosen == name
    else:
        assert chosen != name  # ready means installed too


def test_another_downloaded_model_makes_it_available_but_not_the_default() -> None:
    if not installed("pywhispercpp"):
        pytest.skip("pywhispercpp is not installed (pip install 'backline-local-speech[whisper]')")
    small = next(m for m in WHISPER_MODELS if m.name == "small")
    lay_out(small)
    whisper = entry("stt", "whisper")
    assert whisper.why_unavailable() is None  # `--stt whisper --stt-model small` can run
    assert not whisper.ready()  # but base.en is not here: whisper is not chosen unasked
    assert plugins().speech_engine("stt").name != "whisper"


def test_a_missing_package_is_named_with_the_extra_that_installs_it() -> None:
    assert missing_package("backline_test_no_such_module", "pywhispercpp", "whisper") == (
        "the pywhispercpp package is not installed: pip install 'backline-local-speech[whisper]'"
    )
    assert missing_package("json", "json", "whisper") is None


def test_with_the_libraries_blocked_each_names_its_package_and_nothing_heavy_loads(
    cache: Path,
) -> None:
    """A fresh interpreter where the four libraries cannot be found (a finder that hides
    them, whether or not they are installed), with every default model on disk: each
    engine says which package to install, the defaults stay, and loading the plugins,
    listing and checking them imported none of the heavy libraries."""
    for spec in (WHISPER_MODELS[0], KOKORO_MODEL, PIPER_VOICES[0], SILERO_MODEL):
        lay_out(spec)
    script = textwrap.dedent(
        f"""
        import json, sys

        BLOCKED = {("pywhispercpp", "kokoro_onnx", "piper", "onnxruntime")!r}

        class Hide:
            def __init__(self, finder):
                self.finder = finder
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    return None
                return self.finder.find_spec(name, path, target)
            def __getattr__(self, attribute):  # find_distributions: entry points still load
                return getattr(self.finder, attribute)

        sys.meta_path[:] = [Hide(f) if hasattr(f, "find_spec") else f for f in sys.meta_path]

        from backline.plugins import PluginManager

        manager = PluginManager.from_environment().load()
        out = {{"why": {{}}}}
        for kind in ("stt", "tts", "vad"):
            for e in manager.speech_engines(kind):
                e.known_models(), e.known_voices(), e.ready()
                out["why"][e.name] = e.why_unavailable()
            out[kind] = manager.speech_engine(kind).name
        out["loaded"] = sorted(m for m in {HEAVY!r} if m in sys.modules)
        print(json.dumps(out))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["why"]["whisper"] == (
        "the pywhispercpp package is not installed: pip install 'backline-local-speech[whisper]'"
    )
    assert out["why"]["kokoro"].endswith("pip install 'backline-local-speech[kokoro]'")
    assert out["why"]["piper"].startswith("the piper-tts package is not installed")
    assert out["why"]["silero"].endswith("pip install 'backline-local-speech[silero]'")
    assert out["vad"] == "energy"
    assert out["stt"] != "whisper" and out["tts"] not in ("kokoro", "piper")
    assert out["loaded"] == []


def test_a_model_not_on_disk_is_refused_at_build_saying_how_to_get_it() -> None:
    cases = [("stt", "whisper", {}, "whisper/base.en"), ("vad", "silero", {}, "silero/v6.2")]
    cases += [
        ("tts", "kokoro", {"voice": "bf_emma"}, "kokoro/v1.0"),
        ("tts", "piper", {"language": "de"}, "piper/de_DE-thorsten-medium"),
    ]
    for kind, name, options, model in cases:
        with pytest.raises(RuntimeError, match=f"run `backline speech download {model} "):
            entry(kind, name).build(**options)


def test_what_a_factory_refuses_before_loading_anything() -> None:
    with pytest.raises(ValueError, match=r"English only.*--stt-model base\)"):
        entry("stt", "whisper").build(model="base.en", language="fr")
    with pytest.raises(ValueError, match=r"no model 'huge'; known: tiny\.en, base\.en"):
        entry("stt", "whisper").build(model="huge")
    with pytest.raises(ValueError, match="piper: no voice 'nobody'"):
        entry("tts", "piper").build(voice="nobody")
    with pytest.raises(ValueError, match="piper: no voice in its list speaks 'tlh'"):
        entry("tts", "piper").build(language="tlh")
    with pytest.raises(ValueError, match="no model 'v2'"):
        entry("tts", "kokoro").build(model="v2")
    with pytest.raises(ValueError, match="no model 'v5'"):
        entry("vad", "silero").build(model="v5")
