"""The front ends host the voice channel while they run (``backline web`` here; the console
in the cli_agent end-to-end test)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.mcp.conftest import WAIT


def announcements_in(directory: Path) -> list[Path]:
    return list(directory.glob("mcp-*.json"))


@pytest.mark.timeout(90)
async def test_backline_web_serves_and_announces_the_endpoint_until_ctrl_c(
    runtime_dir: Path,
) -> None:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": "test-key",
        "BACKLINE_DISABLE_PLUGINS": "claude_code",
        "BACKLINE_RUNTIME_DIR": str(runtime_dir),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "backline",
        "web",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(WAIT * 2):
            while True:
                line = (await proc.stdout.readline()).decode()
                assert line, "the server exited before its MCP endpoint was up"
                if "coding agents can talk to you over MCP" in line:
                    break
        (path,) = announcements_in(runtime_dir)
        data = json.loads(path.read_text())
        assert data["pid"] == proc.pid and data["front_end"] == "backline web"
        async with httpx.AsyncClient() as http:
            response = await http.post(f"{data['url']}/mcp/agent", json={})
        assert response.status_code == 401

        proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(WAIT * 2):
            _, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert not path.exists()
        assert "Traceback" not in err.decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
