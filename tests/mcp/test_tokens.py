"""A wrong token: the agent's side says so and where the right one is, the front end tells
the user once, and ``backline mcp status`` checks it."""

from __future__ import annotations

import asyncio
import io
import json
import os
from pathlib import Path
from typing import Any

import httpx2 as httpx
from click.testing import CliRunner

from backline import Agent, BackgroundContext, Session, background
from backline.cli import make_cli
from backline.io.console import run_console
from backline.mcp import Hosting, TokenRefused, hosted_voice_channel
from backline.testing import BackgroundDriver, ScriptedLLM
from tests.mcp.conftest import WAIT, text_of
from tests.mcp.test_proxy import proxy

WRONG = {"Authorization": "Bearer not-the-token"}


async def refused_twice(url: str) -> None:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        for headers in (WRONG, {}):
            response = await http.post(url, json={}, headers=headers)
            assert response.status_code == 401


async def test_each_conversation_is_told_once_that_an_agent_was_refused(
    hosting: Hosting, driver: BackgroundDriver
) -> None:
    errors: list[Any] = []
    driver.session.on("error", errors.append)
    endpoint = await hosting.endpoint(driver.session.background.context("agent"))  # type: ignore[union-attr]

    await refused_twice(endpoint.url)

    (told,) = errors
    assert isinstance(told.error, TokenRefused)
    assert told.recoverable and told.source == "mcp"
    assert "backline mcp config -b NAME" in str(told.error)
    assert (await hosting.host()).refused == 2


@background("watched", description="Shows a state as soon as it runs.")
async def watched(ctx: BackgroundContext) -> None:
    ctx.set_state({"status": "ready"})
    await asyncio.Event().wait()


class Screen(io.StringIO):
    """The console's stdout, with a way to wait for text to appear."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def write(self, text: str) -> int:
        self.changed.set()
        return super().write(text)

    async def shows(self, text: str) -> None:
        async with asyncio.timeout(WAIT):
            while text not in self.getvalue():
                self.changed.clear()
                await self.changed.wait()


async def test_the_console_prints_a_refused_agent_once() -> None:
    session: Session[Any] = Session(ScriptedLLM(), background=[watched])
    screen = Screen()
    reader, writer = os.pipe()
    async with hosted_voice_channel(announce="backline console") as hosting:
        host = await hosting.host()
        with os.fdopen(reader, "r") as stdin:
            console = asyncio.ensure_future(
                run_console(session, Agent("Be brief."), rich=False, stdin=stdin, stdout=screen)
            )
            try:
                await screen.shows("[watched] ready")
                await refused_twice(host.endpoint("watched"))
                await screen.shows("without the right token")
                os.write(writer, b"/quit\n")
                await asyncio.wait_for(console, WAIT)
            finally:
                os.close(writer)
                console.cancel()
                await asyncio.gather(console, return_exceptions=True)

    assert screen.getvalue().count("An agent tried to connect over MCP") == 1


async def test_the_proxy_says_the_token_was_refused_and_where_the_right_one_is(
    runtime_dir: Path, driver: BackgroundDriver
) -> None:
    ctx = driver.session.background.context("agent")  # type: ignore[union-attr]
    async with hosted_voice_channel() as hosting:
        endpoint = await hosting.endpoint(ctx)
        env = {"BACKLINE_MCP_URL": endpoint.url, "BACKLINE_MCP_TOKEN": "stale-token"}
        async with proxy(runtime_dir, **env) as (client, errors):
            result = await client.call_tool("send_to_user", {"message": "Done."})
            errors.seek(0)
            stderr = errors.read()

    text = text_of(result)
    assert result.is_error
    assert "refused the token in BACKLINE_MCP_TOKEN (401 Unauthorized)" in text
    assert "unset both" in text and "backline mcp config --http" in text
    assert "did not answer" not in text and "may have stopped" not in text
    assert "refused the token in BACKLINE_MCP_TOKEN" in stderr  # said at start too


def run_cli(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(make_cli(), list(args), env=env, catch_exceptions=False)


async def test_status_checks_each_token(runtime_dir: Path, driver: BackgroundDriver) -> None:
    ctx = driver.session.background.context("agent")  # type: ignore[union-attr]
    async with hosted_voice_channel(announce="backline console") as hosting:
        endpoint = await hosting.endpoint(ctx)
        good = await asyncio.to_thread(run_cli, "mcp", "status")
        wrong = {"BACKLINE_MCP_URL": endpoint.url, "BACKLINE_MCP_TOKEN": "stale-token"}
        bad = await asyncio.to_thread(run_cli, "mcp", "status", env=wrong)
        # Another live process's announcement, the newest (the one `mcp serve` would use),
        # with a token this endpoint refuses.
        forged = runtime_dir / f"mcp-{os.getppid()}.json"
        base = endpoint.url.split("/mcp/")[0]
        forged.write_text(json.dumps({"url": base, "token": "forged", "pid": os.getppid()}))
        forged.chmod(0o600)
        os.utime(forged, (1e10, 1e10))
        try:
            refused = await asyncio.to_thread(run_cli, "mcp", "status")
        finally:
            forged.unlink()

    assert good.exit_code == 0, good.output
    assert "token (from" in good.output and "accepted; serving agent" in good.output
    assert bad.exit_code == 1
    assert "the token in BACKLINE_MCP_TOKEN: REFUSED (401 Unauthorized)" in bad.output
    assert "accepted; serving agent" in bad.output  # the announced front end's own token
    assert refused.exit_code == 1, refused.output
    assert "(used by `backline mcp serve`)\n  its token (from" in refused.output
    assert "REFUSED (401 Unauthorized), agents using it cannot connect" in refused.output
