"""`backline console --llm openai` and `backline speech ... openai` as a user runs them:
the installed command, the plugin found through its entry point, `--base-url` exported
to OPENAI_BASE_URL, OPENAI_AUDIO_BASE_URL for the speech engines."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from backline_openai.stt import wav_bytes

from backline.speech import AudioFrame, read_wav, write_wav
from tests.plugins.openai import fake_audio as fa
from tests.plugins.openai import fake_openai as fo
from tests.plugins.openai.fake_audio import FakeAudioServer
from tests.plugins.openai.fake_openai import FakeOpenAIServer

BACKLINE = shutil.which("backline", path=str(Path(sys.executable).parent)) or "backline"


def cli_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "BACKLINE_", "GROQ_", "ANTHROPIC_"))
    }
    return {**env, "BACKLINE_PLUGINS": "openai,anthropic", **extra}


@pytest.mark.timeout(60)
def test_backline_console_with_llm_openai_and_base_url(openai_server: FakeOpenAIServer) -> None:
    openai_server.push(fo.text("Hello from the fake endpoint."))
    child = pexpect.spawn(
        BACKLINE,
        [
            "console",
            "--plain",
            "--llm",
            "openai",
            "-m",
            "llama3.2",
            "--base-url",
            openai_server.url,
        ],
        env=cli_env(),
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect("backline console")
        child.sendline("hello")
        child.expect("agent: Hello from the fake endpoint.")
        child.sendline("/quit")
        child.expect("bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    (request,) = openai_server.requests
    assert request.body["model"] == "llama3.2"
    assert request.messages[-1] == {"role": "user", "content": "hello"}
    assert request.api_key == "unused"  # a loopback endpoint needs no key


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BACKLINE, *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_hosted_endpoint_without_its_key_says_what_to_do() -> None:
    out = run(
        "console",
        "--plain",
        "--llm",
        "openai",
        "-m",
        "llama-3.3-70b-versatile",
        "--base-url",
        "https://api.groq.com/openai/v1",
        env=cli_env(),
    )
    assert out.returncode == 1
    assert "GROQ_API_KEY is not set" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_local_endpoint_without_a_model_says_what_to_do() -> None:
    out = run(
        "console",
        "--plain",
        "--llm",
        "openai",
        env=cli_env(OPENAI_BASE_URL="http://localhost:11434/v1"),
    )
    assert out.returncode == 1
    assert "no model named for http://localhost:11434/v1: pass -m MODEL" in out.stderr


def test_the_plugin_is_listed_with_its_llm_and_option() -> None:
    out = run("plugins", "--json", env=cli_env())
    assert out.returncode == 0, out.stderr
    (info,) = [p for p in json.loads(out.stdout) if p["name"] == "openai"]
    assert info["distribution"] == "backline-openai"
    assert (info["llms"], info["options"], info["status"]) == (
        ["openai", "openai-realtime"],
        ["--base-url", "--realtime-voice"],
        "loaded",
    )
    help_ = run("console", "--help", env=cli_env())
    assert "--base-url URL" in help_.stdout


def test_backline_speech_say_and_transcribe_with_the_openai_engines(
    audio_server: FakeAudioServer, tmp_path: Path
) -> None:
    """The engines as a user runs them: `backline speech say --tts openai` writes what the
    server streamed, `backline speech transcribe --stt openai` prints what it heard."""
    audio = AudioFrame.from_samples((int(9000 * math.sin(i / 7)) for i in range(12000)), 24000)
    wav = wav_bytes(audio)  # a server of your own is asked for WAV
    audio_server.push(fa.Speech([wav[:1001], wav[1001:]]), fa.Transcript("hello"))
    env = cli_env(OPENAI_AUDIO_BASE_URL=audio_server.url)
    out_wav = tmp_path / "hello.wav"

    said = run("speech", "say", "Hello there.", "--tts", "openai", "-o", str(out_wav), env=env)
    heard = run("speech", "transcribe", str(out_wav), "--stt", "openai", "--language=en", env=env)

    assert said.returncode == 0, said.stderr
    assert read_wav(out_wav).data == audio.data
    assert heard.returncode == 0, heard.stderr
    assert heard.stdout.strip() == "hello"
    speech, transcription = audio_server.requests
    assert speech.json["input"] == "Hello there."
    assert (speech.json["model"], speech.json["response_format"]) == ("tts-1", "wav")
    assert transcription.fields["language"] == "en"
    assert transcription.wav is not None and transcription.wav.sample_rate == 16000


def test_backline_speech_transcribe_says_why_it_failed(
    audio_server: FakeAudioServer, tmp_path: Path
) -> None:
    audio_server.push(fo.error(401))
    recording = tmp_path / "q.wav"
    write_wav(recording, [AudioFrame.silence(0.5, 16000)])
    env = cli_env(OPENAI_AUDIO_BASE_URL=audio_server.url, OPENAI_API_KEY="sk-wrong")
    out = run("speech", "transcribe", str(recording), "--stt", "openai", env=env)
    assert out.returncode == 1
    assert "transcription error 401: the API key was rejected by" in out.stderr
    assert "sk-wrong" not in out.stderr
