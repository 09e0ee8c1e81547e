"""``backline web --speech`` as a command (issue 27): engines chosen before anything starts
(a wrong one is a usage error naming its option), said at start, recorded in the
conversation log; ``auto`` without a ready engine falls back to the browser's speech."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from websockets.asyncio.client import connect

from backline.app import SpeechOptions
from backline.io.web import SUBPROTOCOL, choose_web_speech
from backline.plugins import PluginManager
from backline.testing import fake_anthropic as fa

from .cli_app import web
from .conftest import TIMEOUT, Client
from .speech_scenario import require_engines

APP = Path(__file__).with_name("cli_app.py")
ROOT = APP.parents[2]
NO_CLAUDE = {"BACKLINE_DISABLE_PLUGINS": "claude_code"}


def test_help_shows_the_speech_options() -> None:
    result = CliRunner().invoke(web, ["--help"])
    assert result.exit_code == 0
    for option in ("--speech [auto|server|browser]", "--stt NAME", "--tts NAME", "--vad NAME"):
        assert option in result.output


def test_speech_engines_with_the_browsers_speech_are_a_usage_error() -> None:
    result = CliRunner().invoke(
        web, ["--speech", "browser", "--stt", "pocketsphinx"], env=NO_CLAUDE
    )
    assert result.exit_code == 2
    assert "--stt: the server's speech engines are not used with --speech browser" in (
        result.output
    )


def test_an_engine_that_cannot_be_had_stops_the_server_speech_before_it_starts() -> None:
    result = CliRunner().invoke(
        web, ["--speech", "server", "--stt", "no-such-engine"], env=NO_CLAUDE
    )
    assert result.exit_code == 2
    assert "'--stt'" in result.output and "no-such-engine" in result.output
    assert "open http" not in result.output
    result = CliRunner().invoke(web, ["--stt", "no-such-engine"], env=NO_CLAUDE)  # auto
    assert result.exit_code == 2, "an engine the user named must be had in auto too"


def test_auto_without_a_ready_engine_uses_the_browsers_speech_and_says_why() -> None:
    bare = PluginManager(entry_points=False).load()  # the built-in energy detector only
    speech = choose_web_speech(bare, "auto", SpeechOptions())
    assert not speech.ready and not speech.server_for("server")
    assert speech.unavailable is not None and "--stt" in speech.unavailable
    line = speech.start_line()
    assert line.startswith("speech: the browser's own; the server has none (")
    with pytest.raises(click.UsageError, match="--stt"):
        choose_web_speech(bare, "server", SpeechOptions())


@pytest.mark.timeout(60)
async def test_backline_web_speech_server_says_its_engines_speaks_and_logs_them(
    tmp_path: Path,
) -> None:
    require_engines()
    with fa.FakeAnthropicServer([fa.text("Hello from the fake model.")]) as model:
        env = {
            **os.environ,
            **NO_CLAUDE,
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "test-key",
            "PYTHONPATH": str(ROOT),
            "XDG_DATA_HOME": str(tmp_path),
            "BACKLINE_LOG": "1",
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(APP),
            *("--speech", "server", "--stt", "pocketsphinx", "--tts", "espeak"),
            *("--vad", "energy", "--instructions", "Be brief."),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            lines: list[str] = []
            url = ""
            async with asyncio.timeout(TIMEOUT * 2):
                while not url:
                    line = (await proc.stdout.readline()).decode()
                    assert line, "the server exited before printing its URL"
                    lines.append(line)
                    if match := re.search(r"open (http://\S+)", line):
                        url = match.group(1)
            said = "".join(lines)
            assert re.search(
                r"backline web: speech: listening with pocketsphinx \(.*\), speaking with "
                r"espeak \(.*\), voice activity by energy \(--speech server: in every browser\)",
                said,
            ), said
            ws_url = url.replace("http://", "ws://").replace("/?token=", "/ws?token=")
            async with connect(
                ws_url,
                subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
                open_timeout=TIMEOUT,
                max_queue=None,
            ) as ws:
                client = Client(ws)
                hello = await client.expect("hello")
                assert hello["speech"]["by"] == "server"  # every page, with --speech server
                await client.send(type="user_turn", text="hi")
                start = await client.expect("audio_start")
                end = await client.expect("audio_end")
                seconds = client.audio_seconds(start["sample_rate"])
                assert seconds > 0.5  # "Hello from the fake model." said by eSpeak NG
                await client.send(
                    type="audio_played", stream=end["stream"], seconds=seconds, done=True
                )
                agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
                assert agent["text"] == "Hello from the fake model." and not agent["interrupted"]
            proc.send_signal(signal.SIGINT)
            async with asyncio.timeout(TIMEOUT * 2):
                _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            assert "Traceback" not in err.decode()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    with sqlite3.connect(tmp_path / "backline" / "conversations.db") as db:
        [(front_end, options)] = db.execute("SELECT front_end, options FROM sessions").fetchall()
    assert front_end == "web"
    recorded = json.loads(options)
    assert {k: recorded[k] for k in ("speech", "stt", "tts", "vad")} == {
        "speech": "server",
        "stt": "pocketsphinx",
        "tts": "espeak",
        "vad": "energy",
    }
