"""Which voice session an MCP endpoint path reaches: a registry of sessions, by key.

A path names a background session, and optionally the voice session it belongs
to: ``/mcp/<background>`` reaches, of the sessions in the registry that have not
closed and run that background, the one added last (a console has one);
``/mcp/<key>/<background>`` reaches exactly one session (what ``cli_agent`` gives
the agent it runs, so a web tab's agent talks to its own tab). Sessions are held
weakly: the registry never keeps one alive.
"""

from __future__ import annotations

import itertools
import secrets
import weakref
from typing import TYPE_CHECKING, Any

from ...background.runtime import background_of
from ._channel import CLOSED, ChannelError, VoiceChannel

if TYPE_CHECKING:
    from ...voice.session import Session


class SessionRegistry:
    """The voice sessions one MCP endpoint serves."""

    def __init__(self) -> None:
        self._keys: weakref.WeakKeyDictionary[Session[Any], str] = weakref.WeakKeyDictionary()
        self._sessions: dict[str, tuple[int, weakref.ref[Session[Any]]]] = {}
        self._order = itertools.count()

    def add(self, session: Session[Any]) -> str:
        """Serve ``session`` (idempotent); returns its key."""
        key = self._keys.get(session)
        if key is not None:
            return key
        self._prune()
        key = secrets.token_urlsafe(9)
        self._keys[session] = key
        self._sessions[key] = (next(self._order), weakref.ref(session))
        return key

    def _prune(self) -> None:
        dead = [k for k, (_, ref) in self._sessions.items() if ref() is None]
        for key in dead:
            del self._sessions[key]

    def live_sessions(self) -> list[Session[Any]]:
        """Running sessions, newest first."""
        found = []
        for order, ref in self._sessions.values():
            session = ref()
            if session is not None and not session.closed and background_of(session) is not None:
                found.append((order, session))
        return [s for _, s in sorted(found, key=lambda pair: -pair[0])]

    def backgrounds(self) -> list[str]:
        """The background ids of the running sessions (sorted, without repeats)."""
        ids = {bid for s in self.live_sessions() for bid in _running_ids(s)}
        return sorted(ids)

    def channel(self, key: str | None, background_id: str) -> VoiceChannel:
        """The channel a path names, or ``ChannelError`` saying what is wrong."""
        if key is not None:
            entry = self._sessions.get(key)
            session = entry[1]() if entry is not None else None
            if session is None or session.closed:
                raise ChannelError(CLOSED if entry is not None else _UNKNOWN_KEY)
            return _channel_in(session, background_id)
        for session in self.live_sessions():
            if background_id in _running_ids(session):
                return _channel_in(session, background_id)
        running = self.backgrounds()
        if not running:
            raise ChannelError(
                "No voice session with background sessions is running in this backline "
                "front end yet. Start a conversation (a web tab, or `backline console "
                f"--background {background_id}`), then call again."
            )
        raise ChannelError(_unknown(background_id, running))


_UNKNOWN_KEY = (
    "This MCP endpoint names a voice session this backline front end does not know (it "
    "may have been restarted). Get a fresh configuration with `backline mcp config`."
)


def _running_ids(session: Session[Any]) -> list[str]:
    manager = background_of(session)
    return [] if manager is None else sorted(manager.runtimes)


def _channel_in(session: Session[Any], background_id: str) -> VoiceChannel:
    manager = background_of(session)
    if manager is None or background_id not in manager.runtimes:
        raise ChannelError(_unknown(background_id, _running_ids(session)))
    return VoiceChannel.of(manager.context(background_id))


def _unknown(background_id: str, running: list[str]) -> str:
    known = ", ".join(running) or "none"
    return (
        f"Unknown background session '{background_id}': this voice session runs {known}. "
        "Configure the agent for one of them (`backline mcp config --background NAME`)."
    )
