"""`backline console --llm openai-realtime` as a user runs it: the plugin found through
its entry point, `--base-url` to the Realtime server (on loopback, in a thread)."""

from __future__ import annotations

import pexpect
import pytest

from tests.plugins.openai import fake_realtime as fr
from tests.plugins.openai.fake_realtime import ThreadedRealtimeServer
from tests.plugins.openai.test_cli import BACKLINE, cli_env


@pytest.mark.timeout(60)
def test_backline_console_with_llm_openai_realtime() -> None:
    with ThreadedRealtimeServer() as server:
        server.push(fr.text("Hello from the realtime model."), fr.text("Still here."))
        child = pexpect.spawn(
            BACKLINE,
            ["console", "--plain", "--llm", "openai-realtime", "--base-url", server.url],
            env=cli_env(),
            encoding="utf-8",
            timeout=30,
        )
        try:
            child.expect("backline console")
            child.sendline("hello")
            child.expect("agent: Hello from the realtime model.")
            child.sendline("and now?")
            child.expect("agent: Still here.")
            child.sendline("/quit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert child.exitstatus == 0
        assert server.connections == 1  # one session for the whole conversation
        assert server.errors == []
        users = [
            e["item"]["content"][0]["text"]
            for e in server.sent("conversation.item.create")
            if e["item"].get("role") == "user"
        ]
        assert users == ["hello", "and now?"]  # each sent once
        (update,) = server.sent("session.update")
        assert update["session"]["output_modalities"] == ["text"]
