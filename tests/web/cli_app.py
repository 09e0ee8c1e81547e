"""``backline web`` wired as the CLI wires it, for the process test (run as a script)."""

from __future__ import annotations

from backline.cli import build_session, plugin_manager, session_options
from backline.io.web import build_web_command

web = build_web_command(session_options, lambda options: build_session(plugin_manager(), options))

if __name__ == "__main__":
    web.main(prog_name="backline web")
