"""LiveKitOutput: each backline output segment is spoken as one LiveKit speech.

backline streams a segment (``begin_segment``, ``write``..., ``flush`` or
``clear``) and waits for its playout. Here a segment becomes one LiveKit speech:
the reply LiveKit is generating for the user's turn when one waits for words
(see ``_agent.py``), else ``AgentSession.say`` with the segment's text stream.
When that speech ends, its playout is reported back: the whole segment if it
played out, what LiveKit heard (its synchronized transcript) if it was cut.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from backline import TextOutput

if TYPE_CHECKING:
    from livekit.agents.voice import SpeechHandle as LKSpeechHandle

logger = logging.getLogger("backline.livekit")


class Segment:
    """One backline output segment on its way to LiveKit: a text stream and its speech."""

    def __init__(self, speech_id: str, *, allow_interruptions: bool) -> None:
        self.speech_id = speech_id
        self.allow_interruptions = allow_interruptions
        self.handle: LKSpeechHandle | None = None
        self.ended = False  # flush or clear: no more text
        self.cleared = False  # backline stopped it
        self.failed: BaseException | None = None  # LiveKit could not speak it
        self._texts: asyncio.Queue[str | None] = asyncio.Queue()

    def push(self, text: str) -> None:
        if not self.ended:
            self._texts.put_nowait(text)

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self._texts.put_nowait(None)

    async def texts(self) -> AsyncIterator[str]:
        """The segment's text as it is written, until it ends."""
        while (text := await self._texts.get()) is not None:
            yield text


def heard_prefix(written: str, heard: str) -> str:
    """The part of ``written`` that ``heard`` covers.

    LiveKit's synchronized transcript re-joins the words it played, so its
    whitespace may differ from what was written: whitespace is skipped on both
    sides, and the cut falls after the last character both agree on.
    """
    i = j = end = 0
    while i < len(written) and j < len(heard):
        if written[i].isspace():
            i += 1
        elif heard[j].isspace():
            j += 1
        elif written[i] == heard[j]:
            i += 1
            j += 1
            end = i
        else:
            break
    return written[:end]


def spoken_text(handle: LKSpeechHandle) -> str:
    """The assistant text LiveKit recorded for a finished speech (what was heard)."""
    parts: list[str] = []
    for item in handle.chat_items:
        if item.type == "message" and item.role == "assistant":
            parts.append(item.text_content or "")
    return "".join(parts)


class LiveKitOutput(TextOutput):
    """backline's output in a LiveKit session (installed by ``LiveKitBridge``).

    ``speak(segment)`` starts the LiveKit speech of a new segment (it sets
    ``segment.handle``); ``interrupted_by_livekit()`` is called when LiveKit cut a
    speech on its own (barge-in), so the backline session interrupts too;
    ``failed(error)`` when LiveKit could not speak a segment (its words stay in
    the history, as written).
    """

    def __init__(
        self,
        *,
        speak: Callable[[Segment], None],
        allow_interruptions: Callable[[str], bool],
        interrupted_by_livekit: Callable[[], None],
        failed: Callable[[BaseException], None],
    ) -> None:
        super().__init__()
        self._speak = speak
        self._allow_interruptions = allow_interruptions
        self._interrupted_by_livekit = interrupted_by_livekit
        self._failed = failed
        self.segment: Segment | None = None

    # -- backline's side ----------------------------------------------------------------
    def on_segment_start(self, speech_id: str) -> None:
        segment = Segment(speech_id, allow_interruptions=self._allow_interruptions(speech_id))
        self.segment = segment
        try:
            self._speak(segment)
        except RuntimeError as e:  # LiveKit is closing: nothing can be spoken any more
            logger.warning("livekit: cannot speak (%s); the segment is dropped", e)
            segment.end()
            self.report_playout("", interrupted=True)
            return
        handle = segment.handle
        assert handle is not None
        handle.add_done_callback(lambda h: self._speech_done(segment, h))

    def on_text(self, text: str) -> None:
        if self.segment is not None:
            self.segment.push(text)

    def on_flush(self) -> None:
        segment = self.segment
        if segment is None:
            return
        segment.end()
        if segment.failed is not None:
            self.report_playout(self.segment_text, interrupted=False)

    def on_clear(self) -> None:
        segment = self.segment
        if segment is None:
            return
        segment.cleared = True
        segment.end()
        handle = segment.handle
        if segment.failed is not None or handle is None or handle.done():
            self.report_playout(self.segment_text, interrupted=True)
        else:
            handle.interrupt(force=True)  # backline decided; the done callback reports

    # -- LiveKit's side -----------------------------------------------------------------
    def _speech_done(self, segment: Segment, handle: LKSpeechHandle) -> None:
        if segment is not self.segment:
            return  # a later segment has started: this one was reported already
        error = handle.exception()
        if error is not None and not handle.interrupted:
            # The words were written and shown; only the audio failed. They stay in the
            # history as written (reported at flush if the segment is still streaming).
            segment.failed = error
            self._failed(error)
            if segment.ended:
                self.report_playout(self.segment_text, interrupted=segment.cleared)
            return
        if handle.interrupted or not segment.ended:
            self.report_playout(
                heard_prefix(self.segment_text, spoken_text(handle)), interrupted=True
            )
            if not segment.cleared:
                segment.end()
                self._interrupted_by_livekit()
            return
        self.report_playout(self.segment_text, interrupted=False)
