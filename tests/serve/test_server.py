"""`memorag serve` driven over real HTTP (httpx) on 127.0.0.1, over tiny fake models."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from memorag.commands.main import main as cli_main
from tests.pipeline.conftest import FakeEchoGenerator, FakeHashEmbedder, tiny_model
from tests.serve.conftest import JSON, FakeSlowGenerator, fake_store, read_events, serving, topic


def memorize(url: str, name: str, **body) -> httpx.Response:
    body = body or {"documents": [{"id": f"topic-{n}", "title": "", "text": topic(n)} for n in range(3)]}
    return httpx.post(f"{url}/corpora/{name}/memorize", json=body, timeout=60)


def test_memorize_list_ask_stream_clues_delete(server):
    url, store = server
    health = httpx.get(f"{url}/health").json()
    assert health["status"] == "ok" and health["models"]["embedder"] == "fake-hash"

    response = memorize(url, "books")
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["added"] == ["topic-0", "topic-1", "topic-2"] and report["num_chunks"] > 3
    assert report["corpus"]["memory_tokens"] > 0
    assert (store.root / "books" / "manifest.json").is_file()
    again = memorize(url, "books").json()  # the same documents: nothing to add
    assert again["added"] == [] and again["skipped"] == ["topic-0", "topic-1", "topic-2"]

    listed = httpx.get(f"{url}/corpora").json()["corpora"]
    assert [corpus["name"] for corpus in listed] == ["books"]
    assert listed[0]["documents"] == ["topic-0", "topic-1", "topic-2"]

    query = topic(1, 6)
    with httpx.stream("POST", f"{url}/corpora/books/ask", json={"query": query}, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    names = [event for event, _ in events]
    assert names[0] == "clues" and names[1] == "evidence" and names[-1] == "answer"
    tokens = [data["text"] for event, data in events if event == "token"]
    answer = events[-1][1]
    assert len(tokens) >= 2 and "".join(tokens).strip() == answer["answer"] == "the fake answer"  # streamed in pieces
    evidence = events[1][1]
    assert evidence == answer["evidence"] and evidence
    assert {"doc_id", "start_char", "end_char", "score", "queries", "chunk_id"} <= set(evidence[0])
    assert "topic-1" in {item["doc_id"] for item in evidence}  # the query's words are topic 1's

    plain = httpx.post(f"{url}/corpora/books/ask", json={"query": query, "stream": False, "mode": "rag"},
                       timeout=60).json()
    assert plain["mode"] == "rag" and plain["answer"] == "the fake answer"
    assert "topic-1" in {item["doc_id"] for item in plain["evidence"]}
    clues = httpx.post(f"{url}/corpora/books/clues", json={"query": query}, timeout=60).json()
    assert isinstance(clues["clues"], list) and set(clues["raw"]) == {"spans", "questions", "draft"}

    assert httpx.delete(f"{url}/corpora/books").json() == {"deleted": "books"}
    assert httpx.get(f"{url}/corpora").json() == {"corpora": []}
    assert not (store.root / "books").exists()
    gone = httpx.post(f"{url}/corpora/books/ask", json={"query": query})
    assert gone.status_code == 404 and "no corpus named 'books'" in gone.json()["error"]


def cli_error(capsys, *argv: str) -> str:
    """The message `memorag` prints for a failing command (after 'memorag: error: ')."""
    assert cli_main(list(argv)) == 2
    return capsys.readouterr().err.strip().removeprefix("memorag: error: ")


def test_bad_input_gets_json_errors_with_the_cli_messages(server, capsys):
    url, store = server
    assert memorize(url, "books").status_code == 200
    ask = f"{url}/corpora/books/ask"

    def error(response: httpx.Response, status: int) -> str:
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/json"
        return response.json()["error"]

    # the same messages as the command line
    assert error(httpx.post(ask, json={"query": "  "}), 400) == cli_error(capsys, "ask", "books", "  ")
    assert error(httpx.post(ask, json={"query": "x", "mode": "nope"}), 400) == cli_error(
        capsys, "ask", "books", "x", "--mode", "nope")
    assert error(httpx.post(ask, json={"query": "x", "mode": "hyde", "task": "summarize"}), 400) == cli_error(
        capsys, "ask", "books", "x", "--mode", "hyde", "--task", "summarize")
    assert "the query is empty" in error(httpx.post(f"{url}/corpora/books/clues", json={"query": ""}), 400)
    # empty text, unknown corpus, bad JSON, wrong types, bad names, unknown routes
    assert "the text is empty" in error(memorize(url, "other", text="   \n"), 400)
    assert "is empty; give a text" in error(memorize(url, "other", documents=[{"id": "a", "text": ""}]), 400)
    assert "list of documents is empty" in error(memorize(url, "other", documents=[]), 400)
    assert "either 'text'" in error(memorize(url, "other", text="a", documents=[{"id": "a", "text": "b"}]), 400)
    assert "no corpus named 'nothing'" in error(httpx.post(f"{url}/corpora/nothing/ask", json={"query": "x"}), 404)
    assert "no corpus named" in error(httpx.delete(f"{url}/corpora/nothing"), 404)
    assert "not valid JSON" in error(httpx.post(ask, content=b'{"query": ', headers=JSON), 400)
    assert "body is empty" in error(httpx.post(ask, content=b"", headers=JSON), 400)
    assert "JSON list; send a JSON object" in error(httpx.post(ask, json=["query"]), 400)
    assert "'query' must be a string, not int" in error(httpx.post(ask, json={"query": 5}), 400)
    assert "'stream' must be true or false" in error(httpx.post(ask, json={"query": "x", "stream": "yes"}), 400)
    assert "'text' must be a string" in error(memorize(url, "other", text=["a"]), 400)
    assert "needs 'query'" in error(httpx.post(ask, json={"question": "x"}), 400)
    assert "corpus name '-x' is not allowed" in error(memorize(url, "-x", text="a"), 400)
    assert "no route" in error(httpx.get(f"{url}/nowhere"), 404)
    assert "is not allowed on" in error(httpx.put(ask, json={}), 405)
    assert httpx.get(f"{url}/corpora").json()["corpora"][0]["name"] == "books"  # nothing else was made
    # the save and its writer lock (memorag/storage/locking.py keeps `.NAME.lock` beside a save)
    assert sorted(path.name for path in store.root.iterdir()) == [".books.lock", "books"]
    assert httpx.get(f"{url}/health").json()["pending"] == 0


def test_a_client_that_leaves_mid_stream_stops_its_answer_and_the_server_goes_on(tmp_path):
    generator = FakeSlowGenerator(pieces=150, delay=0.02)  # 3 s of streaming if nobody stopped it
    store = fake_store(tmp_path / "store", generator=generator)
    with serving(store) as url:
        assert memorize(url, "books").status_code == 200
        with httpx.stream("POST", f"{url}/corpora/books/ask", json={"query": topic(0, 5), "mode": "rag"},
                          timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("event: token"):
                    break  # leave after the first token
        deadline = time.monotonic() + 20
        while httpx.get(f"{url}/health").json()["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert httpx.get(f"{url}/health").json()["pending"] == 0
        assert generator.sent < 100, f"the generation went on after the client left ({generator.sent} pieces)"
        # the next request is served in full
        generator.sent = 0
        answer = httpx.post(f"{url}/corpora/books/ask", json={"query": topic(0, 5), "mode": "rag", "stream": False},
                            timeout=30).json()
        assert answer["answer"] == generator.reply and generator.sent == 150


def test_concurrent_asks_are_queued_and_each_gets_its_whole_answer(tmp_path):
    generator = FakeSlowGenerator(pieces=10, delay=0.01)
    store = fake_store(tmp_path / "store", generator=generator)
    with serving(store) as url:
        assert memorize(url, "a").status_code == 200
        assert memorize(url, "b", text=topic(2, 80)).status_code == 200
        results: dict[int, list] = {}

        def ask(number: int) -> None:
            with httpx.stream("POST", f"{url}/corpora/{'ab'[number % 2]}/ask",
                              json={"query": topic(number % 3, 5), "mode": "rag"}, timeout=60) as response:
                results[number] = read_events(response)

        threads = [threading.Thread(target=ask, args=(number,)) for number in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(results) == list(range(6))
        for events in results.values():
            tokens = "".join(data["text"] for event, data in events if event == "token")
            assert events[-1][0] == "answer" and tokens.strip() == generator.reply == events[-1][1]["answer"]
        assert generator.calls == 6 and generator.most_running == 1  # one generation at a time


def test_every_corpus_shares_one_set_of_models_and_few_stay_loaded(tmp_path):
    store = fake_store(tmp_path / "store", max_loaded=1)
    with serving(store) as url:
        assert memorize(url, "a").status_code == 200
        first = store.pipeline("a")
        assert memorize(url, "b", text=topic(2, 80)).status_code == 200
        assert store.loaded == ["b"]  # "a" was dropped from memory, its folder stays
        again = httpx.post(f"{url}/corpora/a/ask", json={"query": topic(0, 5), "mode": "rag", "stream": False},
                           timeout=30)
        assert again.status_code == 200 and store.loaded == ["a"]
        reloaded = store.pipeline("a")
        assert reloaded is not first
        assert reloaded.memory_model is first.memory_model and reloaded.embedder is first.embedder
        assert reloaded.generator is first.generator is store.pipeline("b").generator


@pytest.mark.parametrize("body", [{"text": "x", "overwrite": "no"}, {"documents": [{"id": 3, "text": "x"}]},
                                  {"documents": ["x"]}])
def test_malformed_memorize_bodies_are_refused(server, body):
    url, _ = server
    response = httpx.post(f"{url}/corpora/c/memorize", json=body)
    assert response.status_code == 400 and response.json()["type"] == "InputError"


@pytest.mark.parametrize("reply", ["What's the name of the word list?", "Not in the evidence."])
def test_a_reworded_echo_or_a_refusal_streams_no_token_and_says_no_answer(tmp_path, reply):
    """The server reads the judgement `MemoRAG.ask` makes in the answer stream: no token of a reworded
    echo or of a refusal is sent, and the answer event says why it is none."""
    from tests.pipeline.conftest import FakeEchoGenerator

    with serving(fake_store(tmp_path / "store", generator=FakeEchoGenerator(reply))) as url:
        assert memorize(url, "books").status_code == 200
        question = "What is the name of the word list?"
        with httpx.stream("POST", f"{url}/corpora/books/ask", json={"query": question, "mode": "rag"},
                          timeout=60) as response:
            events = read_events(response)
        plain = httpx.post(f"{url}/corpora/books/ask", json={"query": question, "mode": "rag", "stream": False},
                           timeout=60).json()
    assert [event for event, _ in events if event == "token"] == []
    answer = events[-1][1]
    assert answer["answered"] is False and answer["answer"] == reply
    assert answer["no_answer"] == ("repeats the question" if reply.startswith("What") else
                                   "says the evidence does not answer")
    assert plain["answered"] is False and plain["no_answer"] == answer["no_answer"]


def test_a_generator_named_in_the_settings_is_the_one_loaded_unless_a_model_is_handed_in(tmp_path):
    from memorag.serve.store import CorpusStore
    from tests.serve.conftest import SETTINGS

    named = CorpusStore(tmp_path / "a", {**SETTINGS, "generator": "embedded-base"}, memory_model=tiny_model(),
                        embedder=FakeHashEmbedder(), embedder_name="fake-hash")
    assert named.models.config.generator == "embedded-base"  # `memorag serve --set generator=...`
    handed = FakeEchoGenerator()
    given = CorpusStore(tmp_path / "b", {**SETTINGS, "generator": "embedded-base"}, memory_model=tiny_model(),
                        embedder=FakeHashEmbedder(), embedder_name="fake-hash", generator=handed)
    assert given.models.generator is handed
