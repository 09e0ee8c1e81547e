"""``backline speech`` (issue 27): list the engines, download a model, say, transcribe,
check the microphone and speaker.

In process through click's runner, with the real engines (eSpeak NG speaks,
PocketSphinx listens) and an installed-looking test plugin whose engine's model is
served by a file server on loopback. There is no sound card here: ``check`` runs
against the real ``sounddevice`` when PortAudio is missing, a missing package, and a
stand-in ``sounddevice`` (with or without devices) in place of PortAudio.
"""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import json
import shutil
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from backline.cli import make_cli
from backline.speech import AudioFrame, read_wav, write_wav

from .plugins_system.conftest import FakeSite, unique

HAVE_ENGINES = importlib.util.find_spec("pocketsphinx") is not None and bool(
    shutil.which("espeak-ng")
)
needs_engines = pytest.mark.skipif(
    not HAVE_ENGINES, reason="needs pocketsphinx and eSpeak NG (apt install espeak-ng)"
)

PLUGINS = "anthropic,speech,local_speech"  # the built-in ones and backline-local-speech
# Phrases eSpeak NG says and PocketSphinx hears back word for word (tests/speech).
PHRASE = "one two three four five"
MODEL_TEXT = (b"words from the model file " * 120_000)[:3_000_000]  # what the engine "hears"

EARS = """
import os
from pathlib import Path

import backline
from backline.speech import BatchSTT
from backline.speech.models import ModelFile, ModelSpec, model_dir

BASE = ModelSpec(
    "ears",
    "base",
    (ModelFile("model.txt", os.environ["EARS_URL"], os.environ["EARS_SHA"], {size}),),
    description="the test model",
)


class Ears(BatchSTT):
    name = "ears"

    def __init__(self, model):
        self.words = " ".join((model_dir(model) / "model.txt").read_text().split()[:5])

    def transcribe(self, frame):
        return self.words


def build(*, model=None, language=None):
    chosen = {{"base": BASE}}.get(model or "base")
    if chosen is None:
        raise ValueError(f"ears: no model {{model!r}}")
    return Ears(chosen)


@backline.hookimpl
def register_stt(register):
    register("ears", build, description="Hears its model.", rank=99, models=[BASE],
             default_model="base")


@backline.hookimpl
def register_tts(register):
    register("cloudy", build, local=False, models=["big"], default_model="big")


@backline.hookimpl
def register_vad(register):
    register("choosy", build, models=[ModelSpec("choosy", "one", BASE.files)])
"""


class Files(http.server.BaseHTTPRequestHandler):
    body = MODEL_TEXT

    def do_GET(self) -> None:
        if self.path != "/model.txt":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/model.txt"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def models(tmp_path: Path) -> Path:
    return tmp_path / "models"


@pytest.fixture
def env(tmp_path: Path, models: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Only the built-in speech plugin and backline-local-speech; an empty model cache."""
    for name in ("BACKLINE_DISABLE_PLUGINS", "BACKLINE_STRICT_PLUGINS"):
        monkeypatch.delenv(name, raising=False)
    return {"BACKLINE_PLUGINS": PLUGINS, "BACKLINE_MODELS_DIR": str(models)}


@pytest.fixture
def ears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str, env: dict[str, str]
) -> Iterator[dict[str, str]]:
    """The test plugin installed (its engine ``ears`` needs the model ``ears/base``, served
    on loopback); returns the environment that loads it."""
    site = FakeSite(tmp_path / "site")
    site.path.mkdir()
    monkeypatch.syspath_prepend(str(site.path))
    name, module = unique("ears"), unique("mod_ears_")
    site.add(f"backline-{name}", {module: EARS.format(size=len(MODEL_TEXT))}, {name: module})
    try:
        yield {
            **env,
            "BACKLINE_PLUGINS": f"{PLUGINS},{name}",
            "EARS_URL": server,
            "EARS_SHA": hashlib.sha256(MODEL_TEXT).hexdigest(),
        }
    finally:
        sys.modules.pop(module, None)


def run(*args: str, env: dict[str, str], input: str | None = None) -> Result:
    return CliRunner().invoke(make_cli(), ["speech", *args], env=env, input=input)


def error_line(result: Result, status: int = 1, *, progress: str = "") -> str:
    """The one line a failure prints (no traceback), after lines of ``progress`` if any
    (lines starting with ``Downloading`` or ``progress``)."""
    assert result.exit_code == status, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if status == 2:  # click's usage errors: the usage, the hint, then the error
        return lines[-1]
    if progress:
        assert lines[0].startswith("Downloading ")
        assert all(line.startswith(f"{progress}: ") for line in lines[1:-1]), lines
    else:
        assert len(lines) == 1, result.stderr
    return lines[-1]


# -- list ------------------------------------------------------------------------------------------
@needs_engines
def test_list_shows_each_kind_with_its_engines_and_the_default(env: dict[str, str]) -> None:
    result = run("list", env=env)

    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith("speech-to-text (--stt NAME):\n  ")
    assert "pocketsphinx (plugin local_speech; local; ready; the default)\n" in out
    assert "    models:\n      en-us (default)\n" in out
    assert "\n\ntext-to-speech (--tts NAME):\n  " in out
    assert "  espeak (plugin local_speech; local; ready; the default)\n" in out
    assert "    voices: en-us (default), " in out and " in all)" in out
    assert "\n\nvoice activity (--vad NAME):\n  energy (built-in; local; ready; the default)" in out


@needs_engines
def test_list_json_has_every_voice_and_the_kind_can_be_chosen(env: dict[str, str]) -> None:
    result = run("list", "--kind", "tts", "--json", env=env)

    assert result.exit_code == 0, result.stderr
    listed = json.loads(result.stdout)
    assert list(listed) == ["tts"]
    [espeak] = [e for e in listed["tts"] if e["name"] == "espeak"]
    assert espeak["name"] == "espeak" and espeak["plugin"] == "local_speech"
    assert espeak["local"] and espeak["ready"] and espeak["default"]
    assert espeak["why_not_ready"] is None
    assert espeak["voices"][0] == "en-us" and len(espeak["voices"]) > 8
    assert run("list", "--kind", "asr", env=env).exit_code == 2


def test_an_engine_whose_model_is_missing_is_listed_as_not_ready_with_the_fix(
    ears: dict[str, str], models: Path
) -> None:
    result = run("list", "--kind", "stt", env=ears)

    assert result.exit_code == 0, result.stderr
    assert (
        "ears (plugin " in result.stdout
        and "; local; not ready: its default model is not downloaded: backline speech download "
        "ears/base)\n    Hears its model.\n    models:\n      base (default, 3.0 MB, not "
        "downloaded)\n"
        in result.stdout
    )
    [entry] = [
        e for e in json.loads(run("list", "--json", env=ears).stdout)["stt"] if e["name"] == "ears"
    ]
    assert entry["models"] == [
        {
            "name": "base",
            "id": "ears/base",
            "description": "the test model",
            "size": len(MODEL_TEXT),
            "downloaded": False,
            "folder": str(models / "ears" / "base"),
        }
    ]
    assert not entry["ready"] and not entry["default"]  # rank 99, but not ready


# -- download --------------------------------------------------------------------------------------
def test_download_shows_progress_prints_the_folder_and_makes_the_engine_ready(
    ears: dict[str, str], models: Path, tmp_path: Path
) -> None:
    result = run("download", "ears/base", env=ears)

    assert result.exit_code == 0, result.stderr
    folder = models / "ears" / "base"
    assert result.stdout == f"{folder}\n"
    assert (folder / "model.txt").read_bytes() == MODEL_TEXT
    progress = result.stderr.splitlines()
    assert progress[0] == f"Downloading ears/base (3.0 MB) into {folder}"
    assert progress[-1] == "ears/base: 100% (3.0 MB of 3.0 MB)"
    assert len(progress) > 5  # a line every tenth (stderr is no terminal here)

    again = run("download", "ears", env=ears)  # the engine's name: its default model
    assert again.exit_code == 0 and again.stdout == f"{folder}\n"
    assert again.stderr == "ears/base is already downloaded.\n"

    listed = run("list", "--kind", "stt", env=ears).stdout
    assert "ears (plugin " in listed and "; local; ready; the default)" in listed
    assert "      base (default, 3.0 MB, downloaded)\n" in listed

    wav = tmp_path / "quiet.wav"
    write_wav(wav, [AudioFrame.silence(0.5, 8000)])
    heard = run("transcribe", str(wav), env=ears)  # the default engine now: rank 99, ready
    assert heard.exit_code == 0, heard.stderr
    assert heard.stdout == "words from the model file\n"
    assert "speech-to-text: ears (the best local engine ready here" in heard.stderr


def test_a_download_that_does_not_match_its_checksum_is_a_clean_error(
    ears: dict[str, str], models: Path
) -> None:
    result = run("download", "ears/base", env={**ears, "EARS_SHA": "0" * 64})

    line = error_line(result, progress="ears/base")
    assert line.startswith("Error: ears/base: model.txt from http://127.0.0.1:")
    assert "is not the expected file" in line and "It was deleted; try again" in line
    assert not any((models / "ears" / "base").iterdir())  # nothing half-downloaded is kept


def test_a_download_from_a_server_that_is_gone_says_what_to_do(ears: dict[str, str]) -> None:
    result = run("download", "ears/base", env={**ears, "EARS_URL": ears["EARS_URL"] + "-gone"})

    line = error_line(result, progress="ears/base")
    assert line.startswith("Error: could not download ears/base (model.txt) from ")
    assert "HTTP 404" in line and "Run `backline speech download ears/base` again" in line


@needs_engines
def test_an_engine_that_needs_no_download_says_so(env: dict[str, str]) -> None:
    bundled = run("download", "pocketsphinx", env=env)
    assert bundled.exit_code == 0 and bundled.stdout == ""
    assert bundled.stderr == (
        "pocketsphinx/en-us needs no download: the engine brings its model itself.\n"
    )
    none = run("download", "espeak", env=env)
    assert none.exit_code == 0
    assert none.stderr == "espeak needs no download: it has no model to fetch.\n"


def test_a_remote_engine_needs_no_download_and_one_with_no_default_asks_which(
    ears: dict[str, str],
) -> None:
    remote = run("download", "cloudy", env=ears)
    assert remote.exit_code == 0 and remote.stdout == ""
    assert remote.stderr == "cloudy/big needs no download: it runs on a server.\n"

    choose = error_line(run("download", "choosy", env=ears), status=2)
    assert choose == (
        "Error: Invalid value for 'ENGINE[/MODEL]': choosy has no default model: name one "
        "(choosy/one)"
    )


def test_unknown_names_are_usage_errors_with_did_you_mean(ears: dict[str, str]) -> None:
    engine = error_line(run("download", "eras/base", env=ears), status=2)
    assert engine.startswith("Error: Invalid value for 'ENGINE[/MODEL]': unknown speech engine")
    assert engine.endswith("Did you mean 'ears/base'?")

    model = error_line(run("download", "ears/bsae", env=ears), status=2)
    assert model == (
        "Error: Invalid value for 'ENGINE[/MODEL]': ears has no model 'bsae'; its models: base. "
        "Did you mean 'ears/base'?"
    )

    nothing = error_line(run("download", "zzzz", env=ears), status=2)
    assert "unknown speech engine 'zzzz'; available: " in nothing
    assert "`backline speech list` shows them" in nothing


# -- say and transcribe -------------------------------------------------------------------------
@needs_engines
def test_say_with_espeak_then_transcribe_with_pocketsphinx_gives_the_words(
    env: dict[str, str], tmp_path: Path
) -> None:
    wav = tmp_path / "said.wav"

    said = run("say", PHRASE, "--tts", "espeak", "--voice", "en-us", "-o", str(wav), env=env)

    assert said.exit_code == 0, said.stderr
    audio = read_wav(wav)
    assert audio.sample_rate == 22050 and 1.0 < audio.duration < 4.0
    assert said.stderr == f"{wav}: {audio.duration:.1f} s at 22050 Hz\n"

    heard = run("transcribe", str(wav), "--stt", "pocketsphinx", "--language", "en", env=env)

    assert heard.exit_code == 0, heard.stderr
    assert heard.stdout == f"{PHRASE}\n"
    assert heard.stderr == ""  # named: nothing to say about the choice


@needs_engines
def test_say_reads_stdin_and_names_the_default_engine_it_chose(
    env: dict[str, str], tmp_path: Path
) -> None:
    wav = tmp_path / "piped.wav"

    said = run("say", "-", "-o", str(wav), env=env, input="what is the weather\n")

    assert said.exit_code == 0, said.stderr
    assert said.stderr.startswith(
        "backline: text-to-speech: espeak (the best local engine ready here; --tts NAME "
        "chooses another)\n"
    )
    heard = run("transcribe", str(wav), env=env)
    assert heard.stdout == "what is the weather\n"
    assert "speech-to-text: pocketsphinx (the best local engine ready here" in heard.stderr

    assert error_line(run("say", "-", "-o", str(wav), env=env, input="  \n"), status=2) == (
        "Error: nothing to say: TEXT is empty"
    )


@needs_engines
def test_an_engine_that_refuses_its_options_is_one_line_naming_the_fix(
    env: dict[str, str], tmp_path: Path
) -> None:
    wav = tmp_path / "x.wav"
    voice = run("say", "hello", "--tts", "espeak", "--voice", "no such", "-o", str(wav), env=env)
    assert error_line(voice) == (
        "Error: espeak: 'no such' is not a voice name (espeak-ng --voices); check --voice: "
        "`backline speech list --kind tts` shows what espeak takes"
    )
    assert not wav.exists()

    write_wav(wav, [AudioFrame.silence(0.2, 16000)])
    language = run("transcribe", str(wav), "--stt", "pocketsphinx", "--language", "fr", env=env)
    assert error_line(language) == (
        "Error: pocketsphinx: its bundled model is English (en), not 'fr'; check --language: "
        "`backline speech list --kind stt` shows what pocketsphinx takes"
    )


def test_an_engine_whose_model_is_not_downloaded_says_how_to_get_it(
    ears: dict[str, str], tmp_path: Path
) -> None:
    wav = tmp_path / "x.wav"
    write_wav(wav, [AudioFrame.silence(0.2, 16000)])

    for named in ([], ["--model", "base"]):
        result = run("transcribe", str(wav), "--stt", "ears", *named, env=ears)
        assert error_line(result) == (
            "Error: ears: the model base is not downloaded (3.0 MB): run "
            "`backline speech download ears/base` first"
        )
    unknown = run("transcribe", str(wav), "--stt", "ears", "--model", "huge", env=ears)
    assert error_line(unknown) == (
        "Error: ears: no model 'huge'; check --model: `backline speech list --kind stt` "
        "shows what ears takes"
    )


@needs_engines
def test_unknown_engines_and_bad_files_are_usage_errors(
    env: dict[str, str], tmp_path: Path
) -> None:
    wav = tmp_path / "x.wav"
    unknown = error_line(run("say", "hi", "--tts", "espek", "-o", str(wav), env=env), status=2)
    assert unknown.startswith("Error: Invalid value for '--tts': unknown text-to-speech engine")
    assert unknown.endswith("Did you mean 'espeak'?")

    text = tmp_path / "notes.wav"
    text.write_text("not audio")
    bad = error_line(run("transcribe", str(text), env=env), status=2)
    assert bad.startswith(f"Error: Invalid value for 'FILE.wav': {text} is not a 16-bit PCM WAV")
    missing = error_line(run("transcribe", str(tmp_path / "none.wav"), env=env), status=2)
    assert "does not exist" in missing


def test_no_engine_ready_says_what_to_install(tmp_path: Path) -> None:
    result = run(
        "say", "hi", "-o", str(tmp_path / "x.wav"), env={"BACKLINE_PLUGINS": "anthropic,speech"}
    )

    assert error_line(result) == (
        "Error: no text-to-speech engine is ready on this machine; pip install "
        "backline-local-speech, or name one (backline speech list) with --tts NAME"
    )


# -- the microphone and the speaker ----------------------------------------------------------------
def test_check_without_the_sounddevice_package_says_what_to_install(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # not installed

    line = error_line(run("check", env=env))

    assert line.startswith("Error: the microphone and speaker need the sounddevice package")
    assert "pip install sounddevice" in line and "apt install libportaudio2" in line

    say = error_line(run("say", "hi", env=env))  # no -o: the speaker
    assert say.startswith("Error: the microphone and speaker need the sounddevice package")
    assert say.endswith(", or write a WAV file with -o FILE.wav.")


def test_check_without_portaudio_says_what_to_install(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    try:
        import sounddevice  # noqa: F401
    except OSError:
        pass  # this machine: the package without PortAudio
    except ImportError:
        pytest.skip("the sounddevice package is not installed")
    else:
        pytest.skip("PortAudio is installed here")

    line = error_line(run("check", env=env))

    assert line == (
        "Error: the microphone and speaker need PortAudio (PortAudio library not found): "
        "apt install libportaudio2 (macOS: brew install portaudio)."
    )


def no_devices(device: Any = None, kind: str | None = None) -> Any:
    raise ValueError(f"No {kind} device matching {device!r}")  # sounddevice's own wording


def test_check_without_a_microphone_names_the_option(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", types.SimpleNamespace(query_devices=no_devices))

    default = error_line(run("check", env=env))
    assert default == (
        "Error: no microphone found (No input device matching None): connect one, or choose "
        "one with --input-device (an ID or part of its name; `backline speech devices` "
        "lists them)."
    )
    named = error_line(run("check", "--input-device", "3", env=env))
    assert named.startswith("Error: no microphone '3' found (No input device matching 3)")
    speaker = error_line(run("say", "hi", "--output-device", "usb", env=env))
    assert speaker.startswith("Error: no speaker 'usb' found (No output device matching 'usb')")
    assert "--output-device" in speaker and speaker.endswith(
        "or write a WAV file with -o FILE.wav."
    )


class StandIn(types.SimpleNamespace):
    """A stand-in for ``sounddevice`` with one microphone and one speaker, in place of
    PortAudio: raw streams whose callbacks run on a thread (as PortAudio's do) until
    they raise ``CallbackStop``. The microphone plays ``heard``; the speaker keeps what
    it was given."""

    class CallbackStop(Exception):
        pass

    def __init__(self, heard: AudioFrame) -> None:
        super().__init__()
        self.heard = heard.resample(16000).data
        self.microphone = self.heard + bytes(16000 * 2 * 30)  # then silence
        self.played: list[bytes] = []

    def query_devices(self, device: Any = None, kind: str | None = None) -> dict[str, Any]:
        return {"index": 0, "name": f"test {kind}", "default_samplerate": 16000.0}

    def RawInputStream(self, **options: Any) -> Stream:
        assert options["dtype"] == "int16" and options["channels"] == 1
        return Stream(self, "input", options)

    def RawOutputStream(self, **options: Any) -> Stream:
        assert options["dtype"] == "int16" and options["channels"] == 1
        return Stream(self, "output", options)


class Stream:
    BLOCK = 512  # samples a callback gets

    def __init__(self, sd: StandIn, kind: str, options: dict[str, Any]) -> None:
        self.sd, self.kind, self.options = sd, kind, options
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        block = self.BLOCK * 2
        try:
            for at in range(0, 10**9, block):
                if self.kind == "input":
                    data = self.sd.microphone[at : at + block]
                    self.options["callback"](bytes(data), self.BLOCK, None, None)
                else:
                    out = bytearray(block)
                    try:
                        self.options["callback"](out, self.BLOCK, None, None)
                    finally:
                        self.sd.played.append(bytes(out))
        except self.sd.CallbackStop:
            finished = self.options.get("finished_callback")
            if finished is not None:
                finished()

    def __enter__(self) -> Stream:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.thread.join(5)

    def abort(self) -> None:
        pass


@needs_engines
def test_check_records_plays_back_transcribes_and_speaks(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from backline_local_speech.espeak import EspeakTTS

    async def speak() -> AudioFrame:
        frames = [f async for f in EspeakTTS().synthesize(PHRASE)]
        return AudioFrame(b"".join(f.data for f in frames), frames[0].sample_rate)

    sd = StandIn(asyncio.run(speak()))
    monkeypatch.setitem(sys.modules, "sounddevice", sd)

    result = run("check", "--seconds", "3", env=env)

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == ["microphone: test input", "speaker: test output"]
    assert lines[2].startswith("recorded 3.0 s, peak level ")
    assert lines[3] == f"pocketsphinx heard: {PHRASE}"
    assert lines[4] == "said a sentence with espeak: if you heard it, the speaker works"
    played = b"".join(sd.played)
    assert played.startswith(sd.heard)  # the recording, played back first
    assert len(played) > 2 * 16000 * 6  # then the sentence (3 s + a few seconds of speech)


# -- devices ---------------------------------------------------------------------------------------
# What sounddevice's query_devices() gives (PortAudio's own fields), for a stand-in.
DEVICES = [
    {"index": 0, "name": "HDA Intel PCH: ALC3246 Analog", "hostapi": 0, "max_input_channels": 2,
     "max_output_channels": 2, "default_samplerate": 44100.0},
    {"index": 1, "name": "USB headset", "hostapi": 0, "max_input_channels": 1,
     "max_output_channels": 0, "default_samplerate": 48000.0},
    {"index": 2, "name": "HDMI 0", "hostapi": 0, "max_input_channels": 0,
     "max_output_channels": 8, "default_samplerate": 48000.0},
]  # fmt: skip


def portaudio(devices: list[dict[str, Any]], default_in: int, default_out: int) -> Any:
    """A stand-in for ``sounddevice`` that lists ``devices`` (the defaults by index, -1:
    none), in place of PortAudio."""

    def query_devices(device: Any = None, kind: str | None = None) -> Any:
        if kind is None:
            return devices
        index = default_in if kind == "input" else default_out
        if index < 0:
            no_devices(device, kind)
        return devices[index]

    return types.SimpleNamespace(
        query_devices=query_devices, query_hostapis=lambda api: {"name": "ALSA"}
    )


def test_devices_lists_microphones_and_speakers_with_the_defaults(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", portaudio(DEVICES, 1, 0))

    result = run("devices", env=env)

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "microphones (--input-device ID|NAME):\n"
        "  0 'HDA Intel PCH: ALC3246 Analog' (2 in, 44100 Hz, ALSA)\n"
        "  1 'USB headset' (1 in, 48000 Hz, ALSA; the default)\n"
        "\n"
        "speakers (--output-device ID|NAME):\n"
        "  0 'HDA Intel PCH: ALC3246 Analog' (2 out, 44100 Hz, ALSA; the default)\n"
        "  2 'HDMI 0' (8 out, 48000 Hz, ALSA)\n"
    )
    listed = json.loads(run("devices", "--json", env=env).stdout)
    assert [(d["index"], d["is_default_input"], d["is_default_output"]) for d in listed] == [
        (0, False, True),
        (1, True, False),
        (2, False, False),
    ]
    assert listed[2] == {
        "index": 2,
        "name": "HDMI 0",
        "input_channels": 0,
        "output_channels": 8,
        "default_sample_rate": 48000,
        "host_api": "ALSA",
        "is_default_input": False,
        "is_default_output": False,
    }


def test_devices_without_a_speaker_says_none_and_without_any_is_one_line(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", portaudio(DEVICES[1:2], 0, -1))
    result = run("devices", env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith("\n\nspeakers (--output-device ID|NAME):\n  none\n")

    monkeypatch.setitem(sys.modules, "sounddevice", portaudio([], -1, -1))
    assert error_line(run("devices", env=env)) == (
        "Error: PortAudio sees no microphone or speaker: connect one (is the system's sound "
        "server running?), or give `backline voice` files: --audio-in, --audio-out FILE.wav."
    )


def test_devices_without_portaudio_or_the_package_says_what_to_install(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)  # not installed
    assert error_line(run("devices", env=env)) == (
        "Error: the microphone and speaker need the sounddevice package: pip install "
        "'backline[audio]' (the sounddevice package)"
    )
    monkeypatch.delitem(sys.modules, "sounddevice")
    try:
        import sounddevice  # noqa: F401
    except OSError:
        pass  # this machine: the package without PortAudio
    except ImportError:
        pytest.skip("the sounddevice package is not installed")
    else:
        pytest.skip("PortAudio is installed here")
    assert error_line(run("devices", env=env)) == (
        "Error: the microphone and speaker need the PortAudio library: apt install "
        "libportaudio2 (macOS: brew install portaudio)"
    )
