"""``backline web`` as a command: its options, bad options, and a real process that
talks to a fake Anthropic server and stops cleanly on Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from websockets.asyncio.client import connect

from backline.testing import fake_anthropic as fa

from .cli_app import web
from .conftest import TIMEOUT, Client

APP = Path(__file__).with_name("cli_app.py")
ROOT = APP.parents[2]


def test_help_lists_the_web_and_session_options() -> None:
    result = CliRunner().invoke(web, ["--help"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--open", "--token", "--max-tabs", "--background"):
        assert option in result.output
    assert "--instructions" in result.output and "--agent" in result.output


def test_bad_options_fail_before_the_server_starts() -> None:
    result = CliRunner().invoke(
        web, ["--background", "no-such-background"], env={"BACKLINE_DISABLE_PLUGINS": "claude_code"}
    )
    assert result.exit_code == 2
    assert "no-such-background" in result.output
    assert "open http" not in result.output


@pytest.mark.timeout(60)
async def test_backline_web_talks_and_stops_on_ctrl_c() -> None:
    with fa.FakeAnthropicServer([fa.text("Hello from the fake model.")]) as model:
        env = {
            **os.environ,
            "ANTHROPIC_BASE_URL": model.url,
            "ANTHROPIC_API_KEY": "test-key",
            "BACKLINE_DISABLE_PLUGINS": "claude_code",
            "PYTHONPATH": str(ROOT),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(APP),
            "--instructions",
            "Be brief.",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            url = ""
            async with asyncio.timeout(TIMEOUT * 2):
                while not url:
                    line = (await proc.stdout.readline()).decode()
                    assert line, "the server exited before printing its URL"
                    if match := re.search(r"open (http://\S+)", line):
                        url = match.group(1)
            ws_url = url.replace("http://", "ws://").replace("/?token=", "/ws?token=")
            async with connect(ws_url, open_timeout=TIMEOUT) as ws:
                client = Client(ws)
                await client.expect("hello")
                await client.send(type="user_turn", text="hi")
                segment, spoken = await client.segment()
                assert spoken == "Hello from the fake model."
                await client.send(type="playout", segment=segment, text=spoken, interrupted=False)
                agent = await client.expect("transcript", lambda m: m["kind"] == "agent")
                assert agent["text"] == spoken
            assert json.dumps(model.requests[0].messages).count("hi") >= 1
            proc.send_signal(signal.SIGINT)
            async with asyncio.timeout(TIMEOUT * 2):
                out, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()
            assert "closing" in out.decode()
            assert "Traceback" not in err.decode()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
