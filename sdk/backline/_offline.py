"""``backline fake-anthropic SCRIPT``: try the console and the web page with no API key.

Starts the shipped ``FakeAnthropicServer`` on 127.0.0.1, answering from a script file
the user writes (a Python file defining ``respond(request)``, or a ``SCRIPT`` list),
and prints the environment that points ``backline console``, ``backline web`` and the
Claude Code CLI at it. Claude Code's side requests (titles, quota checks) are answered
by the server itself, so a script sees only the conversation.
"""

from __future__ import annotations

import os
import runpy
import shlex
import tempfile
import threading
from pathlib import Path
from typing import Any

import click

EXAMPLE = "examples/offline/script.py"


def load_script(path: Path) -> Any:
    """The responder a script file defines: ``respond`` (a callable) or ``SCRIPT`` (a list)."""
    try:
        namespace = runpy.run_path(str(path), run_name="backline_fake_script")
    except FileNotFoundError:
        raise click.BadParameter(f"no such file: {path}", param_hint="'SCRIPT'") from None
    except Exception as e:
        raise click.ClickException(f"{path} failed to load: {type(e).__name__}: {e}") from None
    if callable(namespace.get("respond")):
        return namespace["respond"]
    if isinstance(namespace.get("SCRIPT"), list):
        return namespace["SCRIPT"]
    raise click.ClickException(
        f"{path} defines neither respond(request) nor a SCRIPT list: see {EXAMPLE}"
    )


def environment(url: str, config_dir: Path) -> tuple[dict[str, str], list[str]]:
    """What to export (and unset) so backline and Claude Code use the fake server."""
    from .testing.fake_anthropic import CLAUDE_CODE_CLEARED_ENV

    export = {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key",
        "ENABLE_TOOL_SEARCH": "false",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CONFIG_DIR": str(config_dir),  # Claude Code never reads your own config
        "NO_PROXY": "127.0.0.1,localhost",
    }
    unset = sorted(set(CLAUDE_CODE_CLEARED_ENV) - set(export))
    return export, unset


def shell_lines(export: dict[str, str], unset: list[str]) -> str:
    lines = [f"export {k}={shlex.quote(v)}" for k, v in export.items()]
    lines += [f"unset {' '.join(unset)}"] if unset else []
    return "\n".join(lines) + "\n"


def _side_request(request: Any) -> bool:
    """Claude Code's helpers (titles, quota checks), answered by the server itself.

    Unlike ``claude_code_side_request``, a request without tools is not one: the
    voice agent relays background updates with its tools off.
    """
    if not request.is_messages or request.output_format is not None:
        return True
    return request.max_tokens is not None and request.max_tokens <= 1


def _describe(request: Any) -> str:
    said = " ".join((request.last_user_text or "").split())
    return said if len(said) <= 70 else said[:69] + "…"


@click.command("fake-anthropic")
@click.argument("script", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port (0: any free one).")
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the export lines here (then `source FILE` in the other terminal).",
)
def fake_anthropic(script: Path, port: int, env_file: Path | None) -> None:
    """Serve a scripted Anthropic API on 127.0.0.1 to try backline with no key.

    SCRIPT is a Python file that defines respond(request) returning a reply
    (text, tool calls, an error) or a SCRIPT list of replies; see
    examples/offline/script.py and docs/fake-anthropic.md. The command prints the
    environment to export in another terminal, then serves until Ctrl-C.
    """
    from .testing.fake_anthropic import FakeAnthropicServer

    responder = load_script(script)
    served = threading.Event()

    def logged(request: Any) -> Any:
        if callable(responder):
            answer = responder(request)
        elif responder:
            answer = responder.pop(0)
        else:
            answer = None
        click.echo(f"  request #{request.index}: {_describe(request)!r}", err=True)
        served.set()
        return answer if answer is not None else "(the script has no more replies)"

    with tempfile.TemporaryDirectory(prefix="backline-fake-claude-") as config:
        server = FakeAnthropicServer(logged, side=_side_request, port=port)
        try:
            server.start()
        except OSError as e:
            raise click.ClickException(f"cannot listen on port {port}: {e}") from None
        export, unset = environment(server.url, Path(config))
        lines = shell_lines(export, unset)
        if env_file is not None:
            env_file.write_text(lines)
            os.chmod(env_file, 0o600)
        click.echo(f"A fake Anthropic API answers from {script} on {server.url}.")
        click.echo("In another terminal, export this, then run backline console or web:\n")
        click.echo(lines)
        click.echo("Ctrl-C stops it.", err=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
