"""How an agent finds the running front end's MCP endpoint: environment or a 0600 file.

A front end (``backline console``, ``backline web``) announces its endpoint in a
file only its user can read, ``mcp-<pid>.json`` in the runtime directory
(``$BACKLINE_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/backline``, else
``~/.local/state/backline``), and removes it when it stops. ``backline mcp
serve`` reads the newest live one, unless ``BACKLINE_MCP_URL`` (and
``BACKLINE_MCP_TOKEN``) name an endpoint, as ``cli_agent`` does for the agents it
runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

TOOL_NAMES = ("send_to_user", "add_context", "set_status", "wait_for_user", "ask_user")
"""The voice channel's MCP tools (an agent sees them as ``mcp__backline__<tool>`` in Claude
Code)."""

SERVER_NAME = "backline"
"""The name the voice channel's MCP server has in agents' configurations."""

ENV_URL = "BACKLINE_MCP_URL"
"""An MCP endpoint URL: the proxy uses it instead of looking for a front end."""
ENV_TOKEN = "BACKLINE_MCP_TOKEN"
"""The endpoint's bearer token (with ``BACKLINE_MCP_URL``; a front end started with it
set uses it as its token instead of a random one)."""
ENV_PORT = "BACKLINE_MCP_PORT"
"""The port a front end's endpoint listens on (default: any free port)."""
ENV_RUNTIME_DIR = "BACKLINE_RUNTIME_DIR"
"""Where front ends announce their endpoints."""


@dataclass(frozen=True)
class Announcement:
    """A running front end's endpoint: its base URL (``http://127.0.0.1:PORT``) and token."""

    url: str
    token: str
    pid: int
    front_end: str = "backline"
    path: Path | None = None

    def endpoint(self, background_id: str) -> str:
        """The URL of one background session's voice channel."""
        return f"{self.url}/mcp/{background_id}"


def runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The directory front ends announce their endpoints in."""
    env = os.environ if environ is None else environ
    if env.get(ENV_RUNTIME_DIR):
        return Path(env[ENV_RUNTIME_DIR]).expanduser()
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "backline"
    home = Path(env.get("HOME") or Path.home())
    return home / ".local" / "state" / "backline"


def announce(
    url: str, token: str, front_end: str, environ: Mapping[str, str] | None = None
) -> Path:
    """Write this process's announcement (mode 0600, atomically); returns its path."""
    directory = runtime_dir(environ)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / f"mcp-{os.getpid()}.json"
    body = json.dumps({"url": url, "token": token, "pid": os.getpid(), "front_end": front_end})
    temp = directory / f".mcp-{os.getpid()}.{time.monotonic_ns()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return path


def withdraw(path: Path) -> None:
    """Remove an announcement (a front end that stops)."""
    with contextlib.suppress(OSError):
        path.unlink()


def announcements(environ: Mapping[str, str] | None = None) -> list[Announcement]:
    """The running front ends' announcements, newest first (stale ones are removed)."""
    directory = runtime_dir(environ)
    found: list[tuple[float, Announcement]] = []
    try:
        paths = list(directory.glob("mcp-*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            stat = path.stat()
            data = json.loads(path.read_text(encoding="utf-8"))
            item = Announcement(
                url=str(data["url"]),
                token=str(data["token"]),
                pid=int(data["pid"]),
                front_end=str(data.get("front_end", "backline")),
                path=path,
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if stat.st_mode & 0o077:
            continue  # readable by others: not written by a front end, not trusted
        if not _alive(item.pid):
            withdraw(path)  # its front end is gone
            continue
        found.append((stat.st_mtime, item))
    return [item for _, item in sorted(found, key=lambda pair: -pair[0])]


def from_environment(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(url, token)`` from ``BACKLINE_MCP_URL`` / ``BACKLINE_MCP_TOKEN``, if set."""
    env = os.environ if environ is None else environ
    url = env.get(ENV_URL, "").strip()
    if not url:
        return None
    return url, env.get(ENV_TOKEN, "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


PROBE_TIMEOUT = 3.0


@dataclass(frozen=True)
class Probe:
    """What an endpoint answered a token: ``accepted`` (with the backgrounds it serves,
    when it says), ``refused`` (401), ``unreachable``, or ``unexpected`` (not a backline
    endpoint, it seems); ``detail`` says more."""

    verdict: Literal["accepted", "refused", "unreachable", "unexpected"]
    detail: str = ""
    backgrounds: tuple[str, ...] | None = None


def probe(url: str, token: str, timeout: float = PROBE_TIMEOUT) -> Probe:
    """Ask the endpoint of ``url`` (its base, or any of its ``/mcp/...`` URLs) whether
    ``token`` is its token: ``GET /mcp``, on loopback, without a proxy."""
    parts = urlsplit(url)
    target = f"{parts.scheme}://{parts.netloc}/mcp"
    request = urllib.request.Request(target, headers={"Authorization": f"Bearer {token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read(65536)
    except urllib.error.HTTPError as e:
        if e.code == 401:
            return Probe("refused", "401 Unauthorized")
        if e.code == 404:  # a front end from before GET /mcp: the token passed its gate
            return Probe("accepted")
        return Probe("unexpected", f"HTTP {e.code}")
    except (OSError, ValueError) as e:
        return Probe("unreachable", str(getattr(e, "reason", e)))
    try:
        data = json.loads(body)
        backgrounds = tuple(str(b) for b in data["backgrounds"])
    except (ValueError, KeyError, TypeError):
        return Probe("unexpected", "not a backline MCP endpoint")
    return Probe("accepted", backgrounds=backgrounds)
