"""The server never sends an echo of the question as an answer: its tokens are held back, and the
answer says `"answered": false` with the reason, the evidence still sent (fake models)."""

from __future__ import annotations

import httpx

from tests.pipeline.conftest import FakeEchoGenerator
from tests.serve.conftest import fake_store, read_events, serving, topic

QUERY = topic(1, 6)


def ask_both_ways(tmp_path, reply: str) -> tuple[list, dict]:
    with serving(fake_store(tmp_path, generator=FakeEchoGenerator(reply))) as url:
        documents = [{"id": f"topic-{n}", "title": "", "text": topic(n)} for n in range(3)]
        assert httpx.post(f"{url}/corpora/books/memorize", json={"documents": documents}, timeout=60).status_code == 200
        with httpx.stream("POST", f"{url}/corpora/books/ask", json={"query": QUERY, "mode": "rag"},
                          timeout=60) as response:
            events = read_events(response)
        plain = httpx.post(f"{url}/corpora/books/ask", json={"query": QUERY, "mode": "rag", "stream": False},
                           timeout=60).json()
    return events, plain


def test_an_echoed_question_is_reported_as_no_answer_with_its_evidence(tmp_path):
    events, plain = ask_both_ways(tmp_path, QUERY.upper() + " ?")
    assert [event for event, _ in events if event == "token"] == []  # nothing sent as if it were the answer
    answer = events[-1][1]
    assert events[-1][0] == "answer" and answer["answered"] is False and answer["no_answer"] == "repeats the question"
    assert answer["evidence"] and dict(events)["evidence"] == answer["evidence"]
    assert plain["answered"] is False and plain["no_answer"] == "repeats the question" and plain["evidence"]


def test_the_question_followed_by_an_answer_is_streamed_whole(tmp_path):
    reply = f"{QUERY} the answer is topic one"
    events, plain = ask_both_ways(tmp_path, reply)
    tokens = "".join(data["text"] for event, data in events if event == "token")
    assert tokens.strip() == reply and events[-1][1]["answered"] is True and events[-1][1]["no_answer"] is None
    assert plain["answered"] is True
