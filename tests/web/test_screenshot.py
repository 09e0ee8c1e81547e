"""docs/web.png can be made again: the real `backline web` with the real Claude Code
plugin and CLI, models scripted, the page in Chromium (tests/web/make_screenshot.py)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from tests.plugins.claude_code.conftest import requires_cli

from .browser import find_chromium
from .make_screenshot import SIZE, make_screenshot

CHROMIUM = find_chromium()
pytestmark = [
    requires_cli,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium found (apt-get install chromium)"),
    pytest.mark.skipif(shutil.which("python3") is None, reason="Claude Code runs python3 tests"),
    pytest.mark.timeout(180),
]


async def test_the_screenshot_script_makes_the_picture(tmp_path: Path) -> None:
    pytest.importorskip("playwright", reason="the playwright package is not installed")
    assert CHROMIUM is not None
    out = tmp_path / "web.png"
    await make_screenshot(out, CHROMIUM)  # raises if the conversation went otherwise
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert (width, height) == (SIZE["width"], SIZE["height"])
