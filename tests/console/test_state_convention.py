"""The state convention front ends read: headline, counts, links (docs/background.md)."""

from __future__ import annotations

from backline.io._view import summarize_state


def test_phase_is_the_headline_and_whole_numbers_are_counts() -> None:
    state = {"phase": "verifying", "topic": "bees", "sources_read": 6, "claims_under_review": 9}
    assert summarize_state(state) == "verifying · sources read 6 · claims under review 9"


def test_links_are_shown_in_full_after_the_cut() -> None:
    path = "/home/me/reports/" + "x" * 80 + ".md"
    state = {"phase": "done " * 30, "confirmed": 4, "ok": True, "links": {"report": path}}
    line = summarize_state(state, width=40)
    head, _, link = line.partition(" · report: ")
    assert len(head) == 40 and head.endswith("…")
    assert link == path  # never cut
    assert "ok" not in line  # booleans are not counts


def test_claude_codes_shape_reads_as_before() -> None:
    state = {"status": "working", "recent_activity": ["edited a.py"], "files_changed": ["a.py"]}
    assert summarize_state(state) == "working · edited a.py · 1 file changed"
