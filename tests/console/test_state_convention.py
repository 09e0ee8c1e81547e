"""The state convention front ends read: headline, counts, links (docs/background.md)."""

from __future__ import annotations

from backline.io._view import summarize_state


def test_phase_is_the_headline_and_whole_numbers_are_counts() -> None:
    state = {"phase": "verifying", "topic": "bees", "sources_read": 6, "claims_under_review": 9}
    assert summarize_state(state) == (
        "verifying · sources read 6 · claims under review 9 · topic bees"
    )


def test_links_are_shown_in_full_after_the_cut() -> None:
    path = "/home/me/reports/" + "x" * 80 + ".md"
    state = {"phase": "done " * 30, "confirmed": 4, "ok": True, "links": {"report": path}}
    line = summarize_state(state, width=40)
    head, _, link = line.partition(" · report: ")
    assert len(head) == 40 and head.endswith("…")
    assert link == path  # never cut
    assert "ok" not in line  # booleans are not counts


def test_recent_activity_reads_its_newest_entry_and_files_changed_a_count() -> None:
    state = {"status": "working", "recent_activity": ["ran `ls`", "edited a.py"]}
    state["files_changed"] = ["a.py", "b.py"]
    assert summarize_state(state) == "working · edited a.py · 2 files changed"
    assert summarize_state({**state, "files_changed": ["a.py"]}).endswith("· 1 file changed")


def test_the_newest_activity_takes_the_place_of_the_phase() -> None:
    state = {"status": "busy", "phase": "planning", "recent_activity": []}
    assert summarize_state(state) == "busy · planning"
    state["recent_activity"] = ["fetched 3 pages"]
    assert summarize_state(state) == "busy · fetched 3 pages"


def test_first_party_backgrounds_read_by_the_same_rules() -> None:
    claude_code = {
        "status": "working",
        "task": "fix the login",
        "recent_activity": ["edited a.py"],
        "files_changed": ["a.py"],
        "last_task": None,
        "error": None,
    }
    cli_agent = {
        "agent": "codex",
        "status": "working",
        "task": "fix the login",
        "process": {"state": "running", "pid": 42, "exit_code": None},
        "recent_activity": ["used Bash"],
        "error": None,
    }
    assert summarize_state(claude_code) == (
        "working · edited a.py · 1 file changed · task fix the login"
    )
    assert summarize_state(cli_agent) == "working · used Bash · agent codex · task fix the login"


def test_a_custom_states_short_fields_follow_the_headline() -> None:
    state = {"status": "checking", "city": "Oslo", "eta": "5 min", "progress": 0.25}
    assert summarize_state(state) == "checking · city Oslo · eta 5 min · progress 0.25"


def test_long_texts_lists_and_nulls_are_left_to_the_web_card() -> None:
    state = {
        "status": "drafting",
        "question": "What is the migration path for every service we run in production?",
        "done": ["a", "b"],
        "nested": {"x": 1},
        "ok": True,
        "error": None,
        "city": "Oslo",
    }
    assert summarize_state(state) == "drafting · city Oslo"


def test_the_line_stays_within_its_width() -> None:
    state = {"status": "checking", **{f"field_{i}": "a short value" for i in range(10)}}
    line = summarize_state(state, width=50)
    assert len(line) == 50 and line.startswith("checking · field 0 a short value")
