"""The web front end's WebSocket protocol, version 1: JSON text messages both ways.

Every message is an object with a ``type``. The client connects to
``/ws?token=TOKEN`` offering the subprotocol ``backline.v1`` (a client that
offers none is taken to speak version 1); the server's first message is
``hello`` with ``protocol: 1``. See ``docs/web.md`` for the full reference.

Server → client: ``hello``, ``agent_state``, ``user_state``, ``segment_start``,
``segment_text``, ``segment_end``, ``segment_clear``, ``transcript``,
``interim_transcript``, ``background_state``, ``background_status``,
``background_alert``, ``error``, ``closed``; with the server's speech,
``audio_start``, ``audio_end``, ``audio_clear`` and binary messages (the agent's
voice: 16-bit little-endian mono PCM).

Client → server: ``user_turn``, ``user_started_speaking``,
``user_stopped_speaking``, ``playout``, ``interrupt``; with the server's speech,
``audio_input``, ``audio_input_end``, ``audio_played`` and binary messages (the
microphone: 16-bit little-endian mono PCM at the rate ``audio_input`` announced).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ...limits import DEFAULT_LIMITS, Limits

PROTOCOL_VERSION = 1
SUBPROTOCOL = f"backline.v{PROTOCOL_VERSION}"
MIN_INPUT_RATE = 8_000
MAX_INPUT_RATE = 48_000
"""The sample rates ``audio_input`` may announce (the page sends 16 kHz)."""


class ProtocolError(ValueError):
    """A client message that does not follow the protocol (the connection stays open)."""


# -- client → server ---------------------------------------------------------------------------
@dataclass(frozen=True)
class UserTurn:
    """A final user turn: a final transcript, or typed text."""

    text: str
    type: Literal["user_turn"] = "user_turn"


@dataclass(frozen=True)
class UserStartedSpeaking:
    """Voice activity began (barge-in: interrupts the agent when its speech allows it)."""

    type: Literal["user_started_speaking"] = "user_started_speaking"


@dataclass(frozen=True)
class UserStoppedSpeaking:
    type: Literal["user_stopped_speaking"] = "user_stopped_speaking"


@dataclass(frozen=True)
class Playout:
    """How a segment's playout ended: the text spoken, and whether it was cut."""

    segment: int
    text: str
    interrupted: bool
    type: Literal["playout"] = "playout"


@dataclass(frozen=True)
class Interrupt:
    """Stop the agent now (a stop button); speech that disallows interruptions goes on."""

    type: Literal["interrupt"] = "interrupt"


@dataclass(frozen=True)
class AudioInput:
    """The microphone is on: binary messages that follow are its audio at ``sample_rate``."""

    sample_rate: int
    type: Literal["audio_input"] = "audio_input"


@dataclass(frozen=True)
class AudioInputEnd:
    """The microphone is off (hands-free stopped, push-to-talk released): what the user
    was saying has ended."""

    type: Literal["audio_input_end"] = "audio_input_end"


@dataclass(frozen=True)
class AudioPlayed:
    """How much of the server's audio ``stream`` the page has played (``seconds``);
    ``done``: the stream ended (``audio_end``) and all of it played."""

    stream: int
    seconds: float
    done: bool
    type: Literal["audio_played"] = "audio_played"


ClientMessage: TypeAlias = (
    UserTurn
    | UserStartedSpeaking
    | UserStoppedSpeaking
    | Playout
    | Interrupt
    | AudioInput
    | AudioInputEnd
    | AudioPlayed
)
KNOWN_CLIENT_TYPES = (
    "user_turn, user_started_speaking, user_stopped_speaking, playout, interrupt, "
    "audio_input, audio_input_end, audio_played"
)


def parse_client_message(raw: str | bytes, limits: Limits = DEFAULT_LIMITS) -> ClientMessage:
    """Parse and validate one client message; raises ``ProtocolError`` saying what is wrong
    (never another exception, whatever ``raw`` holds)."""
    if len(raw) > limits.max_web_message_bytes:
        raise ProtocolError(f"message too large (more than {limits.max_web_message_bytes} bytes)")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"not JSON: {e}") from None
    except RecursionError:
        raise ProtocolError(
            "not a protocol message: JSON nested too deeply (messages are flat objects)"
        ) from None
    if not isinstance(data, dict):
        raise ProtocolError("a message must be a JSON object with a 'type'")
    kind = data.get("type")
    if kind == "user_turn":
        text = _field(data, "text", str).strip()
        if not text:
            raise ProtocolError("user_turn: 'text' is empty")
        if len(text) > limits.max_user_turn_chars:
            raise ProtocolError(
                f"user_turn: 'text' is longer than {limits.max_user_turn_chars} characters"
            )
        return UserTurn(text=text)
    if kind == "user_started_speaking":
        return UserStartedSpeaking()
    if kind == "user_stopped_speaking":
        return UserStoppedSpeaking()
    if kind == "playout":
        segment = _field(data, "segment", int)
        if isinstance(segment, bool) or segment < 1:
            raise ProtocolError("playout: 'segment' must be a positive integer")
        return Playout(
            segment=segment,
            text=_field(data, "text", str),
            interrupted=_field(data, "interrupted", bool),
        )
    if kind == "interrupt":
        return Interrupt()
    if kind == "audio_input":
        rate = _field(data, "sample_rate", int)
        if not MIN_INPUT_RATE <= rate <= MAX_INPUT_RATE:
            raise ProtocolError(
                f"audio_input: 'sample_rate' must be {MIN_INPUT_RATE} to {MAX_INPUT_RATE} Hz, "
                f"got {rate}"
            )
        return AudioInput(sample_rate=rate)
    if kind == "audio_input_end":
        return AudioInputEnd()
    if kind == "audio_played":
        stream = _field(data, "stream", int)
        if stream < 1:
            raise ProtocolError("audio_played: 'stream' must be a positive integer")
        seconds = data.get("seconds")
        if (
            not isinstance(seconds, int | float)
            or isinstance(seconds, bool)
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            raise ProtocolError("audio_played: 'seconds' must be a number, 0 or more")
        return AudioPlayed(stream=stream, seconds=float(seconds), done=_field(data, "done", bool))
    raise ProtocolError(f"unknown message type {kind!r}; known: {KNOWN_CLIENT_TYPES}")


def _field(data: dict[str, Any], name: str, kind: type[Any]) -> Any:
    value = data.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"{data.get('type')}: '{name}' must be a {kind.__name__}")
    return value


# -- server → client ---------------------------------------------------------------------------
ServerMessage: TypeAlias = dict[str, Any]


def hello(
    *,
    session_id: str,
    agent_state: str,
    user_state: str,
    backgrounds: list[dict[str, Any]],
    speech: dict[str, Any] | None = None,
) -> ServerMessage:
    """The first message: the protocol version, a snapshot of the session, and who
    listens and speaks in this tab (``speech``: see ``WebSpeech.page_info``)."""
    return {
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "session_id": session_id,
        "agent_state": agent_state,
        "user_state": user_state,
        "backgrounds": backgrounds,
        "speech": speech,
    }


def background_entry(
    background_id: str, description: str, status: str, state: Any, summary: str | None
) -> dict[str, Any]:
    """One background in ``hello``: its id, description, status and last state."""
    return {
        "id": background_id,
        "description": description,
        "status": status,
        "state": state,
        "summary": summary,
    }


def agent_state(state: str) -> ServerMessage:
    return {"type": "agent_state", "state": state}


def user_state(state: str) -> ServerMessage:
    return {"type": "user_state", "state": state}


def segment_start(
    segment: int,
    speech_id: str,
    source: str | None,
    background_id: str | None,
    speaker: str = "page",
) -> ServerMessage:
    """The agent starts a unit of output. ``speaker``: ``page`` (speak its text as it
    streams in, then report ``playout``) or ``server`` (the server speaks it: show it)."""
    return {
        "type": "segment_start",
        "segment": segment,
        "speech_id": speech_id,
        "source": source,
        "background_id": background_id,
        "speaker": speaker,
    }


def segment_text(segment: int, text: str) -> ServerMessage:
    return {"type": "segment_text", "segment": segment, "text": text}


def segment_end(segment: int) -> ServerMessage:
    """No more text: finish speaking, then report ``playout``."""
    return {"type": "segment_end", "segment": segment}


def segment_clear(segment: int) -> ServerMessage:
    """Stop speaking now, then report ``playout`` with what was spoken."""
    return {"type": "segment_clear", "segment": segment}


def transcript(kind: str, item_id: str, text: str, **fields: Any) -> ServerMessage:
    """A transcript entry: ``user``, ``agent``, ``background``, ``tool`` or ``handoff``."""
    return {"type": "transcript", "kind": kind, "id": item_id, "text": text, **fields}


def interim_transcript(text: str) -> ServerMessage:
    """What the server's speech recognition has heard so far (the turn follows)."""
    return {"type": "interim_transcript", "text": text}


def audio_start(stream: int, sample_rate: int) -> ServerMessage:
    """The server's voice: binary messages that follow are ``stream``'s audio."""
    return {"type": "audio_start", "stream": stream, "sample_rate": sample_rate}


def audio_end(stream: int) -> ServerMessage:
    """No more audio in ``stream``: report ``audio_played`` with ``done`` once it played."""
    return {"type": "audio_end", "stream": stream}


def audio_clear(stream: int) -> ServerMessage:
    """Stop ``stream`` now and drop what is queued of it."""
    return {"type": "audio_clear", "stream": stream}


def background_state(background_id: str, state: Any, summary: str) -> ServerMessage:
    return {
        "type": "background_state",
        "background_id": background_id,
        "state": state,
        "summary": summary,
    }


def background_status(background_id: str, status: str, error: str | None) -> ServerMessage:
    return {
        "type": "background_status",
        "background_id": background_id,
        "status": status,
        "error": error,
    }


def background_alert(
    background_id: str, kind: str, text: str, tone: Sequence[tuple[float, float]]
) -> ServerMessage:
    """A background finished, failed or asks something: the page plays ``tone`` (notes of
    ``[hertz, seconds]``, 0 Hz a pause) at once and may show a notification."""
    return {
        "type": "background_alert",
        "background_id": background_id,
        "kind": kind,
        "text": text,
        "tone": [[hz, seconds] for hz, seconds in tone],
    }


def error(message: str, *, source: str, recoverable: bool = True) -> ServerMessage:
    return {"type": "error", "message": message, "source": source, "recoverable": recoverable}


def closed(reason: str) -> ServerMessage:
    """The session ended (the server is shutting down, or it failed); the socket closes next."""
    return {"type": "closed", "reason": reason}


def encode(message: ServerMessage) -> str:
    """JSON text for a server message (values that are not JSON become strings)."""
    return json.dumps(message, ensure_ascii=False, default=str, separators=(",", ":"))
