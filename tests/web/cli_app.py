"""``backline web`` as the CLI builds it (a front end of ``backline.app``), for the process
test (run as a script)."""

from __future__ import annotations

from backline.io.web import build_web_command

web = build_web_command()

if __name__ == "__main__":
    web.main(prog_name="backline web")
