"""MCP servers' tools mounted into the voice agent (``Session``/``Agent(mcp_servers=...)``).

Each server's tools become function tools named ``<server>__<tool>``: the model's
arguments are checked against the tool's JSON Schema (jsonschema) before the call;
a call that goes ``timeout`` seconds without a result or progress, or a server that
crashed, is a tool error the model reads, and the next call starts a new connection
(a new process for a stdio server); progress turns the call into a deferred tool
(``RunContext.update``). ``tools/list_changed`` refreshes a server's tools. Closing
stops every process a server was started as: nothing is left behind.

``mcp`` is imported when a server is first connected, not with this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TextIO

from ...limits import DEFAULT_LIMITS, Limits
from ...llm.tools import FunctionTool, ToolError
from ...tasks import TaskScope, done_within
from ...voice.parts import PartHost

logger = logging.getLogger("backline.mcp")

SEPARATOR = "__"
MAX_TOOL_NAME = 64
"""Model APIs take tool names of at most 64 characters (``<server>__<tool>``)."""
CLOSE_TIMEOUT = 10.0
STDERR_LINES = 5
"""The last lines of a server's stderr an error about it quotes (each cut at 200 chars)."""
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def mounted_name(server: str, tool: str) -> str:
    """``<server>__<tool>``, characters a model API refuses replaced by ``_``."""
    return f"{server}{SEPARATOR}{_INVALID.sub('_', tool)}"


class ServerConfig(Protocol):
    """One MCP server to mount, as the toolset uses it (``MCPServerStdio`` and
    ``MCPServerHTTP`` are two)."""

    @property
    def name(self) -> str: ...

    @property
    def where(self) -> str:
        """Where it runs, for messages (its command, or its URL)."""
        ...

    @property
    def timeout(self) -> float | None: ...

    def transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, TextIO | None]:
        """The ``mcp`` client transport that reaches it, entered on ``stack`` (and the
        file its stderr goes to, for a process)."""
        ...


class McpToolset:
    """The tools of some MCP servers, as function tools (see the module doc): a part
    of a session or of an agent (``backline.voice.parts.SessionPart``).

    ``await start(session, taken)`` connects every server (concurrently, each bounded
    by ``Limits.mcp_start_timeout``) and builds their tools; a tool name in ``taken``,
    or in two servers, fails the start with an error naming both, and nothing stays
    started. ``tools`` is the current list; the session is told
    (``tools_changed()``) when a server's ``tools/list_changed`` changed it, and
    ``on_change()`` is called. ``stop()`` then ``finish()`` (or ``aclose()``) stop
    them all (bounded).
    """

    def __init__(self, servers: Sequence[ServerConfig], *, owner: str) -> None:
        self.owner = owner
        self._session: PartHost | None = None
        self._servers = [_Server(self, config) for config in servers]
        self._taken: frozenset[str] = frozenset()
        self._scope = TaskScope(f"{owner} MCP servers")
        self.started = False
        self.on_change: Callable[[], None] | None = None

    @property
    def tools(self) -> list[FunctionTool]:
        return [tool for server in self._servers for tool in server.tools]

    @property
    def limits(self) -> Limits:
        return DEFAULT_LIMITS if self._session is None else self._session.limits

    def reserved_names(self) -> Mapping[str, str]:
        return {}

    async def start(self, session: PartHost | None = None, taken: Collection[str] = ()) -> None:
        if self.started:
            return
        self._session = session
        self._taken = frozenset(taken)
        self._scope = TaskScope(f"{self.owner} MCP servers")
        try:
            listed = await _all_or_none([server.open() for server in self._servers])
            built = [
                server.build(tools) for server, tools in zip(self._servers, listed, strict=True)
            ]
            self._check(dict(zip(self._servers, built, strict=True)))
        except BaseException:
            await self.aclose()
            raise
        for server, tools in zip(self._servers, built, strict=True):
            server.tools = tools
        self.started = True

    def _check(self, built: dict[_Server, list[FunctionTool]]) -> None:
        """Every name free: not taken, not in another server (raises ``ValueError``)."""
        owners: dict[str, str] = {}
        for server, tools in built.items():
            for tool in tools:
                if tool.name in self._taken:
                    raise ValueError(
                        f"{self.owner}: the tool {tool.name!r} of MCP server "
                        f"{server.config.name!r} has the name of another tool of this agent "
                        "(or a reserved one): rename the server in its configuration"
                    )
                if tool.name in owners:
                    raise ValueError(
                        f"{self.owner}: MCP servers {owners[tool.name]!r} and "
                        f"{server.config.name!r} both give a tool named {tool.name!r}"
                    )
                owners[tool.name] = server.config.name

    def refreshed(self, server: _Server, tools: list[FunctionTool]) -> bool:
        """A server's new list of tools, if it clashes with nothing (else it is refused)."""
        built = {s: (tools if s is server else s.tools) for s in self._servers}
        try:
            self._check(built)
        except ValueError as e:
            logger.warning("MCP server %r changed its tools; not taken: %s", server.config.name, e)
            return False
        server.tools = tools
        logger.info("MCP server %r now offers %d tools", server.config.name, len(tools))
        if self._session is not None:
            self._session.tools_changed()
        if self.on_change is not None:
            self.on_change()
        return True

    def spawn(self, coro: Any, name: str) -> None:
        """Run ``coro`` in a task this toolset owns (cancelled at close)."""
        if self._scope.closed:
            coro.close()
            return
        self._scope.create_task(coro, name=name)

    def stop(self) -> Sequence[TaskScope]:
        """Close begins: its own tasks (tool refreshes) are cancelled."""
        self._scope.cancel()
        return (self._scope,)

    def finish(self) -> Coroutine[Any, Any, None] | None:
        """Stop every server (each bounded); the tools go away."""
        if not any(server.connected for server in self._servers):
            self._closed()
            return None
        return self._stop_servers()

    async def _stop_servers(self) -> None:
        try:
            await asyncio.gather(*(server.aclose() for server in self._servers))
        finally:
            self._closed()

    def _closed(self) -> None:
        for server in self._servers:
            server.tools = []
        self.started = False

    async def aclose(self) -> None:
        """``stop()`` and ``finish()``: every server stopped (each bounded)."""
        await self._scope.aclose()
        pending = self.finish()
        if pending is not None:
            await pending


class _Server:
    """One mounted server: its tools and its (re)connection."""

    def __init__(self, toolset: McpToolset, config: ServerConfig) -> None:
        self.toolset = toolset
        self.config = config
        self.tools: list[FunctionTool] = []
        self._connection: _Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._connection is not None

    @property
    def timeout(self) -> float:
        return self.config.timeout or self.toolset.limits.mcp_call_timeout

    async def open(self) -> list[Any]:
        """Connect and list the tools (bounded)."""
        limit = self.toolset.limits.mcp_start_timeout
        try:
            async with asyncio.timeout(limit):
                connection = await self._connect()
                return await connection.list_tools()
        except TimeoutError:
            said = self._connection.last_words() if self._connection is not None else ""
            raise RuntimeError(
                f"{self.toolset.owner}: MCP server {self.config.name!r} ({self.config.where}) "
                f"did not start within {limit:g} s (Limits.mcp_start_timeout)"
                + (f"; it said: {said}" if said else "")
            ) from None

    async def _connect(self) -> _Connection:
        async with self._lock:
            connection = self._connection
            if connection is not None and not connection.broken:
                return connection
            if connection is not None:
                await connection.close()
            connection = _Connection(self.config, self._tools_changed)
            self._connection = connection
            try:
                await connection.open()
            except Exception as e:
                raise RuntimeError(
                    f"{self.toolset.owner}: MCP server {self.config.name!r} "
                    f"({self.config.where}) could not be started: {connection.describe(e)}"
                ) from None
            return connection

    def build(self, listed: list[Any]) -> list[FunctionTool]:
        return [self._function_tool(tool) for tool in listed]

    def _function_tool(self, tool: Any) -> FunctionTool:
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        name = mounted_name(self.config.name, tool.name)
        where = f"{self.toolset.owner}: the tool {tool.name!r} of MCP server {self.config.name!r}"
        if len(name) > MAX_TOOL_NAME:
            raise ValueError(
                f"{where} would be named {name!r}, longer than {MAX_TOOL_NAME} characters: "
                "give the server a shorter name"
            )
        schema = dict(tool.input_schema or {})
        schema.pop("$schema", None)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as e:
            raise ValueError(f"{where} has an invalid input schema: {e.message}") from None
        mcp_name = tool.name
        description = (
            tool.description or ""
        ).strip() or f"{tool.name} (MCP server {self.config.name})."

        async def call(arguments: dict[str, Any], run_ctx: Any) -> str:
            return await self.call(mcp_name, arguments, run_ctx)

        return FunctionTool.from_schema(call, name=name, description=description, parameters=schema)

    async def call(self, tool: str, arguments: dict[str, Any], run_ctx: Any) -> str:
        """Call ``tool`` (arguments already checked); progress goes to ``run_ctx.update``."""
        what = f"the tool {tool!r} of MCP server {self.config.name!r}"
        try:
            connection = await self._connect()
        except RuntimeError as e:
            raise ToolError(f"{e}. Try again later, or do without it.") from None
        updates: asyncio.Queue[str] = asyncio.Queue()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.put_nowait(message or _fraction(progress, total))

        # The call and the wait for its next progress, raced against the timeout; both
        # end with this method (a failed call is its result, read below).
        scope = TaskScope(f"call of {what}", log_failures=False)
        call = scope.create_task(connection.call(tool, arguments, on_progress), name=what)
        try:
            while True:
                update = scope.create_task(updates.get(), name=f"progress of {what}")
                done, _ = await asyncio.wait(
                    {call, update}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if update in done:
                    if run_ctx is not None:
                        await run_ctx.update(update.result())
                    if call not in done:
                        continue
                update.cancel()
                if call in done:
                    break
                connection.broken = True  # a hung call: the next one starts over
                raise ToolError(
                    f"{what} did not answer within {self.timeout:g} s. It was stopped; the "
                    "next call starts the server again."
                )
        finally:
            await scope.aclose(CLOSE_TIMEOUT)  # a call still running is stopped
        try:
            result = call.result()
        except ToolError:
            raise
        except Exception as e:
            if connection.closed_under_us(e):
                connection.broken = True
                raise ToolError(
                    f"{what} failed: the server stopped ({connection.describe(e)}). The next "
                    "call starts it again."
                ) from None
            raise ToolError(f"{what} failed: {connection.describe(e)}") from None
        text = _result_text(result)
        if getattr(result, "is_error", False):
            raise ToolError(text or f"{what} failed (it gave no reason).")
        return text

    def _tools_changed(self) -> None:
        self.toolset.spawn(self._refresh(), f"refresh MCP server {self.config.name}")

    async def _refresh(self) -> None:
        try:
            connection = await self._connect()
            listed = await connection.list_tools()
            tools = self.build(listed)
        except Exception as e:
            logger.warning("MCP server %r: refreshing its tools failed: %s", self.config.name, e)
            return
        self.toolset.refreshed(self, tools)

    async def aclose(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()


class _Connection:
    """One ``mcp.Client``, entered and exited by a task of its own (anyio's scopes
    require it); other tasks call through it. ``broken``: start a new one."""

    def __init__(self, config: ServerConfig, on_tools_changed: Callable[[], None]) -> None:
        self.config = config
        self.broken = False
        self._on_tools_changed = on_tools_changed
        self._client: Any = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._scope = TaskScope(f"MCP server {config.name}")  # the holder task
        self._task: asyncio.Task[None] | None = None
        self._stderr: TextIO | None = None
        self._last_words = ""  # the stderr tail, kept when its file closes

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._task = self._scope.create_task(self._hold(), name=f"MCP server {self.config.name}")
        try:
            await asyncio.shield(self._ready)
        except BaseException:
            await self.close()
            raise

    async def _hold(self) -> None:
        assert self._ready is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                self._client = await stack.enter_async_context(self._client_for(stack))
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as e:
            self.broken = True
            if not self._ready.done():
                if isinstance(e, asyncio.CancelledError):
                    self._ready.cancel()  # (an exception set here would never be read)
                else:
                    self._ready.set_exception(_unwrap(e))
            elif not isinstance(e, asyncio.CancelledError):
                logger.debug("MCP server %r connection ended", self.config.name, exc_info=True)
            if isinstance(e, asyncio.CancelledError):
                raise

    def _client_for(self, stack: contextlib.AsyncExitStack) -> Any:
        from mcp import Client

        transport, self._stderr = self.config.transport(stack)
        # Exited after the client (so the process is stopped) and before the file is
        # closed: a server that failed to start is quoted in the error it causes.
        stack.callback(self._keep_last_words)
        # The initialize handshake: every MCP server speaks it, and its tools/list_changed
        # notifications reach the message handler (2026-07-28 needs a subscription).
        return Client(transport, message_handler=self._on_message, mode="legacy")

    async def _on_message(self, message: Any) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._on_tools_changed()  # not here: this runs in the client's receive loop

    async def list_tools(self) -> list[Any]:
        tools: list[Any] = []
        cursor = None
        while True:
            page = await self._client.list_tools(cursor=cursor, cache_mode="bypass")
            tools.extend(page.tools)
            cursor = getattr(page, "next_cursor", None)
            if not cursor:
                return tools

    async def call(self, tool: str, arguments: dict[str, Any], on_progress: Any) -> Any:
        return await self._client.call_tool(tool, arguments, progress_callback=on_progress)

    def closed_under_us(self, error: BaseException) -> bool:
        """Whether ``error`` means the connection is gone (a crash, not a tool's error)."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        error = _unwrap(error)
        if isinstance(error, MCPError):
            return error.error.code == CONNECTION_CLOSED
        return True

    def describe(self, error: BaseException) -> str:
        error = _unwrap(error)
        text = " ".join(str(error).split()) or type(error).__name__
        tail = self.last_words()
        return f"{text}; it said: {tail}" if tail else text

    def last_words(self) -> str:
        """The last lines the server wrote to stderr (a process's), joined with `` / ``;
        kept once the connection closed."""
        return self._stderr_tail()

    def _stderr_tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return self._last_words
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0)
            lines = [line.strip() for line in self._stderr.read().splitlines() if line.strip()]
            return " / ".join(line[:200] for line in lines[-STDERR_LINES:])
        return self._last_words

    def _keep_last_words(self) -> None:
        self._last_words = self._stderr_tail()

    async def close(self) -> None:
        """End the client (a stdio server's process is stopped: stdin closed, then its
        process group terminated, each step bounded by the ``mcp`` package)."""
        self.broken = True
        self._stop.set()
        try:
            if self._task is not None:
                if self._ready is not None and not self._ready.done():
                    self._task.cancel()  # still starting (a start that timed out): stop it now
                await done_within(self._task, CLOSE_TIMEOUT)  # the client exits its context
        finally:
            # Still running (a server that never answered, or this close was cancelled):
            # cut it (the mcp package stops a stdio server's process, shielded).
            await self._scope.aclose(CLOSE_TIMEOUT)


async def _all_or_none(work: list[Coroutine[Any, Any, Any]]) -> list[Any]:
    """Run ``work`` concurrently; at the first failure cancel the rest (and wait for
    them), then raise it (the first failed in ``work``'s order, not a group). Nothing is
    left running either way."""
    tasks: list[asyncio.Task[Any]] = []
    failed: BaseException | None = None
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(w) for w in work]
    except BaseExceptionGroup as errors:
        failed = next(
            (t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception()),
            errors,
        )
    if failed is not None:
        raise failed
    return [task.result() for task in tasks]


def _unwrap(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def _fraction(progress: float, total: float | None) -> str:
    if total:
        return f"{progress:g} of {total:g}"
    return f"progress {progress:g}"


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            parts.append(f"[link {block.uri}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False, sort_keys=True)
    return "\n".join(parts)
