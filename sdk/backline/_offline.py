"""``backline try`` and ``backline fake-anthropic``: try backline with no API key.

Both start the shipped ``FakeAnthropicServer`` on 127.0.0.1, answering from a script:
``backline try [BACKGROUND]`` then runs ``backline console`` against it in this
terminal, in a scratch folder; ``backline fake-anthropic [SCRIPT]`` prints the
environment to export in another terminal (for ``backline console``, ``backline web``
or anything that talks to Anthropic) and serves until stopped. Claude Code's side
requests (titles, quota checks) are answered by the server itself, so a script sees
only the conversation.

A script is a Python file (``respond(request)`` or a ``SCRIPT`` list of replies; it may
add ``ENVIRONMENT``, variables to set, and ``HINT``, what to type), or one shipped in a
package, by name: ``generic`` (``backline.testing.offline``: it drives any background
through its tools) and every script a plugin ships under the entry-point group
``backline.offline_scripts``, named after the background it drives. Whatever ends the
command (Ctrl-C, SIGTERM, SIGHUP), its temporary folders are removed.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import runpy
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import click

EXAMPLE = "examples/offline/script.py"
ENTRY_POINT_GROUP = "backline.offline_scripts"
"""Where plugins ship their scripts: ``BACKGROUND = "package.module"`` (see docs)."""
GENERIC = "generic"
GENERIC_MODULE = "backline.testing.offline"
_STOP_SECONDS = 10.0  # how long a stopped console gets to exit before it is killed


@dataclass(frozen=True)
class Script:
    """A loaded script: where it came from and what it defines."""

    name: str
    origin: str
    responder: Any  # a callable ``request -> reply``, or a list of replies
    environment: Mapping[str, str] = field(default_factory=dict)
    hint: str = ""

    @property
    def described(self) -> str:
        return self.origin if self.name == self.origin else f"the {self.name} script"


def available_scripts() -> dict[str, str]:
    """The shipped scripts by name: ``generic`` and the plugins' (name -> module)."""
    found = {GENERIC: GENERIC_MODULE}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep.value)
    return found


def load_script(spec: str | Path) -> Script:
    """The script ``spec`` names: a file (ends in ``.py`` or has a ``/``), else a shipped
    script's name. Raises ``click`` errors that say what to do."""
    text = str(spec)
    if text.endswith(".py") or os.sep in text or "/" in text:
        return _from_file(Path(text))
    known = available_scripts()
    if text not in known:
        raise click.BadParameter(
            f"no script named {text!r}. Shipped scripts: {', '.join(sorted(known))}; "
            f"a script file ends in .py (see {EXAMPLE}).",
            param_hint="'SCRIPT'",
        )
    try:
        if text == GENERIC:
            loaded: Any = importlib.import_module(GENERIC_MODULE)
        else:
            ep = next(e for e in entry_points(group=ENTRY_POINT_GROUP) if e.name == text)
            loaded = ep.load()
    except Exception as e:
        raise click.ClickException(
            f"the {text} script ({known[text]}) failed to load: {type(e).__name__}: {e}"
        ) from None
    namespace = vars(loaded) if isinstance(loaded, ModuleType) else {"respond": loaded}
    return _script(text, known[text], namespace)


def _from_file(path: Path) -> Script:
    try:
        namespace = runpy.run_path(str(path), run_name="backline_fake_script")
    except FileNotFoundError:
        raise click.BadParameter(f"no such file: {path}", param_hint="'SCRIPT'") from None
    except Exception as e:
        raise click.ClickException(f"{path} failed to load: {type(e).__name__}: {e}") from None
    return _script(str(path), str(path), namespace)


def _script(name: str, origin: str, namespace: Mapping[str, Any]) -> Script:
    responder = namespace.get("respond")
    if not callable(responder):
        responder = namespace.get("SCRIPT")
        if not isinstance(responder, list):
            raise click.ClickException(
                f"{origin} defines neither respond(request) nor a SCRIPT list: see {EXAMPLE}"
            )
    environment = namespace.get("ENVIRONMENT", {})
    if not isinstance(environment, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        raise click.ClickException(f"{origin}: ENVIRONMENT must map variable names to strings")
    hint = namespace.get("HINT", "")
    return Script(name, origin, responder, dict(environment), hint if isinstance(hint, str) else "")


def environment(url: str, config_dir: Path) -> tuple[dict[str, str], list[str]]:
    """What to export (and unset) so backline and Claude Code use the fake server."""
    from .testing.fake_anthropic import CLAUDE_CODE_CLEARED_ENV

    export = {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-fake-key",
        "BACKLINE_LLM": "anthropic",  # the voice agent's model is the fake server's
        "ENABLE_TOOL_SEARCH": "false",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CONFIG_DIR": str(config_dir),  # Claude Code never reads your own config
        "NO_PROXY": "127.0.0.1,localhost",
    }
    unset = sorted(set(CLAUDE_CODE_CLEARED_ENV) - set(export))
    return export, unset


def shell_lines(export: Mapping[str, str], unset: list[str]) -> str:
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


def _responder(script: Script, log: bool) -> Callable[[Any], Any]:
    replies = None if callable(script.responder) else list(script.responder)

    def respond(request: Any) -> Any:
        if replies is None:
            answer = script.responder(request)
        else:
            answer = replies.pop(0) if replies else None
        if log:
            click.echo(f"  request #{request.index}: {_describe(request)!r}", err=True)
        return answer if answer is not None else "(the script has no more replies)"

    return respond


class _Stopped(SystemExit):
    """SIGTERM or SIGHUP: unwinds like ``sys.exit`` (every ``finally`` and ``with`` runs)."""


@contextlib.contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into ``_Stopped`` (exit status 128 + the signal), once:
    a second signal during the clean-up is ignored so the clean-up completes."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set in the main thread
        return
    caught = (signal.SIGTERM, signal.SIGHUP)

    def stop(signum: int, _frame: FrameType | None) -> None:
        for sig in caught:
            signal.signal(sig, signal.SIG_IGN)
        raise _Stopped(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in caught}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _serving(script: Script, *, port: int, prefix: str, log: bool) -> Iterator[tuple[str, Path]]:
    """The fake server running from ``script`` and a temporary folder; yields the
    server's URL and the folder. Both go away at the end, whatever ends it."""
    from .testing.fake_anthropic import FakeAnthropicServer

    with _stopped_by_signals(), tempfile.TemporaryDirectory(prefix=prefix) as folder:
        server = FakeAnthropicServer(_responder(script, log), side=_side_request, port=port)
        try:
            server.start()
        except OSError as e:
            raise click.ClickException(f"cannot listen on port {port}: {e}") from None
        try:
            yield server.url, Path(folder)
        finally:
            server.stop()


# -- backline fake-anthropic ----------------------------------------------------------------


@click.command("fake-anthropic")
@click.argument("script", default=GENERIC, metavar="[SCRIPT]")
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="Port (0: any free one).")
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the export lines here (then `source FILE` in the other terminal).",
)
def fake_anthropic(script: str, port: int, env_file: Path | None) -> None:
    """Serve a scripted Anthropic API on 127.0.0.1 to try backline with no key.

    SCRIPT is the name of a shipped script (default: generic, which drives any
    background session through its tools; plugins ship their own, named after their
    background, e.g. claude_code) or a Python file that defines respond(request) or a
    SCRIPT list of replies (see examples/offline/script.py and docs/fake-anthropic.md).
    The command prints the environment to export in another terminal, then serves
    until Ctrl-C. `backline try` does both in one terminal.
    """
    loaded = load_script(script)
    with _serving(loaded, port=port, prefix="backline-fake-claude-", log=True) as (url, folder):
        export, unset = environment(url, folder)
        export.update(loaded.environment)
        lines = shell_lines(export, unset)
        if env_file is not None:
            env_file.write_text(lines)
            os.chmod(env_file, 0o600)
        click.echo(f"A fake Anthropic API answers from {loaded.described} on {url}.")
        click.echo("In another terminal, export this, then run backline console or web:\n")
        click.echo(lines)
        if loaded.hint:
            click.echo(loaded.hint + "\n")
        click.echo("Ctrl-C stops it.", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


# -- backline try ---------------------------------------------------------------------------


@click.command(
    "try",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
)
@click.argument("background", required=False)
@click.option(
    "--script",
    "script_spec",
    metavar="NAME|FILE",
    help="The script to answer from (default: BACKGROUND's own, else generic).",
)
@click.pass_context
def try_offline(ctx: click.Context, background: str | None, script_spec: str | None) -> None:
    """Talk to background session BACKGROUND with no API key: scripted models on 127.0.0.1.

    Runs `backline console --background BACKGROUND` in this terminal against a fake
    Anthropic API that answers from BACKGROUND's own script (plugins ship one), else
    from the generic script, which drives any background through its tools: what you
    type is passed to it, "status?" reads its live state, its updates are read out.
    Nothing leaves your machine. The console runs in a scratch folder, removed at the
    end; other options go to the console (e.g. --plain).
    """
    extra = list(ctx.args)
    if background is not None and background.startswith("-"):  # an option, not a name
        extra.insert(0, background)
        background = None
    if script_spec is None:
        own = background is not None and background in available_scripts()
        script_spec = background if own and background is not None else GENERIC
    loaded = load_script(script_spec)
    with _serving(loaded, port=0, prefix="backline-try-", log=False) as (url, folder):
        work = folder / "work"
        work.mkdir()
        export, unset = environment(url, folder / "claude-config")
        env = {**os.environ, **export, **loaded.environment}
        for name in unset:
            env.pop(name, None)
        chosen = ["--background", background] if background else []
        click.echo(
            f"backline try: a fake Anthropic API on 127.0.0.1 answers from {loaded.described}; "
            "no key is used and nothing leaves this machine.",
            err=True,
        )
        click.echo((loaded.hint or _GENERIC_HINT) if background else _NO_BACKGROUND, err=True)
        click.echo(f"Working folder: {work} (removed at the end).", err=True)
        argv = [sys.executable, "-m", "backline", "console", *chosen, *extra]
        code = _run_in_this_terminal(argv, env=env, cwd=work)
    ctx.exit(code)


_GENERIC_HINT = (
    "What you type is passed to the background session; 'status?' reads its live "
    "state; its updates are read out."
)
_NO_BACKGROUND = (
    "No background session: the voice agent only says what it heard. "
    "`backline try NAME` runs one (`backline plugins` lists them)."
)


def _run_in_this_terminal(argv: list[str], *, env: Mapping[str, str], cwd: Path) -> int:
    """Run ``argv`` in the foreground of this terminal and return its exit status.

    It stays in this process group (so it reads the keyboard, and Ctrl-C reaches it
    from the terminal: this process only waits); when this process is stopped
    (SIGTERM, SIGHUP) it is stopped too: SIGTERM, then SIGKILL after a bound.
    """
    main = threading.current_thread() is threading.main_thread()
    # A handler, not SIG_IGN: an ignored SIGINT would be inherited by the console.
    previous = signal.signal(signal.SIGINT, lambda *_: None) if main else None
    child = subprocess.Popen(argv, env=dict(env), cwd=cwd)
    try:
        return child.wait()
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
