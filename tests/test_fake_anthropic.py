"""FakeAnthropicServer: raw HTTP, the real anthropic client, errors, records, threads."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types import MessageParam

from backline.llm import LLMError
from backline.testing import error as scripted_error
from backline.testing import fake_anthropic as fa
from backline.testing import text as scripted_text
from backline.testing import tool_calls as scripted_tool_calls
from backline.testing.fake_anthropic import AnthropicRequest, FakeAnthropicServer

USER_HI: list[MessageParam] = [{"role": "user", "content": "hi"}]


def post(
    server: FakeAnthropicServer, body: dict[str, Any], path: str = "/v1/messages"
) -> tuple[int, dict[str, str], Any]:
    """POST JSON with urllib; returns (status, lower-case headers, parsed body)."""
    req = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-api-key": "test-key"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, headers, raw = resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        status, headers, raw = e.code, dict(e.headers), e.read()
    return status, {k.lower(): v for k, v in headers.items()}, json.loads(raw) if raw else None


def body(**extra: Any) -> dict[str, Any]:
    return {"model": "claude-test", "max_tokens": 64, "messages": USER_HI, **extra}


def sse_events(server: FakeAnthropicServer, request_body: dict[str, Any]) -> list[dict[str, Any]]:
    """Stream with raw httpx2 and parse the server-sent events."""
    events: list[dict[str, Any]] = []
    with (
        httpx2.Client(timeout=10) as client,
        client.stream("POST", server.url + "/v1/messages", json=request_body) as resp,
    ):
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in resp.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: ") :]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
                assert data["type"] == name
                events.append(data)
    return events


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as s:
        yield s


@pytest.fixture
def client(server: FakeAnthropicServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0) as c:
        yield c


# -- raw HTTP ------------------------------------------------------------------------


def test_non_streaming_text_over_urllib(server: FakeAnthropicServer) -> None:
    server.push(fa.text("Hello there."))
    status, headers, message = post(server, body())
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert headers["request-id"].startswith("req_")
    assert message["type"] == "message"
    assert message["role"] == "assistant"
    assert message["model"] == "claude-test"
    assert message["content"] == [{"type": "text", "text": "Hello there."}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["input_tokens"] > 0
    assert message["usage"]["output_tokens"] > 0


def test_streamed_text_event_sequence(server: FakeAnthropicServer) -> None:
    server.push(fa.text("one two three", usage={"input_tokens": 7, "output_tokens": 3}))
    events = sse_events(server, body(stream=True))
    kinds = [e["type"] for e in events]
    assert kinds == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0]["message"]["usage"]["input_tokens"] == 7
    assert [e["delta"]["text"] for e in events[3:6]] == ["one ", "two ", "three"]
    assert events[7]["delta"]["stop_reason"] == "end_turn"
    assert events[7]["usage"]["output_tokens"] == 3


def test_text_chunk_size(server: FakeAnthropicServer) -> None:
    server.push(fa.text("abcdefg", chunk_size=3))
    events = sse_events(server, body(stream=True))
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert deltas == ["abc", "def", "g"]


def test_streamed_tool_calls_split_json(server: FakeAnthropicServer) -> None:
    server.push(
        fa.tool_calls(
            ("get_weather", {"city": "Paris", "days": 3}),
            ("get_time", {"zone": "CET"}, "toolu_mine"),
            text="Let me check.",
            json_chunk_size=4,
        )
    )
    events = sse_events(server, body(stream=True))
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == ["text", "tool_use", "tool_use"]
    assert [s["content_block"].get("id") for s in starts[1:]] == ["toolu_fake0001", "toolu_mine"]
    for block in starts[1:]:
        deltas = [
            e["delta"]
            for e in events
            if e["type"] == "content_block_delta" and e["index"] == block["index"]
        ]
        assert {d["type"] for d in deltas} == {"input_json_delta"}
        pieces = [d["partial_json"] for d in deltas]
        assert len([p for p in pieces if p]) > 2  # really split
        assert json.loads("".join(pieces)) in ({"city": "Paris", "days": 3}, {"zone": "CET"})
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use"


def test_ping_and_stop_reason_max_tokens(server: FakeAnthropicServer) -> None:
    server.push(fa.text("cut", stop_reason="max_tokens"))
    events = sse_events(server, body(stream=True))
    assert {"type": "ping"} in events
    assert events[-2]["delta"]["stop_reason"] == "max_tokens"


# -- the real anthropic client --------------------------------------------------------


def test_anthropic_client_sync(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    server.push(
        "plain string reply",
        fa.tool_calls(("lookup", {"q": "x"}), ("lookup", {"q": "y"})),
    )
    message = client.messages.create(model="claude-test", max_tokens=64, messages=USER_HI)
    assert message.content[0].type == "text"
    assert message.content[0].text == "plain string reply"
    with client.messages.stream(model="claude-test", max_tokens=64, messages=USER_HI) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    uses = [b for b in final.content if b.type == "tool_use"]
    assert [(u.id, u.name, u.input) for u in uses] == [
        ("toolu_fake0001", "lookup", {"q": "x"}),
        ("toolu_fake0002", "lookup", {"q": "y"}),
    ]


async def test_anthropic_client_async(server: FakeAnthropicServer) -> None:
    server.push(fa.text("async hello world"))
    async with (
        anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0) as c,
        c.messages.stream(model="m", max_tokens=8, messages=USER_HI) as stream,
    ):
        pieces = [t async for t in stream.text_stream]
    assert pieces == ["async ", "hello ", "world"]
    assert server.requests[0].stream


@pytest.mark.parametrize(
    ("status", "kind", "exc_type"),
    [
        (529, "overloaded_error", anthropic.OverloadedError),
        (429, "rate_limit_error", anthropic.RateLimitError),
        (401, "authentication_error", anthropic.AuthenticationError),
        (400, "invalid_request_error", anthropic.BadRequestError),
        (500, "api_error", anthropic.InternalServerError),
    ],
)
def test_error_statuses(
    server: FakeAnthropicServer,
    client: anthropic.Anthropic,
    status: int,
    kind: str,
    exc_type: type[Exception],
) -> None:
    server.push(fa.error(status, message=f"boom {status}"), fa.error(status))
    with pytest.raises(exc_type) as info:
        client.messages.create(model="m", max_tokens=8, messages=USER_HI)
    assert isinstance(info.value, anthropic.APIStatusError)
    assert info.value.status_code == status
    assert info.value.type == kind
    assert info.value.api_message == f"boom {status}"
    got_status, headers, err = post(server, body())
    assert got_status == status
    assert err["type"] == "error"
    assert err["error"]["type"] == kind
    assert err["error"]["message"]  # a default message
    assert err["request_id"] == headers["request-id"]


def test_error_headers_and_custom_type(server: FakeAnthropicServer) -> None:
    server.push(fa.error(429, headers={"retry-after": "2"}), fa.error(400, "not_found_error"))
    status, headers, _ = post(server, body())
    assert (status, headers["retry-after"]) == (429, "2")
    status, _, err = post(server, body())
    assert (status, err["error"]["type"]) == (400, "not_found_error")
    with pytest.raises(ValueError, match=">= 400"):
        fa.error(200)


def test_stream_error_event(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    server.push(fa.stream_error(text="partial answer"), fa.stream_error("api_error", "oops"))
    received: list[str] = []

    def consume() -> None:
        with client.messages.stream(model="m", max_tokens=8, messages=USER_HI) as stream:
            received.extend(stream.text_stream)

    with pytest.raises(anthropic.APIStatusError) as info:
        consume()
    assert received == ["partial ", "answer"]
    assert info.value.type == "overloaded_error"
    status, _, err = post(server, body())  # not streaming: the matching HTTP error
    assert (status, err["error"]) == (500, {"type": "api_error", "message": "oops"})


def test_exhausted_script_is_a_clear_500(server: FakeAnthropicServer) -> None:
    status, headers, err = post(server, body())
    assert status == 500
    assert headers["x-should-retry"] == "false"
    assert err["error"]["type"] == "api_error"
    assert "no response scripted for request #1" in err["error"]["message"]
    assert "'hi'" in err["error"]["message"]


# -- scripting -------------------------------------------------------------------------


def test_callable_script_sees_the_request() -> None:
    seen: list[AnthropicRequest] = []

    def respond(request: AnthropicRequest) -> fa.AnthropicResponse | str:
        seen.append(request)
        if request.tool_results:
            return f"result was {request.tool_results[0]['content']}"
        return fa.tool_calls(("echo", {"text": request.last_user_text}))

    with FakeAnthropicServer(respond) as server:
        tools = [{"name": "echo", "description": "Echo.", "input_schema": {"type": "object"}}]
        system = [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Really."}]
        _, _, first = post(server, body(system=system, tools=tools))
        use = first["content"][0]
        assert (use["name"], use["input"]) == ("echo", {"text": "hi"})
        messages = [
            *USER_HI,
            {"role": "assistant", "content": [use]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "hi"}],
            },
        ]
        _, _, second = post(server, body(messages=messages, tools=tools))
    assert second["content"][0]["text"] == "result was hi"
    assert seen[0].system == "You are terse.\nReally."
    assert seen[0].tool_names == ["echo"]
    assert seen[0].model == "claude-test"
    assert seen[0].max_tokens == 64
    assert not seen[0].stream
    assert seen[1].last_user_text == "hi"
    assert [r.scripted for r in server.requests] == [True, True]


def test_script_callable_errors_are_reported() -> None:
    def broken(request: AnthropicRequest) -> str:
        raise RuntimeError("script bug")

    with FakeAnthropicServer(broken) as server:
        status, _, err = post(server, body())
    assert status == 500
    assert "script bug" in err["error"]["message"]
    assert [type(e) for e in server.script_errors] == [RuntimeError]


def test_scripted_llm_responses_are_accepted(server: FakeAnthropicServer) -> None:
    server.push(scripted_text("from scripted llm"), scripted_tool_calls(("f", {"a": 1}, "c1")))
    assert post(server, body())[2]["content"] == [{"type": "text", "text": "from scripted llm"}]
    tool_use = post(server, body())[2]["content"][0]
    assert (tool_use["id"], tool_use["name"], tool_use["input"]) == ("c1", "f", {"a": 1})


def test_a_single_response_is_a_whole_script() -> None:
    with FakeAnthropicServer("only") as server:
        assert post(server, body())[2]["content"][0]["text"] == "only"
        assert post(server, body())[0] == 500


def test_scripted_llm_errors_become_http_errors(server: FakeAnthropicServer) -> None:
    server.push(scripted_error(LLMError("slow down", status=429)), scripted_error(ValueError("x")))
    status, _, err = post(server, body())
    assert (status, err["error"]) == (429, {"type": "rate_limit_error", "message": "slow down"})
    assert post(server, body())[0] == 500
    server.push(42)  # type: ignore[arg-type]
    status, _, err = post(server, body())
    assert status == 500
    assert "script item must be" in err["error"]["message"]
    assert [type(e) for e in server.script_errors] == [TypeError]


def test_a_scripted_error_after_text_is_an_error_event_after_that_text(
    server: FakeAnthropicServer,
) -> None:
    server.push(scripted_error(LLMError("busy", status=529), text="Partial words"))
    events = sse_events(server, body(stream=True))
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    assert deltas == ["Partial ", "words"]
    assert events[-1]["error"] == {"type": "overloaded_error", "message": "busy"}


def test_last_user_text_skips_system_reminders_and_tool_results() -> None:
    request = AnthropicRequest(
        index=1,
        method="POST",
        path="/v1/messages",
        query="",
        headers={},
        body={
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "<system-reminder>\nx\n</system-reminder>"},
                        {"type": "text", "text": "write it"},
                    ],
                },
                {"role": "system", "content": "context"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            ]
        },
    )
    assert request.last_user_text == "write it"
    assert request.tool_results == [{"type": "tool_result", "tool_use_id": "t"}]
    assert request.system == ""
    assert request.tools == []


def test_background_updates_are_found_since_the_last_relay() -> None:
    def update(text: str) -> str:
        return f"Background session `cc` sent an update:\n{text}"

    def said(role: str, *texts: str) -> dict[str, object]:
        return {"role": role, "content": [{"type": "text", "text": t} for t in texts]}

    messages = [
        said("user", update("old")),
        said("assistant", "Relay: old"),
        said("user", update("first") + "\n" + update("second\nline two")),
        said("assistant", "I passed that on."),  # the reply the update landed in
        said("user", update("third"), "Continue."),
    ]
    request = AnthropicRequest(1, "POST", "/v1/messages", "", {}, {"messages": messages})
    assert request.background_updates() == ["old", "first", "second\nline two", "third"]
    assert request.background_updates(after="Relay:") == ["first", "second\nline two", "third"]


# -- records, endpoints, validation ------------------------------------------------


def test_requests_are_recorded(server: FakeAnthropicServer, client: anthropic.Anthropic) -> None:
    server.push("one")
    client.messages.create(
        model="claude-test", max_tokens=16, messages=USER_HI, extra_query={"beta": "true"}
    )
    count = client.messages.count_tokens(model="claude-test", messages=USER_HI)
    assert count.input_tokens > 0
    models = client.models.list()
    assert "claude-haiku-5-5" in [m.id for m in models.data]
    assert client.models.retrieve("claude-x").id == "claude-x"
    with httpx2.Client() as raw:
        assert raw.head(server.url + "/api/hello").status_code == 200
        missing = raw.get(server.url + "/v2/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"

    requests = server.requests
    assert [(r.method, r.path) for r in requests] == [
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/models"),
        ("GET", "/v1/models/claude-x"),
        ("HEAD", "/api/hello"),
        ("GET", "/v2/nothing"),
    ]
    first = requests[0]
    assert first.query == "beta=true"
    assert first.api_key == "test-key"  # sent as "authorization: Bearer test-key"
    assert first.headers["anthropic-version"]
    assert first.body == {"model": "claude-test", "max_tokens": 16, "messages": USER_HI}
    assert first.completed
    assert not first.disconnected
    assert [r.scripted for r in requests] == [True, False, False, False, False, False]
    assert server.scripted_requests == [first]
    assert [r.index for r in requests] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "user", "content": "  "}], "non-whitespace text"),
        ([{"role": "assistant", "content": "hi"}], "first message"),
        (
            [
                *USER_HI,
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f"}]},
                {"role": "user", "content": "ok"},
            ],
            "without `tool_result`",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}],
            "unexpected `tool_use_id`",
        ),
        (
            [
                *USER_HI,
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f"}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "first"},
                        {"type": "tool_result", "tool_use_id": "t1"},
                    ],
                },
            ],
            "without `tool_result`",
        ),
        ([*USER_HI, {"role": "assistant", "content": "trailing "}], "trailing whitespace"),
        ([], "at least one message"),
    ],
)
def test_invalid_requests_get_a_400(
    server: FakeAnthropicServer, messages: list[dict[str, Any]], problem: str
) -> None:
    server.push("never used")
    status, _, err = post(server, body(messages=messages))
    assert status == 400
    assert err["error"]["type"] == "invalid_request_error"
    assert problem in err["error"]["message"]
    assert server.remaining == 1
    assert not server.requests[0].scripted


def test_tool_choice_validation(server: FakeAnthropicServer) -> None:
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    status, _, err = post(server, body(tools=tools, tool_choice={"type": "tool", "name": "g"}))
    assert status == 400
    assert "'g'" in err["error"]["message"]


def test_validation_can_be_turned_off() -> None:
    with FakeAnthropicServer(["accepted"], validate=False) as server:
        status, _, message = post(server, body(messages=[{"role": "assistant", "content": " "}]))
    assert (status, message["content"][0]["text"]) == (200, "accepted")


# -- side requests -----------------------------------------------------------------


def test_claude_code_side_requests_do_not_touch_the_script() -> None:
    tools = [{"name": "Write", "input_schema": {"type": "object"}}]
    title_format = {
        "type": "json_schema",
        "schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["title"],
        },
    }
    with FakeAnthropicServer.for_claude_code(["main answer"]) as server:
        _, _, title = post(server, body(output_config={"format": title_format}))
        _, _, quota = post(server, body(max_tokens=1, tools=tools))
        _, _, no_tools = post(server, body())
        _, _, main = post(server, body(tools=tools))
    assert json.loads(title["content"][0]["text"]) == {"title": "Fake title", "n": 0}
    assert quota["content"][0]["text"] == "ok"
    assert no_tools["content"][0]["text"] == "ok"
    assert main["content"][0]["text"] == "main answer"
    assert [r.scripted for r in server.requests] == [False, False, False, True]
    assert server.remaining == 0


def test_custom_side_predicate_and_response() -> None:
    with FakeAnthropicServer(
        ["scripted"],
        side=lambda r: "title" in r.last_user_text,
        side_response=lambda r: fa.text("side answer"),
    ) as server:
        side = post(server, body(messages=[{"role": "user", "content": "make a title"}]))
        main = post(server, body())
    assert side[2]["content"][0]["text"] == "side answer"
    assert main[2]["content"][0]["text"] == "scripted"


def test_example_for_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"enum": ["a", "b"]},
            "fixed": {"const": 3},
            "tags": {"type": "array"},
            "ok": {"type": "boolean"},
            "maybe": {"type": ["null", "number"]},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "nested": {"properties": {"x": {"type": "integer"}}},
        },
    }
    assert fa.example_for_schema(schema) == {
        "kind": "a",
        "fixed": 3,
        "tags": [],
        "ok": False,
        "maybe": 0,
        "either": "Fake title",
        "nested": {"x": 0},
    }


def test_claude_code_env(server: FakeAnthropicServer, tmp_path: Any) -> None:
    env = server.claude_code_env(tmp_path)
    assert env["ANTHROPIC_BASE_URL"] == server.url
    assert env["ANTHROPIC_API_KEY"]
    assert env["ANTHROPIC_AUTH_TOKEN"] == ""
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["ENABLE_TOOL_SEARCH"] == "false"
    assert env["HOME"] == str(tmp_path)
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / ".claude")


# -- lifecycle, threads, disconnects -------------------------------------------------


def test_start_stop_and_context_managers() -> None:
    server = FakeAnthropicServer(["a"])
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url
    assert server.start() is server
    assert server.start() is server  # idempotent
    assert server.url == f"http://127.0.0.1:{server.port}"
    assert post(server, body())[2]["content"][0]["text"] == "a"
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(RuntimeError):
        _ = server.url
    assert "stopped" in repr(server)


async def test_async_context_manager() -> None:
    async with FakeAnthropicServer(["async"]) as server, httpx2.AsyncClient() as c:
        resp = await c.post(server.url + "/v1/messages", json=body())
    assert resp.json()["content"][0]["text"] == "async"


def test_fixture_from_the_pytest_plugin(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.push("from the fixture")
    assert post(fake_anthropic, body())[2]["content"][0]["text"] == "from the fixture"


def test_concurrent_requests_are_thread_safe() -> None:
    def echo(request: AnthropicRequest) -> str:
        return f"echo {request.last_user_text}"

    n = 24
    with FakeAnthropicServer(echo) as server:

        def call(i: int) -> str:
            msgs = [{"role": "user", "content": f"n{i}"}]
            return str(post(server, body(messages=msgs, stream=False))[2]["content"][0]["text"])

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(call, range(n)))
        requests = server.wait_for_requests(n, timeout=5)
    assert answers == [f"echo n{i}" for i in range(n)]
    assert sorted(r.index for r in requests) == list(range(1, n + 1))
    assert sorted(r.last_user_text for r in requests) == sorted(f"n{i}" for i in range(n))


def test_concurrent_push_and_queue() -> None:
    n = 20
    with FakeAnthropicServer() as server:
        pushers = [threading.Thread(target=server.push, args=(f"r{i}",)) for i in range(n)]
        for t in pushers:
            t.start()
        for t in pushers:
            t.join()
        with ThreadPoolExecutor(max_workers=5) as pool:
            texts = list(
                pool.map(lambda _: post(server, body())[2]["content"][0]["text"], range(n))
            )
    assert sorted(texts) == sorted(f"r{i}" for i in range(n))
    assert server.remaining == 0


def test_wait_for_requests_times_out_with_a_message(server: FakeAnthropicServer) -> None:
    with pytest.raises(TimeoutError, match="expected 1 scripted requests"):
        server.wait_for_requests(1, timeout=0.05, scripted=True)
    with pytest.raises(TimeoutError, match="no client disconnected"):
        server.wait_for_disconnect(timeout=0.05)


def test_client_disconnect_mid_stream_is_noticed(server: FakeAnthropicServer) -> None:
    server.push(fa.text("first second third", chunk_delay=30.0))
    with (
        httpx2.Client(timeout=10) as c,
        c.stream("POST", server.url + "/v1/messages", json=body(stream=True)) as resp,
    ):
        for line in resp.iter_lines():
            if '"text_delta"' in line:
                break  # got the first word; leave the stream mid-way
    request = server.wait_for_disconnect(timeout=5)
    assert request is server.requests[0]
    assert request.disconnected
    assert not request.completed
    assert server.disconnected.is_set()
    assert server.disconnects == [request]


def test_stop_ends_a_stream_in_progress() -> None:
    server = FakeAnthropicServer([fa.text("slow words here", chunk_delay=30.0)]).start()
    lines: list[str] = []

    def consume() -> None:
        with (
            httpx2.Client(timeout=10) as c,
            c.stream("POST", server.url + "/v1/messages", json=body(stream=True)) as resp,
        ):
            for line in resp.iter_lines():
                lines.append(line)
                if '"text_delta"' in line:
                    server.stop()  # returns once the request thread has ended

    with pytest.raises(httpx2.RemoteProtocolError):  # the server cut the stream
        consume()
    assert any("slow " in line for line in lines)
    assert server.requests[0].disconnected


def test_delay_before_the_response(server: FakeAnthropicServer) -> None:
    server.push(fa.text("late", delay=0.05))
    assert post(server, body())[2]["content"][0]["text"] == "late"


# -- broken streams: stalled, cut, malformed ----------------------------------------------


def test_a_stalled_stream_sends_only_pings_until_the_client_leaves(
    server: FakeAnthropicServer,
) -> None:
    server.push(fa.stalled_stream(text="Thinking", ping_interval=0.01))
    names: list[str] = []
    with (
        httpx2.Client(timeout=10) as c,
        c.stream("POST", server.url + "/v1/messages", json=body(stream=True)) as resp,
    ):
        for line in resp.iter_lines():
            if line.startswith("event: "):
                names.append(line[len("event: ") :])
            if names[-5:] == ["ping"] * 5:
                break
    assert names[:4] == ["message_start", "ping", "content_block_start", "content_block_delta"]
    assert set(names[4:]) == {"ping"} and len(names) >= 9
    request = server.wait_for_disconnect(timeout=5)
    assert request.disconnected and not request.completed


def test_a_stalled_request_is_never_answered_and_stop_still_ends_it() -> None:
    server = FakeAnthropicServer([fa.stalled_stream(ping_interval=0.01)]).start()
    with httpx2.Client(timeout=0.3) as c, pytest.raises(httpx2.ReadTimeout):
        c.post(server.url + "/v1/messages", json=body())
    server.wait_for_disconnect(timeout=5)
    server.stop()


def test_a_cut_stream_drops_the_connection_after_its_text(
    server: FakeAnthropicServer, client: anthropic.Anthropic
) -> None:
    server.push(fa.cut_stream(text="Half a"))
    got: list[str] = []
    with (
        # the body ended mid-way (anthropic 2.17 says so as a connection error)
        pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)),
        client.messages.stream(model="m", max_tokens=64, messages=USER_HI) as stream,
    ):
        got.extend(stream.text_stream)
    assert got == ["Half ", "a"]
    request = server.requests[0]
    assert not request.completed and not request.disconnected  # the server left, not the client
    assert server.disconnects == []


def test_a_cut_non_streaming_request_gets_no_answer(server: FakeAnthropicServer) -> None:
    server.push(fa.cut_stream())
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        post(server, body())


def test_a_malformed_event_is_sent_as_it_is(server: FakeAnthropicServer) -> None:
    server.push(fa.malformed_event(text="Hi"), fa.malformed_event("not json"))
    with (
        httpx2.Client(timeout=10) as c,
        c.stream("POST", server.url + "/v1/messages", json=body(stream=True)) as resp,
    ):
        lines = list(resp.iter_lines())
    data = [line[len("data: ") :] for line in lines if line.startswith("data: ")]
    assert json.loads(data[-2])["delta"] == {"type": "text_delta", "text": "Hi"}
    assert data[-1] == fa.MALFORMED_DATA
    with pytest.raises(json.JSONDecodeError):
        json.loads(data[-1])
    req = urllib.request.Request(
        server.url + "/v1/messages", data=json.dumps(body()).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200 and resp.read() == b"not json"


def test_a_client_hanging_up_is_not_printed_as_the_fake_servers_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from backline.testing._anthropic_http import Handler, HTTPServer

    class Host:
        def _handle(self, handler: Any, method: str) -> None: ...

        def _track(self, conn: Any, add: bool) -> None: ...

    server = HTTPServer(("127.0.0.1", 0), Handler, Host())
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except ConnectionResetError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a real bug in a handler")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "a real bug in a handler" in capsys.readouterr().err
    finally:
        server.server_close()
