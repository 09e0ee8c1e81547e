"""Speech engines as registration kinds (issue 27): ``register_stt``, ``register_tts`` and
``register_vad`` through hookimpls, what ``register`` refuses, clashes, and the default
engine (the best local one that is ready: a default never starts a download)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import backline
from backline.plugins import PluginError, PluginManager, SpeechEngineEntry, UnknownNameError
from backline.speech.models import ModelFile, ModelSpec, model_dir

from .conftest import FakeSite, plugins_json, run_backline, unique

ENGINES = """
import backline
from backline.speech import EnergyVAD
from backline.speech.models import ModelFile, ModelSpec

BUILT = []

class Engine:
    def __init__(self, name, **options):
        self.name = name
        self.options = options

def stt(**options):
    BUILT.append(("stt", options))
    return Engine("ears", **options)

SMALL = ModelSpec("ears", "small", (ModelFile("small.bin", "http://127.0.0.1:9/x", "0" * 64, 3),))

@backline.hookimpl
def register_stt(register):
    register(
        "ears",
        stt,
        description="Listens.",
        rank=5,
        models=("tiny", SMALL),
        default_model="tiny",
    )

@backline.hookimpl
def register_tts(register):
    register(
        "mouth",
        lambda **options: Engine("mouth", **options),
        description="Speaks.",
        local=False,
        voices=lambda: ["bob", "alice"],
        default_voice="alice",
    )

@backline.hookimpl
def register_vad(register):
    register("ears", lambda **options: EnergyVAD(**options), unavailable=lambda: None)
"""


def engines_plugin(site: FakeSite) -> tuple[str, str]:
    name, module = unique("speechy"), unique("mod_speech_")
    site.add(f"backline-{name}", {module: ENGINES}, {name: module}, version="0.3.0")
    return name, module


def plugin(**hooks: Callable[..., None]) -> object:
    """A plugin object whose hooks are the given functions."""
    return type("Plugin", (), {k: staticmethod(backline.hookimpl(v)) for k, v in hooks.items()})()


def engines(kind: str, *registrations: dict[str, Any]) -> object:
    """A plugin registering engines of ``kind``: each ``dict(name=..., **register_kwargs)``."""

    def register_engines(register: Any) -> None:
        for options in registrations:
            options = dict(options)
            register(options.pop("name"), options.pop("factory", _factory), **options)

    return plugin(**{f"register_{kind}": register_engines})


def _factory(**options: Any) -> dict[str, Any]:
    return options


def manager(*plugins: object, strict: bool = True) -> PluginManager:
    found = PluginManager(builtins=False, entry_points=False, strict=strict)
    for i, p in enumerate(plugins):
        found.register(p, name=f"p{i}")
    return found


@pytest.fixture(autouse=True)
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty model cache: nothing is downloaded unless a test puts it there."""
    folder = tmp_path / "models"
    monkeypatch.setenv("BACKLINE_MODELS_DIR", str(folder))
    return folder


def spec(engine: str, name: str, size: int = 4) -> ModelSpec:
    return ModelSpec(
        engine, name, (ModelFile("weights.bin", "http://127.0.0.1:9/w", "0" * 64, size),)
    )


def put_on_disk(model: ModelSpec) -> None:
    folder = model_dir(model)
    folder.mkdir(parents=True, exist_ok=True)
    for file in model.files:
        (folder / file.name).write_bytes(bytes(file.size))


# -- through hookimpls ---------------------------------------------------------------------------
def test_an_installed_plugin_registers_engines_of_each_kind(site: FakeSite) -> None:
    name, module = engines_plugin(site)

    loaded = PluginManager(allow=[name]).load()

    assert loaded.plugin(name).status == "loaded"
    [ears] = loaded.speech_engines("stt")
    assert (ears.kind, ears.name, ears.plugin, ears.description) == (
        "stt",
        "ears",
        name,
        "Listens.",
    )
    assert (ears.local, ears.rank, ears.default_model) == (True, 5, "tiny")
    assert [getattr(m, "id", m) for m in ears.known_models()] == ["tiny", "ears/small"]
    [mouth] = loaded.speech_engines("tts")
    assert not mouth.local
    assert mouth.known_voices() == ["alice", "bob"]  # the default voice first
    # One name in two kinds is no clash: kinds are separate.
    assert [e.name for e in loaded.speech_engines("vad")] == ["ears"]
    assert loaded.owner("stt", "ears") == name and loaded.owner("vad", "ears") == name
    registered = loaded.plugin(name).registered()
    assert (registered["stt"], registered["tts"], registered["vad"]) == (
        ["ears"],
        ["mouth"],
        ["ears"],
    )

    engine = loaded.speech_engine("stt", "ears").build(model="tiny", language=None)
    assert engine.options == {"model": "tiny"}  # options given as None are left out
    assert sys.modules[module].BUILT == [("stt", {"model": "tiny"})]


def test_plugins_json_lists_the_engines_a_plugin_registered(site: FakeSite) -> None:
    name, _ = engines_plugin(site)

    listed = plugins_json(run_backline("plugins", "--json", env=site.env(BACKLINE_PLUGINS=name)))

    record = listed[name]
    assert record["hooks"] == ["register_stt", "register_tts", "register_vad"]
    assert (record["stt"], record["tts"], record["vad"]) == (
        ["ears"],
        ["mouth"],
        ["ears"],
    )


# -- what register refuses -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            {"name": "two words"},
            "register_stt: engine name must be a non-empty word, got 'two words'",
        ),
        ({"name": ""}, "register_stt: engine name must be a non-empty word, got ''"),
        ({"name": 7}, "register_stt: engine name must be a non-empty word, got 7"),
        ({"name": "e", "factory": "not callable"}, "the factory for 'e' must be callable"),
        ({"name": "e", "rank": "1"}, "rank for 'e' must be an int"),
        ({"name": "e", "rank": 1.5}, "rank for 'e' must be an int"),
        ({"name": "e", "rank": True}, "rank for 'e' must be an int"),
        ({"name": "e", "unavailable": "no"}, "unavailable for 'e' must be a function"),
        ({"name": "e", "models": "base.en"}, "models for 'e' must be names or ModelSpecs"),
        ({"name": "e", "models": ["base.en", 3]}, "models for 'e' must be names or ModelSpecs"),
        ({"name": "e", "voices": "alice"}, "voices for 'e' must be names, or a function"),
        ({"name": "e", "voices": ["alice", None]}, "voices for 'e' must be names, or a function"),
    ],
    ids=[
        "spaced-name",
        "empty-name",
        "number-name",
        "factory",
        "rank-str",
        "rank-float",
        "rank-bool",
        "unavailable",
        "models-str",
        "models-item",
        "voices-str",
        "voices-item",
    ],
)
def test_a_registration_register_refuses_fails_the_plugin(
    options: dict[str, Any], error: str
) -> None:
    with pytest.raises(PluginError, match="failed") as caught:
        manager(engines("stt", options))
    assert error in str(caught.value)

    lenient = manager(engines("stt", {"name": "fine"}, options), strict=False)
    info = lenient.plugin("p0")
    assert info.status == "failed" and info.error is not None and error in info.error
    assert lenient.speech_engines("stt") == []  # nothing half-registered


def test_the_hook_of_each_kind_names_itself_in_its_errors() -> None:
    for kind in ("tts", "vad"):
        with pytest.raises(PluginError, match=f"register_{kind}: engine name must be"):
            manager(engines(kind, {"name": "a b"}))


# -- clashes --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "label"),
    [
        ("stt", "speech-to-text engine"),
        ("tts", "text-to-speech engine"),
        ("vad", "voice activity detector"),
    ],
)
def test_two_plugins_registering_one_name_clash_and_the_second_fails(kind: str, label: str) -> None:
    first = engines(kind, {"name": "shared", "description": "first"})
    second = engines(kind, {"name": "shared", "description": "second"}, {"name": "other"})

    loaded = manager(first, second, strict=False)

    info = loaded.plugin("p1")
    assert info.status == "failed"
    assert info.error == (
        f"{label} 'shared' is registered by both 'p0' and 'p1'; 'p1' was not loaded "
        "(disable one of them with BACKLINE_DISABLE_PLUGINS)"
    )
    assert [(e.name, e.description) for e in loaded.speech_engines(kind)] == [
        ("shared", "first")
    ]  # the refused plugin registered nothing at all ("other" neither)
    assert [(c.name, c.first, c.second) for c in loaded.clashes] == [("shared", "p0", "p1")]


# -- the default engine ----------------------------------------------------------------------------
def default(*registrations: dict[str, Any], kind: str = "stt") -> str:
    return manager(engines(kind, *registrations)).speech_engine(kind).name


def test_the_default_is_the_highest_ranked_local_engine_that_is_ready() -> None:
    assert default({"name": "low", "rank": 1}, {"name": "high", "rank": 9}) == "high"
    assert default({"name": "neg", "rank": -1}, {"name": "zero"}) == "zero"


def test_ties_go_by_name() -> None:
    assert default({"name": "bravo", "rank": 3}, {"name": "alpha", "rank": 3}) == "alpha"


def test_a_remote_engine_is_never_the_default() -> None:
    chosen = default(
        {"name": "cloud", "rank": 100, "local": False},
        {"name": "here", "rank": 0},
        kind="tts",
    )
    assert chosen == "here"


def test_an_unavailable_engine_is_not_the_default_and_a_failing_check_says_so() -> None:
    def broken() -> str | None:
        raise OSError("cannot ask")

    loaded = manager(
        engines(
            "vad",
            {"name": "missing", "rank": 9, "unavailable": lambda: "the thing is not installed"},
            {"name": "broken", "rank": 8, "unavailable": broken},
            {"name": "plain", "rank": 0},
        )
    )

    assert loaded.speech_engine("vad").name == "plain"
    found = {e.name: e.why_unavailable() for e in loaded.speech_engines("vad")}
    assert found == {
        "missing": "the thing is not installed",
        "broken": "its check failed: cannot ask",
        "plain": None,
    }


def test_an_engine_whose_default_model_is_not_downloaded_is_not_ready(models: Path) -> None:
    big = spec("big", "base")
    loaded = manager(
        engines(
            "stt",
            {"name": "big", "rank": 9, "models": [big, "other"], "default_model": "base"},
            {"name": "named", "rank": 5, "models": ["bundled"], "default_model": "bundled"},
        )
    )
    [big_entry, named] = loaded.speech_engines("stt")

    assert not big_entry.ready()
    assert named.ready()  # a model given by name has nothing to download
    assert loaded.speech_engine("stt").name == "named"  # a default never starts a download
    assert not any(models.rglob("*"))  # and nothing was fetched or made

    put_on_disk(big)
    assert big_entry.ready()
    assert loaded.speech_engine("stt").name == "big"


def test_a_model_that_is_not_the_default_does_not_stop_an_engine() -> None:
    loaded = manager(
        engines(
            "stt",
            {"name": "e", "models": [spec("e", "huge"), "small"], "default_model": "small"},
        )
    )
    [entry] = loaded.speech_engines("stt")
    assert entry.ready()
    assert [getattr(m, "name", m) for m in entry.known_models()] == ["small", "huge"]


def test_models_and_voices_may_be_functions_called_when_listed() -> None:
    calls: list[str] = []

    def listed_models() -> list[str | ModelSpec]:
        calls.append("models")
        return ["a", "b"]

    loaded = manager(engines("tts", {"name": "e", "models": listed_models, "default_model": "b"}))
    assert calls == []  # registering does not list
    [entry] = loaded.speech_engines("tts")
    assert [getattr(m, "name", m) for m in entry.known_models()] == ["b", "a"]
    assert calls == ["models"]


# -- look-ups ---------------------------------------------------------------------------------
def test_no_engine_ready_raises_saying_why_each_is_not() -> None:
    loaded = manager(
        engines(
            "tts",
            {"name": "cloud", "local": False},
            {"name": "gone", "unavailable": lambda: "gone is not installed"},
            {"name": "heavy", "models": [spec("heavy", "m")], "default_model": "m"},
        )
    )

    with pytest.raises(PluginError) as caught:
        loaded.speech_engine("tts")

    message = str(caught.value)
    assert message.startswith("no text-to-speech engine is ready on this machine: ")
    assert "gone (gone is not installed)" in message
    assert "heavy (its model is not downloaded)" in message
    assert "pip install backline-local-speech, or name one (backline speech list)" in message


def test_no_engine_at_all_raises_saying_what_to_install() -> None:
    with pytest.raises(
        PluginError,
        match=r"^no voice activity engine is ready on this machine; pip install backline-local",
    ):
        manager().speech_engine("vad")


def test_an_unknown_engine_lists_the_known_ones_and_the_closest() -> None:
    loaded = manager(engines("stt", {"name": "whisper"}, {"name": "vosk"}))

    with pytest.raises(UnknownNameError) as caught:
        loaded.speech_engine("stt", "wisper")

    assert str(caught.value).startswith(
        "unknown speech-to-text engine 'wisper'; available: vosk, whisper. Did you mean 'whisper'?"
    )
    with pytest.raises(ValueError, match="kind must be stt, tts or vad, got 'asr'"):
        loaded.speech_engines("asr")


def test_a_named_engine_is_returned_even_when_it_is_not_ready() -> None:
    loaded = manager(engines("stt", {"name": "gone", "unavailable": lambda: "not here"}))
    entry = loaded.speech_engine("stt", "gone")
    assert isinstance(entry, SpeechEngineEntry)
    assert entry.why_unavailable() == "not here"
