"""Offline research: a corpus web server on loopback and scripted research models.

- ``CorpusServer``: serves HTML pages on ``127.0.0.1`` with a robots.txt and a
  search endpoint in SearXNG's JSON format (``/search?q=...&format=json``), so the
  real ``searxng`` provider, fetcher and extractor run against it. Routes can 404,
  hang, or send more than the size cap.
- ``ScriptedResearcher``: answers every research stage from the request alone
  (claims quoted verbatim from the source text, votes, a cited synthesis), with
  overrides per stage. Use it as a ``ScriptedLLM`` (``.llm()``) or as a
  ``FakeAnthropicServer`` script (``.anthropic``).

Used by the plugin's tests, the example (``make demo-research``) and the benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from html import escape, unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

from backline.tasks import TaskScope
from backline.testing import LLMRequest, ScriptedLLM

from .evidence import unnamed_subject
from .prompts import stage_of

# -- the corpus server ---------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusPage:
    """One page: its path on the server, title and paragraphs."""

    path: str
    title: str
    paragraphs: tuple[str, ...]

    def html(self) -> str:
        body = "\n".join(f"<p>{escape(p)}</p>" for p in self.paragraphs)
        return (
            "<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{escape(self.title)}</title></head><body>"
            "<nav><a href='/'>Home</a> | <a href='/about'>About</a></nav>"
            f"<article><h1>{escape(self.title)}</h1>\n{body}</article>"
            "<footer>Copyright the corpus. All rights reserved.</footer></body></html>"
        )

    @property
    def text(self) -> str:
        return self.title + "\n" + "\n".join(self.paragraphs)


HANG = "hang"
"""A route behavior: accept the request and never answer (until the server stops)."""
HUGE = "huge"
"""A route behavior: stream an endless-looking body with no Content-Length."""


@dataclass(frozen=True)
class Reply:
    """A route's whole answer: status, content type, body (text or bytes) and extra
    headers (a ``Location``, a ``Content-Encoding`` ...). ``hang_after``: send that
    many bytes of the body, then nothing more (until the server stops)."""

    status: int = 200
    content_type: str = "text/html"
    body: bytes | str = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    hang_after: int | None = None


def redirect(location: str, status: int = 302) -> Reply:
    """A route that redirects to ``location``."""
    return Reply(status, "text/html", "", {"Location": location})


@dataclass
class ServedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


_WORD = re.compile(r"[a-z0-9]+")


class CorpusServer:
    """A small web on loopback: ``pages``, ``robots`` (robots.txt text; ``None``: 404),
    ``routes`` (path -> ``HANG``, ``HUGE``, an HTTP status, ``(status, type, body)`` or
    a ``Reply``),
    and ``/search`` in SearXNG's JSON format. ``search_results`` pins a query's
    results: ``{"query words": ["/path", ...]}``; other queries are ranked by the
    words they share with each page. Records ``requests``. ``async with`` it."""

    def __init__(
        self,
        pages: Iterable[CorpusPage],
        *,
        robots: str | None = "User-agent: *\nAllow: /\n",
        routes: Mapping[str, Any] | None = None,
        search_results: Mapping[str, list[str]] | None = None,
    ) -> None:
        self.pages = {p.path: p for p in pages}
        self.robots = robots
        self.routes: dict[str, Any] = dict(routes or {})
        self.search_results = dict(search_results or {})
        self.requests: list[ServedRequest] = []
        self._server: asyncio.Server | None = None
        self._handlers = TaskScope("corpus server connections")  # cancelled at aclose()
        self._arrived = asyncio.Condition()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def page_url(self, path: str) -> str:
        return self.url + path

    def requested(self, path: str) -> int:
        """How many requests reached ``path``."""
        return sum(1 for r in self.requests if r.path == path)

    async def wait_for_request(self, path: str, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``count`` requests have reached ``path`` (``TimeoutError`` after
        ``timeout`` seconds)."""
        async with asyncio.timeout(timeout), self._arrived:
            await self._arrived.wait_for(lambda: self.requested(path) >= count)

    async def __aenter__(self) -> CorpusServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._handlers.aclose()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._handlers.closed:  # a connection the closing server accepted last
            writer.close()
            return
        self._handlers.create_task(self._handle(reader, writer), name="corpus server connection")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            parts = urlsplit(target)
            self.requests.append(ServedRequest(method, parts.path, parse_qs(parts.query), headers))
            async with self._arrived:
                self._arrived.notify_all()
            await self._respond(writer, parts.path, parse_qs(parts.query))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _respond(
        self, writer: asyncio.StreamWriter, path: str, query: dict[str, list[str]]
    ) -> None:
        route = self.routes.get(path)
        if route == HANG:
            await asyncio.Event().wait()  # cancelled when the server stops
        if route == HUGE:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n")
            chunk = b"<p>" + b"filler " * 9000 + b"</p>\n"
            for _ in range(2000):  # about 126 MB, far over any cap; the reader hangs up
                writer.write(chunk)
                await writer.drain()
            return
        if isinstance(route, Reply):
            await _reply(writer, route)
        elif isinstance(route, int):
            await _send(writer, route, "text/plain", f"status {route}\n")
        elif isinstance(route, tuple):
            await _send(writer, *route)
        elif path == "/robots.txt":
            if self.robots is None:
                await _send(writer, 404, "text/plain", "no robots.txt\n")
            else:
                await _send(writer, 200, "text/plain", self.robots)
        elif path == "/search":
            await _send(writer, 200, "application/json", json.dumps(self._search(query)))
        elif path in self.pages:
            await _send(writer, 200, "text/html; charset=utf-8", self.pages[path].html())
        else:
            await _send(writer, 404, "text/html", "<html><body>Not found</body></html>")

    def _search(self, query: dict[str, list[str]]) -> dict[str, Any]:
        """A SearXNG ``format=json`` answer."""
        q = (query.get("q") or [""])[0]
        pinned = self.search_results.get(q)
        if pinned is not None:
            paths = pinned
        else:
            terms = set(_WORD.findall(q.lower()))
            scored = []
            for path, candidate in self.pages.items():
                words = set(_WORD.findall(candidate.text.lower()))
                score = len(terms & words)
                if score:
                    scored.append((-score, path))
            paths = [p for _, p in sorted(scored)]
        results = []
        for rank, path in enumerate(paths, start=1):
            page = self.pages.get(path)
            title = page.title if page else path
            snippet = page.paragraphs[0][:200] if page and page.paragraphs else ""
            results.append(
                {
                    "url": self.page_url(path),
                    "title": title,
                    "content": snippet,
                    "engine": "corpus",
                    "engines": ["corpus"],
                    "positions": [rank],
                    "score": 1.0 / rank,
                    "category": "general",
                }
            )
        return {
            "query": q,
            "number_of_results": len(results),
            "results": results,
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }


async def _send(writer: asyncio.StreamWriter, status: int, content_type: str, body: str) -> None:
    await _reply(writer, Reply(status, content_type, body))


async def _reply(writer: asyncio.StreamWriter, reply: Reply) -> None:
    data = reply.body.encode() if isinstance(reply.body, str) else reply.body
    reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}.get(reply.status, "Status")
    head = {
        "Content-Type": reply.content_type,
        "Content-Length": str(len(data)),
        "Connection": "close",
        **reply.headers,
    }
    lines = "".join(f"{name}: {value}\r\n" for name, value in head.items())
    writer.write(f"HTTP/1.1 {reply.status} {reason}\r\n{lines}\r\n".encode())
    if reply.hang_after is None:
        writer.write(data)
        await writer.drain()
        return
    writer.write(data[: reply.hang_after])
    await writer.drain()
    await asyncio.Event().wait()  # cancelled when the server stops


# -- the scripted research models ------------------------------------------------------------

StageAnswer = Callable[[str], Any]
"""``answer(user_text) -> JSON-compatible value or text``, for one stage."""

_SOURCE = re.compile(r"^Source \[(\d+)\]: (.*)$", re.MULTILINE)
_CLAIM_LINE = re.compile(r"^- (.*) \[(\d+)\] \(passage: ", re.MULTILINE)
_VOTE_CLAIM = re.compile(r"^Claim: (.*)$", re.MULTILINE)
_SENTENCES = re.compile(r"[^.!?\n]+[.!?]")


@dataclass
class ScriptedResearcher:
    """Plays every research model from the request text alone.

    - clarify: ``{"ready": true}`` (or ``clarify``'s answer);
    - plan: ``angles`` (label, query) pairs (default: the question as one angle);
    - extract: up to 2 sentences of the source that contain a digit, quoted verbatim,
      each claim naming its subject (a sentence that starts with a pronoun is
      claimed under the source's title) (``claims`` maps a source title to its
      answer, to script a page's claims);
    - verify: ``supports``, or ``refutes`` for a claim containing any of ``refute``;
    - write: one finding per verified claim, citing its source.

    Every override is a JSON-compatible value, or a callable given the user text.
    ``calls`` counts requests per stage; ``requests`` keeps ``(stage, user_text)``.
    """

    angles: list[tuple[str, str]] | None = None
    clarify: Any = None
    plan: Any = None
    claims: dict[str, Any] = field(default_factory=dict)
    refute: tuple[str, ...] = ()
    write: Any = None
    requests: list[tuple[str, str]] = field(default_factory=list)

    @property
    def calls(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for stage, _ in self.requests:
            out[stage] = out.get(stage, 0) + 1
        return out

    def user_texts(self, stage: str) -> list[str]:
        return [text for s, text in self.requests if s == stage]

    def answer(self, system: str, user: str) -> str:
        stage = stage_of(system)
        if stage is None:
            raise ValueError(f"not a research request: {system[:80]!r}")
        self.requests.append((stage, user))
        value = getattr(self, f"_{stage}")(user)
        return value if isinstance(value, str) else json.dumps(value)

    def _custom(self, override: Any, user: str) -> Any:
        return override(user) if callable(override) else override

    def _clarify(self, user: str) -> Any:
        if self.clarify is not None:
            return self._custom(self.clarify, user)
        return {"ready": True}

    def _plan(self, user: str) -> Any:
        if self.plan is not None:
            return self._custom(self.plan, user)
        question = re.search(r"Research question: (.*)", user)
        pairs = self.angles or [("the question", question.group(1) if question else "research")]
        return {"angles": [{"label": label, "query": query} for label, query in pairs]}

    def _extract(self, user: str) -> Any:
        found = _SOURCE.search(user)
        title = found.group(2).strip() if found else ""
        if title in self.claims:
            return self._custom(self.claims[title], user)
        body = user[found.end() :] if found else user
        body = body.split("\n\n", 1)[-1]
        picked = [s.strip() for s in _SENTENCES.findall(body) if re.search(r"\d", s)][:2]
        return {"claims": [{"claim": _standalone(s, title), "quote": s} for s in picked]}

    def _verify(self, user: str) -> Any:
        found = _VOTE_CLAIM.search(user)
        claim = found.group(1) if found else ""
        refuted = any(word in claim for word in self.refute)
        return {
            "verdict": "refutes" if refuted else "supports",
            "reason": "scripted review",
        }

    def _write(self, user: str) -> Any:
        if self.write is not None:
            return self._custom(self.write, user)
        findings = [
            {"text": f"{text}. [{number}]", "confidence": "high"}
            for text, number in _CLAIM_LINE.findall(user)
        ]
        return {
            "summary": f"The sources agree on {len(findings)} verified points.",
            "findings": findings,
            "caveats": ["The corpus is small."],
            "open_questions": ["What do newer sources say?"],
        }

    # -- as models --------------------------------------------------------------------------
    def llm(self) -> ScriptedLLM:
        """A ``ScriptedLLM`` answering every stage."""

        def respond(request: LLMRequest) -> str:
            system = "\n".join(request.instructions)
            last = request.last_message
            return self.answer(system, last.content if last is not None else "")

        return ScriptedLLM(respond)

    def anthropic(self, request: Any) -> Any:
        """A ``FakeAnthropicServer`` script (``request -> response``) answering every stage."""
        from backline.testing import fake_anthropic as fa

        return fa.text(self.answer(request.system, request.last_user_text))


def _standalone(sentence: str, title: str) -> str:
    """The claim a sentence makes, naming its subject as the extraction prompt asks
    ("It runs ..." on "Paris to Berlin by sleeper": "Paris to Berlin by sleeper: it runs ...")."""
    claim = sentence.rstrip(".")
    if unnamed_subject(claim) and title:
        return f"{title}: {claim[0].lower()}{claim[1:]}"
    return claim


def anthropic_voice_agent(request: Any) -> Any:
    """A ``FakeAnthropicServer`` script for the voice agent: it forwards each user line
    to ``deep_research``, reads the state when asked ``status?``, and relays updates."""
    from backline.testing import fake_anthropic as fa

    if request.tool_results:
        content = request.tool_results[0].get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if "delivered" in text.lower():
            return fa.text("I've passed that to the research.")
        state = json.loads(text) if text.startswith("{") else {}
        return fa.text(f"The research is {state.get('phase', text)}.")
    last = request.last_user_text
    if not request.tools:  # background updates to relay (tools are off then)
        updates = request.background_updates(after="Research says:")
        return fa.text("Research says: " + " ".join(updates))  # all of them
    line = last.rsplit("\n", 1)[-1]
    if line == "status?":
        return fa.tool_calls(("backline_state", {"background_session_id": "deep_research"}))
    return fa.tool_calls(
        ("backline_send", {"background_session_id": "deep_research", "content": line})
    )


def page_text(html: str) -> str:
    """The visible text of simple HTML (for assertions)."""
    return unescape(re.sub(r"<[^>]+>", " ", html))
