from backline.llm import AgentHandoff, ChatContext, ChatMessage, FunctionCall, FunctionCallOutput


def msg(text: str, at: float, **kw: object) -> ChatMessage:
    return ChatMessage(role="user", content=text, created_at=at, **kw)  # type: ignore[arg-type]


def test_insert_orders_by_created_at_whatever_the_insertion_order() -> None:
    ctx = ChatContext()
    ctx.insert([msg("c", 3.0), msg("a", 1.0)])
    ctx.insert(msg("b", 2.0))
    assert [m.content for m in ctx.items] == ["a", "b", "c"]  # type: ignore[union-attr]


def test_equal_timestamps_keep_insertion_order() -> None:
    ctx = ChatContext([msg("first", 1.0), msg("second", 1.0)])
    ctx.insert(msg("third", 1.0))
    assert [m.content for m in ctx.items] == ["first", "second", "third"]  # type: ignore[union-attr]


def test_insert_skips_an_id_already_present() -> None:
    m = msg("once", 1.0)
    ctx = ChatContext([m])
    added = ctx.insert([m, msg("other", 2.0)])
    assert [a.content for a in added] == ["other"]  # type: ignore[union-attr]
    assert len(ctx) == 2
    clone = ChatMessage(role="user", content="clone", id=m.id, created_at=0.5)
    assert ctx.insert(clone) == []
    assert ctx.get(m.id) is m


def test_lookup_by_id_and_index() -> None:
    items = [msg(str(i), float(i % 3)) for i in range(9)]
    ctx = ChatContext(items)
    for it in items:
        idx = ctx.index_by_id(it.id)
        assert idx is not None and ctx.items[idx] is it
    assert ctx.get("missing") is None
    assert ctx.index_by_id("missing") is None
    assert items[0].id in ctx


def test_copy_is_independent_and_filters() -> None:
    call = FunctionCall(call_id="c1", name="t", arguments="{}", created_at=2.0)
    out = FunctionCallOutput(call_id="c1", name="t", output="ok", created_at=3.0)
    sys = ChatMessage(role="system", content="be brief", created_at=0.0)
    hand = AgentHandoff(old_agent="A", new_agent="B", created_at=4.0)
    ctx = ChatContext([sys, msg("hi", 1.0), call, out, hand])
    cp = ctx.copy()
    cp.insert(msg("later", 9.0))
    assert len(ctx) == 5 and len(cp) == 6
    only_msgs = ctx.copy(
        exclude_function_calls=True, exclude_instructions=True, exclude_handoffs=True
    )
    assert [it.type for it in only_msgs.items] == ["message"]
    assert call.id not in only_msgs


def test_remove_and_to_dicts() -> None:
    a, b = msg("a", 1.0), msg("b", 2.0)
    ctx = ChatContext([a, b])
    ctx.remove([a.id, "unknown"])
    assert [d["content"] for d in ctx.to_dicts()] == ["b"]
    assert a.id not in ctx


def test_ids_are_unique() -> None:
    ids = {ChatMessage(role="user", content="x").id for _ in range(1000)}
    assert len(ids) == 1000


def test_a_new_item_inserted_twice_is_kept_once_before_its_id_is_read() -> None:
    ctx = ChatContext()
    a = ChatMessage(role="user", content="a", created_at=1.0)
    b = ChatMessage(role="user", content="b", created_at=1.0)  # the same stamp
    c = ChatMessage(role="user", content="c", created_at=2.0)
    assert ctx.insert([a, b, c]) == [a, b, c]
    assert ctx.insert(a) == [] and ctx.insert(b) == [] and ctx.insert(c) == []
    assert ctx.items == [a, b, c]
    early = ChatMessage(role="user", content="early", created_at=0.5)
    assert ctx.insert(early) == [early] and ctx.insert(early) == []
    assert ctx.items == [early, a, b, c]


def test_an_item_whose_id_was_read_is_still_found_and_not_doubled() -> None:
    import dataclasses

    ctx = ChatContext()
    a = ChatMessage(role="user", content="a", created_at=1.0)
    ctx.insert(a)
    twin = dataclasses.replace(a)  # reads a's id: the same id, another object
    assert ctx.insert(twin) == []  # an id already present
    assert ctx.get(a.id) is a and ctx.index_by_id(a.id) == 0
    later = ChatMessage(role="user", content="later", created_at=2.0)
    ctx.insert(later)
    copy = ctx.copy()
    assert copy.get(later.id) is later and len(copy) == 2
    ctx.remove([a.id])
    assert ctx.items == [later] and a.id not in ctx
    filtered = copy.copy(exclude_function_calls=True)
    assert filtered.get(a.id) is a
