import httpx2, pytest, time, logging
from backline.testing import fake_anthropic as fa
from tests.test_fake_anthropic import test_concurrent_requests_are_thread_safe, body
def test_a():
    test_concurrent_requests_are_thread_safe()
def test_b(caplog):
    caplog.set_level(logging.DEBUG, logger="backline")
    server = fa.FakeAnthropicServer([fa.text("slow words here", chunk_delay=30.0)]).start()
    try:
        with httpx2.Client(timeout=10) as c, c.stream("POST", server.url + "/v1/messages", json=body(stream=True)) as resp:
            for line in resp.iter_lines():
                if '"text_delta"' in line:
                    t = time.monotonic(); server.stop(); print("stop took", time.monotonic() - t)
    except Exception as e:
        print("EXC", repr(e))
    r = server.requests[0]
    print(r, r.disconnected, r.completed, server.requests)
    print(caplog.text[-3000:])
    assert 0
