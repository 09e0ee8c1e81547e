"""The page is sent a bounded preview of a background's state, not the whole value
(issue 13 item 7)."""

from __future__ import annotations

import json
from typing import Any

from backline import Limits

from .scenario import Controls


async def test_a_huge_state_reaches_the_page_as_a_bounded_preview(
    open_client: Any, controls: Controls
) -> None:
    async with open_client() as client:
        await client.expect("background_state")
        ctx = await controls.context()
        page_chars = Limits().max_page_state_chars
        ctx.set_state({"status": "indexing", "files": [f"src/f{i}.py" for i in range(1_000_000)]})
        message = await client.expect("background_state")
        state = message["state"]
        assert state["status"] == "indexing"
        assert state["files"][:2] == ["src/f0.py", "src/f1.py"]
        assert state["files"][-1].startswith("[... truncated: ")
        assert len(json.dumps(state)) < page_chars + 500
        assert message["summary"].startswith("indexing")
