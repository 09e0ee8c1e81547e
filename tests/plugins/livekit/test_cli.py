"""``backline livekit ...``: every check that runs before LiveKit starts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner, Result

from backline.cli import make_cli


def run(*args: str, **env: str) -> Result:
    """``backline livekit ARGS`` in this process, with only these plugins and variables."""
    clean: dict[str, str | None] = {
        k: None for k in os.environ if k.startswith(("LIVEKIT_", "BACKLINE_"))
    }
    clean.update({"ANTHROPIC_API_KEY": "test-key", "BACKLINE_PLUGINS": "livekit,anthropic"})
    clean.update(env)
    return CliRunner().invoke(make_cli(), ["livekit", *args], env=clean)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket closes


@pytest.mark.parametrize("command", ["dev", "start"])
def test_a_worker_without_credentials_says_which_are_missing(command: str) -> None:
    result = run(command)
    assert result.exit_code == 1
    assert "no LiveKit credentials" in result.output
    assert "LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET not set" in result.output


def test_an_unreachable_server_is_a_clear_error() -> None:
    url = f"ws://127.0.0.1:{closed_port()}"
    result = run("start", LIVEKIT_URL=url, LIVEKIT_API_KEY="k", LIVEKIT_API_SECRET="s")
    assert result.exit_code == 1
    assert f"cannot reach the LiveKit server at {url}" in result.output


def test_an_unknown_stt_or_tts_names_what_to_install() -> None:
    with socket.socket() as server:  # a server that accepts, so only the name is wrong
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"ws://127.0.0.1:{server.getsockname()[1]}"
        creds = {"LIVEKIT_URL": url, "LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "s"}
        result = run("start", "--stt", "nosuch", **creds)
        assert result.exit_code == 2
        assert "unknown STT 'nosuch'" in result.output
        assert "pip install livekit-plugins-nosuch" in result.output
        result = run("dev", "--tts", "acme/voice-1", **creds)
        assert result.exit_code == 2
        assert "LiveKit Inference has no provider 'acme'" in result.output


def test_the_session_options_are_checked_as_backline_console_does() -> None:
    result = run("console", "--background", "nope")
    assert result.exit_code == 2 and "nope" in result.output
    result = run("console", ANTHROPIC_API_KEY="")
    assert result.exit_code == 1 and "ANTHROPIC_API_KEY is not set" in result.output


def test_other_commands_never_import_livekit() -> None:
    code = (
        "import sys\n"
        "import backline\n"
        "from backline.cli import make_cli\n"
        "for args in (['plugins'], ['livekit', '--help'], ['livekit', 'start', '--help']):\n"
        "    try:\n"
        "        make_cli().main(args, prog_name='backline')\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m == 'livekit' or m.startswith('livekit.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"
