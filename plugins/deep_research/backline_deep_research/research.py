"""One research round: clarify, plan, search, read, extract claims, verify, write.

Spoken (``ctx.send``) only at milestones: clarifying questions, the start with its
angles, sources and claims counts, verification counts, the report, a dead end or a
failure, and the acknowledgement of a steering note. Everything else is a context
note (``silent=True``). The live state is replaced at each phase (``state.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from backline.limits import truncate_text
from backline.tasks import TaskScope

from . import prompts
from . import state as st
from .config import ResearchConfig
from .evidence import Claim, Source, Vote, counts, parse_vote, passage_in, unnamed_subject
from .fetch import Fetcher, FetchError, normalize_url
from .inbox import CLOSED, Inbox, is_stop, wants_just_start
from .models import ModelCallFailed, ResearchModels
from .report import ReportInput, Synthesis, spoken_report, write_report
from .search import SearchProvider, SearchResult

if TYPE_CHECKING:
    from backline import BackgroundContext

logger = logging.getLogger("backline.deep_research")

T = TypeVar("T")
CLAIMS_PER_SOURCE = 3
TOPIC_CHARS = 150
STEER_ACK = "Noted — I'll fold this into the remaining research: {note}"


class RoundFailed(Exception):
    """The round cannot go on (no plan, no report); the message is said to the user."""


class Closing(Exception):
    """The background is closing while the round waited for the user."""


@dataclass
class Previous:
    """What a follow-up round carries from the last report (catalog item 176)."""

    topic: str
    summary: str


@dataclass
class Outcome:
    """How a round ended: ``kind`` is ``done``, ``no_sources`` or ``inconclusive``."""

    kind: str
    topic: str
    summary: str = ""
    report: Path | None = None
    stats: dict[str, int] = field(default_factory=dict)


@dataclass
class Angle:
    label: str
    query: str


_ASK = re.compile(
    r"^(?:please\s+)?(?:(?:can|could|would) you\s+)?(?:please\s+)?"
    r"(?:research|look into|investigate|find out(?: about)?|dig into|tell me)\s+",
    re.IGNORECASE,
)


def short_topic(question: str) -> str:
    """What a question is about, for speech, state and the file name: the request
    without "just start"-style instructions or a leading "research"."""
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(question.split()))
    kept = [s for s in sentences if not wants_just_start(s)] or sentences
    text = _ASK.sub("", " ".join(kept)).strip().rstrip(".!?").strip() or question.strip()
    return text if len(text) <= TOPIC_CHARS else text[: TOPIC_CHARS - 1].rstrip() + "…"


class ResearchRound:
    """Runs one round for ``question``. ``run()`` returns an ``Outcome`` or raises
    ``RoundFailed``; messages that arrive after clarification are steering notes."""

    def __init__(
        self,
        ctx: BackgroundContext,
        config: ResearchConfig,
        models: ResearchModels,
        search: SearchProvider,
        inbox: Inbox,
        question: str,
        previous: Previous | None = None,
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.limits = config.limits
        self.models = models
        self.search = search
        self.inbox = inbox
        self.topic = short_topic(question)
        self.question = question.strip()
        self.previous = previous
        self.transcript: list[str] = []
        self.steering: list[str] = []
        self.stopped = asyncio.Event()
        self.unnamed: list[str] = []  # claims dropped for not naming their subject
        self._calls_before = models.total_calls
        self.stats: dict[str, int] = {
            "searches": 0,
            "searches_failed": 0,
            "sources_read": 0,
            "sources_skipped": 0,
            "claims_found": 0,
            "claims_without_passage": 0,
            "claims_without_subject": 0,
            "claims_verified": 0,
            "uncited_sentences_dropped": 0,
            "model_calls": 0,
        }

    # -- the round --------------------------------------------------------------------------------
    async def run(self) -> Outcome:
        self.ctx.set_state(st.clarifying(self.topic))
        if not wants_just_start(self.question):
            await self._clarify()
        # Steering runs beside the research: cancelled and awaited (bounded) when the
        # round ends, however it ends; how it ended is read here.
        scope = TaskScope("deep_research steering", log_failures=False)
        steer = scope.create_task(self._steer(), name="deep_research steering")
        self.ctx.on_stop(self._stop_now)  # backline_stop: as "stop" (not a steering note)
        try:
            async with self.ctx.turn():
                return await self._research()
        finally:
            self.ctx.on_stop(None)
            await scope.aclose()
            if steer.done() and not steer.cancelled() and steer.exception() is not None:
                logger.warning("steering stopped: %s", steer.exception())

    async def _research(self) -> Outcome:
        angles = await self._plan()
        self.ctx.set_state(st.searching(self.topic, [a.label for a in angles]))
        labels = "; ".join(a.label for a in angles)
        await self._say(f"Starting research on {self.topic}. I'll look at: {labels}.")
        sources = await self._until_stopped(self._gather_sources(angles), default=[])
        self.stats["sources_read"] = len(sources)
        claims = await self._extract_claims(sources) if sources else []
        if not claims:
            return await self._dead_end_no_sources(sources)
        await self._say(
            f"I read {len(sources)} sources and found {len(claims)} claims to check"
            + (
                f" ({self.stats['sources_skipped']} sources could not be read)."
                if (self.stats["sources_skipped"])
                else "."
            )
        )
        self.ctx.set_state(st.verifying(self.topic, len(sources), len(claims)))
        await self._until_stopped(self._verify(claims), default=None)
        tally = counts(claims)
        self.stats["claims_verified"] = sum(1 for c in claims if c.votes)
        await self._say(
            f"Verification done: {tally['confirmed']} confirmed, {tally['refuted']} refuted, "
            f"{tally['inconclusive']} inconclusive."
        )
        if tally["confirmed"] == 0:
            return await self._dead_end_inconclusive(sources, tally["refuted"])
        self.ctx.set_state(
            st.writing(self.topic, len(sources), tally["confirmed"], tally["refuted"])
        )
        return await self._write(sources, claims)

    # -- clarify (catalog 175) ------------------------------------------------------------
    async def _clarify(self) -> None:
        for _ in range(self.limits.clarify_rounds):
            try:
                answer = await self.models.ask_json(
                    "clarify", prompts.CLARIFY, self._brief(include_steering=False)
                )
            except ModelCallFailed as e:
                await self._note(f"Skipping clarification: {e}.")
                return
            if answer is None:
                await self._note("Skipping clarification: the model's answer was not usable.")
                return
            if answer.get("ready") is True:
                refined = answer.get("question")
                if isinstance(refined, str) and refined.strip():
                    self.question = refined.strip()
                return
            raw = answer.get("questions")
            questions = (
                [q.strip() for q in raw if isinstance(q, str) and q.strip()]
                if (isinstance(raw, list))
                else []
            )
            if not questions:
                return
            questions = questions[:3]
            await self._say(
                "Before I start, a few questions:\n" + "\n".join(f"- {q}" for q in questions)
            )
            try:
                reply = await self.inbox.get(timeout=self.limits.clarify_timeout)
            except TimeoutError:
                self.transcript.append(f"Q: {' '.join(questions)}\nA: (no answer)")
                await self._note(
                    f"No answer within {self.limits.clarify_timeout:g} s; starting without it."
                )
                return
            if reply is CLOSED:
                raise Closing
            self.transcript.append(f"Q: {' '.join(questions)}\nA: {reply}")
            if wants_just_start(reply):
                return

    # -- steering (catalog 177) -------------------------------------------------------------
    async def _steer(self) -> None:
        while True:
            message = await self.inbox.get()
            if message is CLOSED:
                return
            if is_stop(message):
                await self._stop_now()
                continue
            self.steering.append(message.strip())
            del self.steering[: -self.limits.steering_notes]
            await self._say(STEER_ACK.format(note=message.strip()))

    async def _stop_now(self) -> None:
        """The user said "stop" (or the voice agent called ``backline_stop``): the round
        finishes with what is verified so far."""
        if not self.stopped.is_set():
            self.stopped.set()
            await self._say("Stopping: I'll finish with what is verified so far.")

    async def _until_stopped(self, work: Coroutine[Any, Any, T], *, default: T) -> T:
        """``work``'s result, or ``default`` if the user says "stop" first (work cancelled)."""
        if self.stopped.is_set():
            work.close()
            return default
        scope = TaskScope("deep_research step", log_failures=False)  # work's failure: raised
        task = scope.create_task(work)
        stop = scope.create_task(self.stopped.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await scope.aclose()
        if task.cancelled() or not task.done():  # stopped (or abandoned at the bound)
            return default
        return task.result()

    # -- plan -------------------------------------------------------------------------------------
    async def _plan(self) -> list[Angle]:
        try:
            answer = await self.models.ask_json(
                "plan", prompts.plan_prompt(self.limits.max_angles), self._brief()
            )
        except ModelCallFailed as e:
            raise RoundFailed(str(e)) from None
        raw = answer.get("angles") if answer else None
        angles: list[Angle] = []
        for item in raw if isinstance(raw, list) else []:
            if isinstance(item, dict):
                label, query = item.get("label"), item.get("query")
                if isinstance(query, str) and query.strip():
                    text = label if isinstance(label, str) and label.strip() else query
                    angles.append(Angle(" ".join(text.split()), " ".join(query.split())))
        if not angles:
            raise RoundFailed("the planner returned no usable search plan")
        return angles[: self.limits.max_angles]

    # -- search and read --------------------------------------------------------------------------
    async def _gather_sources(self, angles: list[Angle]) -> list[Source]:
        async with asyncio.TaskGroup() as tg:
            searches = [tg.create_task(self._search(a)) for a in angles]
        candidates = _interleave([t.result() for t in searches])
        failed = [a.label for a, t in zip(angles, searches, strict=True) if t.result() is None]
        await self._note(
            f"Searched {len(angles)} angles with {self.config.search}"
            + (f"; failed: {', '.join(failed)}" if failed else "")
            + f"; {len(candidates)} unique results."
        )
        return await self._read(candidates)

    async def _search(self, angle: Angle) -> list[SearchResult] | None:
        self.stats["searches"] += 1
        try:
            async with asyncio.timeout(self.limits.search_timeout):
                return await self.search.search(
                    angle.query, max_results=self.limits.results_per_angle
                )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.stats["searches_failed"] += 1
            logger.info("search %r failed: %s", angle.query, e)
            return None

    async def _read(self, candidates: list[SearchResult]) -> list[Source]:
        """Read candidates in waves until ``max_sources`` are read or candidates run out."""
        limit = self.limits.max_sources
        pages: list[tuple[int, SearchResult, str, str]] = []
        skipped: list[str] = []
        queue = list(enumerate(candidates))[: limit * 2]  # bounded attempts
        async with contextlib.AsyncExitStack() as stack:
            fetcher: Fetcher | None = None
            while queue and len(pages) < limit:
                wave, queue = queue[: limit - len(pages)], queue[limit - len(pages) :]
                if fetcher is None and any(r.content is None for _, r in wave):
                    client = await stack.enter_async_context(
                        Fetcher.make_client(
                            self.limits,
                            allow_private_hosts=self.config.allow_private_hosts,
                            network=self.config.network,
                        )
                    )
                    fetcher = Fetcher(client, self.limits)
                    stack.push_async_callback(fetcher.aclose)
                async with asyncio.TaskGroup() as tg:
                    tasks = [(i, r, tg.create_task(self._read_one(fetcher, r))) for i, r in wave]
                for i, result, task in tasks:
                    got = task.result()
                    if isinstance(got, str):
                        skipped.append(f"{result.url} ({got})")
                    else:
                        pages.append((i, result, *got))
        pages.sort(key=lambda p: p[0])
        self.stats["sources_skipped"] = len(skipped)
        sources = [
            Source(number=n, url=r.url, title=title or r.title or r.url, text=text)
            for n, (_, r, title, text) in enumerate(pages, start=1)
        ]
        if skipped:
            await self._note(f"Skipped {len(skipped)} sources: {'; '.join(skipped)}.")
        return sources

    async def _read_one(
        self, fetcher: Fetcher | None, result: SearchResult
    ) -> tuple[str, str] | str:
        """``(title, text)`` of a result, or why it was skipped."""
        if result.content is not None:
            text, _ = truncate_text(result.content.strip(), self.limits.page_chars, "page text")
            return (result.title, text) if text else "no text"
        assert fetcher is not None
        try:
            page = await fetcher.fetch(result.url)
        except FetchError as e:
            return str(e)
        except Exception as e:  # extraction bugs must not end the round
            return f"{type(e).__name__}: {e}"
        return page.title, page.text

    # -- claims -----------------------------------------------------------------------------------
    async def _extract_claims(self, sources: list[Source]) -> list[Claim]:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._claims_of(s)) for s in sources]
        per_source = [t.result() for t in tasks]
        claims = _interleave(per_source)[: self.limits.max_claims]
        if self.stats["claims_without_passage"]:
            await self._note(
                f"Dropped {self.stats['claims_without_passage']} claims whose quoted passage "
                "is not in the source."
            )
        if self.unnamed:
            await self._note(
                f"Dropped {len(self.unnamed)} claims that do not name their subject: "
                + "; ".join(f'"{c}"' for c in self.unnamed)
                + "."
            )
        return claims

    async def _claims_of(self, source: Source) -> list[Claim]:
        user = (
            self._brief()
            + f"\n\nSource [{source.number}]: {source.title}\nURL: {source.url}\n\n{source.text}"
        )
        try:
            answer = await self.models.ask_json(
                "extract", prompts.extract_prompt(CLAIMS_PER_SOURCE), user
            )
        except ModelCallFailed as e:
            logger.info("claim extraction failed for %s: %s", source.url, e)
            return []
        raw = answer.get("claims") if answer else None
        claims: list[Claim] = []
        seen: set[str] = set()
        for item in raw if isinstance(raw, list) else []:
            if not isinstance(item, dict):
                continue
            text, passage = item.get("claim"), item.get("quote")
            if not isinstance(text, str) or not text.strip() or not isinstance(passage, str):
                continue
            self.stats["claims_found"] += 1
            if not passage_in(passage, source.text):
                self.stats["claims_without_passage"] += 1
                continue
            if unnamed_subject(text):  # "It runs ...": read alone, it says nothing
                self.stats["claims_without_subject"] += 1
                self.unnamed.append(" ".join(text.split()))
                continue
            key = " ".join(text.lower().split())
            if key not in seen:
                seen.add(key)
                claims.append(Claim(" ".join(text.split()), " ".join(passage.split()), source))
        return claims[:CLAIMS_PER_SOURCE]

    # -- verification -----------------------------------------------------------------------------
    async def _verify(self, claims: list[Claim]) -> None:
        async with asyncio.TaskGroup() as tg:
            for claim in claims:
                for i in range(self.limits.votes_per_claim):
                    tg.create_task(self._vote(claim, i))

    async def _vote(self, claim: Claim, index: int) -> None:
        stance = prompts.VERIFY_STANCES[index % len(prompts.VERIFY_STANCES)]
        user = (
            f"Research question: {self.question}\n\nClaim: {claim.text}\n\n"
            f'Passage cited for it: "{claim.passage}"\n\nYour review: {stance}\n\n'
            f"Source [{claim.source.number}]: {claim.source.title}\n\n{claim.source.text}"
        )
        try:
            answer = await self.models.ask_json("verify", prompts.VERIFY, user)
        except ModelCallFailed as e:
            logger.info("a verification vote failed: %s", e)
            return
        vote: Vote | None = parse_vote(answer.get("verdict")) if answer else None
        if vote is not None:
            claim.votes.append(vote)

    # -- the report -------------------------------------------------------------------------------
    async def _write(self, sources: list[Source], claims: list[Claim]) -> Outcome:
        confirmed = [c for c in claims if c.verdict == "confirmed"]
        evidence = "\n".join(
            f'- {c.text} [{c.source.number}] (passage: "{c.passage}")' for c in confirmed
        )
        listing = "\n".join(f"[{s.number}] {s.title}" for s in sources)
        user = f"{self._brief()}\n\nVerified claims:\n{evidence}\n\nSources:\n{listing}"
        try:
            answer = await self.models.ask_json("write", prompts.WRITE, user)
        except ModelCallFailed as e:
            raise RoundFailed(str(e)) from None
        allowed = {c.source.number for c in confirmed}
        synthesis = Synthesis.from_answer(answer, allowed)
        if synthesis is None:
            raise RoundFailed("the report writer returned no usable report")
        self.stats["uncited_sentences_dropped"] = synthesis.dropped
        if synthesis.dropped:
            await self._note(
                f"Dropped {synthesis.dropped} sentences of the findings that cited no verified "
                "source."
            )
        self.stats["model_calls"] = self.models.total_calls - self._calls_before
        data = ReportInput(
            topic=self.topic,
            question=self.question,
            synthesis=synthesis,
            sources=sources,
            claims=claims,
            method=dict(self.stats),
            steering=list(self.steering),
            stopped_early=self.stopped.is_set(),
        )
        path = write_report(self.config.report_dir, data)  # a few kilobytes
        tally = counts(claims)
        self.ctx.set_state(
            st.done(self.topic, path, len(sources), tally["confirmed"], tally["refuted"])
        )
        await self._say(spoken_report(data, path))
        return Outcome("done", self.topic, synthesis.summary, path, dict(self.stats))

    # -- dead ends (catalog 174, 178) ------------------------------------------------------------
    async def _dead_end_no_sources(self, sources: list[Source]) -> Outcome:
        self.ctx.set_state(st.no_sources(self.topic))
        if sources:
            why = "none of the sources I read had claims I could check against their text"
        elif self.stopped.is_set():
            why = "it was stopped before any source was read"
        else:
            why = "I could not read any usable sources"
        await self._say(
            f"The research on {self.topic} found nothing usable: {why}. I'm still listening: "
            "try rephrasing, or point me somewhere else."
        )
        return Outcome("no_sources", self.topic, stats=dict(self.stats))

    async def _dead_end_inconclusive(self, sources: list[Source], refuted: int) -> Outcome:
        self.ctx.set_state(st.inconclusive(self.topic, len(sources), refuted))
        await self._say(
            f"The research on {self.topic} was inconclusive: no claim held up under "
            "verification, so I wrote no report. I'm still listening for a narrower question."
        )
        return Outcome("inconclusive", self.topic, stats=dict(self.stats))

    # -- helpers ----------------------------------------------------------------------------------
    def _brief(self, *, include_steering: bool = True) -> str:
        """The question with everything the user added: clarifications, earlier
        findings, steering (which overrides the earlier scope)."""
        parts = [f"Research question: {self.question}"]
        if self.previous is not None:
            summary, _ = truncate_text(
                self.previous.summary, self.limits.summary_chars, "the earlier summary"
            )
            parts.append(
                f"Earlier research on {self.previous.topic!r} concluded: {summary}\n"
                "This is a follow-up: build on it, do not repeat it."
            )
        if self.transcript:
            parts.append("Clarifications from the user:\n" + "\n".join(self.transcript))
        if include_steering and self.steering:
            parts.append(
                "Steering from the user (overrides the earlier scope):\n"
                + "\n".join(f"- {s}" for s in self.steering)
            )
        return "\n\n".join(parts)

    async def _say(self, text: str) -> None:
        await self.ctx.send(text)

    async def _note(self, text: str) -> None:
        await self.ctx.send(text, silent=True)


def _interleave(lists: list[Any]) -> list[Any]:
    """Round-robin over the lists (``None`` counts as empty), deduplicated: search
    results by normalised URL, anything else by identity."""
    out: list[Any] = []
    seen: set[str] = set()
    rows = [lst or [] for lst in lists]
    for i in range(max((len(r) for r in rows), default=0)):
        for row in rows:
            if i < len(row):
                item = row[i]
                key = normalize_url(item.url) if isinstance(item, SearchResult) else str(id(item))
                if key not in seen:
                    seen.add(key)
                    out.append(item)
    return out
