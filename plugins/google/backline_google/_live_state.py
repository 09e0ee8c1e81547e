"""What a Gemini Live session's server messages do: the model's turns, its calls, the
user's voice heard, the resumption handle, and the busy flag they make
(``RealtimeSession``). The base of ``GeminiLiveLLM`` (``live``), which connects, sends
and reads; this part only keeps the state.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from google.genai import types

from backline.llm import AudioDelta, LLMError, TextDelta, ToolCallChunk

from ._live_items import Call, canonical_args, model_unit, user_unit
from ._live_turns import Hearing, Turn

log = logging.getLogger("backline_google.live")

OUTPUT_RATE = 24000  # Gemini Live's audio out: 16-bit PCM, 24 kHz, mono


class LiveState:
    """The state a Gemini Live session's messages change (see the module doc)."""

    def __init__(self) -> None:
        self._held: list[tuple[Any, ...]] = []  # the signatures of what the session holds
        self._session_calls: set[str] = set()  # calls it made, not answered yet
        self._open_calls: set[str] = set()
        self._turns: deque[Turn] = deque()
        self._answered: Turn | None = None  # an answer to the voice no chat() read yet
        self._hearing: Hearing | None = None
        self._stray_complete = False  # an interrupted turn's turnComplete may follow
        self._handle: str | None = None
        self._going_away = False
        self._audio = False
        self._text_modality = True
        self._listeners: list[Callable[[bool], None]] = []
        self._busy = False

    # -- RealtimeSession ----------------------------------------------------------
    @property
    def background_work_running(self) -> bool:
        return self._busy

    def add_background_work_listener(self, listener: Callable[[bool], None]) -> None:
        self._listeners.append(listener)

    def remove_background_work_listener(self, listener: Callable[[bool], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _changed(self) -> None:
        busy = any(not t.done for t in self._turns) or bool(self._open_calls)
        if busy == self._busy:
            return
        self._busy = busy
        for listener in list(self._listeners):
            try:
                listener(busy)
            except Exception:
                log.exception("a background-work listener raised")

    def _drop_turns(self, error: LLMError) -> None:
        for turn in self._turns:
            if turn.hearing is not None:
                turn.hearing.finish(str(error))  # its utterance is lost with the session
            turn.end(error)
        self._turns.clear()
        self._answered = None
        if self._hearing is not None:
            self._hearing.finish(str(error))
            self._hearing = None
        self._open_calls.clear()
        self._changed()

    # -- the server's messages ---------------------------------------------------
    def _current(self) -> Turn:
        """The turn the server is producing (one nobody asked for, if none waits)."""
        for turn in self._turns:
            if not turn.done:
                return turn
        turn = Turn()
        self._turns.append(turn)
        self._changed()
        return turn

    def _on_message(self, message: types.LiveServerMessage) -> None:
        resumption = message.session_resumption_update
        if resumption is not None and resumption.resumable and resumption.new_handle:
            self._handle = resumption.new_handle
        if message.go_away is not None:
            self._going_away = True
        usage = message.usage_metadata
        if usage is not None and self._turns:  # before the content that may end the turn
            self._turns[0].usage = {
                "input": usage.prompt_token_count or 0,
                "output": (usage.response_token_count or 0) + (usage.thoughts_token_count or 0),
                "cached": usage.cached_content_token_count or 0,
            }
        content = message.server_content
        if content is not None:
            self._on_content(content)
        if message.tool_call is not None:
            self._on_tool_call(message.tool_call)
        cancelled = message.tool_call_cancellation
        if cancelled is not None:
            for call_id in cancelled.ids or ():
                self._open_calls.discard(call_id)
                self._session_calls.discard(call_id)
            self._changed()

    def _on_content(self, content: types.LiveServerContent) -> None:
        heard = content.input_transcription
        if heard is not None and self._hearing is not None:
            if heard.text:
                self._hearing.add(heard.text)
            if heard.finished:
                self._heard(self._hearing)
        produced = content.model_turn is not None or (
            content.output_transcription is not None and content.output_transcription.text
        )
        if not produced and not content.turn_complete and not content.interrupted:
            return
        if content.turn_complete and not produced and self._stray_complete:
            self._stray_complete = False  # the interrupted turn's own end
            return
        turn = self._current()
        self._stray_complete = False
        if produced and turn.hearing is not None:
            self._heard(turn.hearing)  # the model answers: what it heard is final
        for part in (content.model_turn.parts if content.model_turn else None) or ():
            if part.thought:
                continue
            blob = part.inline_data
            if blob is not None and blob.data and self._speaks():
                if self._audio:  # whole 16-bit samples only
                    data = blob.data[: len(blob.data) // 2 * 2]
                    turn.put(AudioDelta(data, _rate(blob.mime_type)))
                else:
                    turn.started = True  # the audio of a transcript shown as text
            elif part.text and not self._speaks():
                turn.texts.append(part.text)
                turn.put(TextDelta(part.text))
        said = content.output_transcription
        if said is not None and said.text and self._speaks():
            turn.texts.append(said.text)
            if self._audio:
                turn.put(AudioDelta(b"", OUTPUT_RATE, said.text))
            else:
                turn.put(TextDelta(said.text))
        if content.interrupted:
            turn.interrupted = True
            self._stray_complete = True
            self._finish(turn)
        elif content.turn_complete:
            self._finish(turn)

    def _speaks(self) -> bool:
        return self._audio or not self._text_modality

    def _on_tool_call(self, tool_call: types.LiveServerToolCall) -> None:
        turn = self._current()
        if turn.hearing is not None:
            self._heard(turn.hearing)
        for call in tool_call.function_calls or ():
            if not call.name:
                continue
            arguments = json.dumps(call.args or {}, ensure_ascii=False, separators=(",", ":"))
            call_id = call.id or f"gemini_live_call_{uuid.uuid4().hex[:16]}"
            if call.id:
                self._session_calls.add(call_id)
            self._open_calls.add(call_id)
            turn.calls.append(Call(call_id, call.name, canonical_args(arguments)))
            turn.put(ToolCallChunk(call_id, call.name, arguments))
        self._changed()

    def _heard(self, hearing: Hearing) -> None:
        """The user's utterance is transcribed: the session holds it as a user turn."""
        if hearing.done.is_set():
            return
        if hearing.text:
            self._held.append(user_unit(hearing.text).signature)
        hearing.finish()
        if self._hearing is hearing:
            self._hearing = None

    def _finish(self, turn: Turn) -> None:
        if turn.hearing is not None:
            self._heard(turn.hearing)
        if turn.audio and not turn.claimed and not turn.abandoned:
            if self._answered is not None:
                self._give_up(self._answered)
            self._answered = turn  # held once a chat() reads it (or gives it up)
        else:
            self._hold(turn)
        if turn.abandoned:
            # Its stream was closed (a barge-in): the runtime runs none of the calls it
            # did not see, and the next sync sees the difference.
            for call in turn.calls:
                self._open_calls.discard(call.call_id)
        turn.end()
        with contextlib.suppress(ValueError):
            self._turns.remove(turn)
        self._changed()

    def _hold(self, turn: Turn) -> None:
        """The session holds ``turn`` (at the place it took when an urgent update was
        sent after it: with what it ended with, which may be more than it had then)."""
        if not (turn.text.strip() or turn.calls):
            return
        signature = model_unit(turn.text, turn.calls).signature
        if turn.held_at is not None and turn.held_at < len(self._held):
            self._held[turn.held_at] = signature
        else:
            self._held.append(signature)

    def _pending_answer(self) -> Turn | None:
        if self._answered is not None:
            return self._answered
        for turn in self._turns:
            if turn.audio and not turn.claimed and not turn.abandoned:
                return turn
        return None

    def _give_up(self, turn: Turn) -> None:
        """An answer to the voice the runtime does not read (its context went on)."""
        turn.abandoned = True
        if turn.done:
            self._answered = None
            self._hold(turn)


def _rate(mime_type: str | None) -> int:
    """The sample rate of ``audio/pcm;rate=24000`` (Gemini Live's, when not said)."""
    for piece in (mime_type or "").split(";"):
        key, _, value = piece.strip().partition("=")
        if key == "rate" and value.isdigit():
            return int(value)
    return OUTPUT_RATE
