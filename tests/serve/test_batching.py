"""Asks served together, their decodings stepped as one batch, equal the same asks served one at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memorag.generation import LocalGenerator
from tests.pipeline.conftest import tiny_model
from tests.serve.conftest import JSON, fake_store, read_events, serving, topic

QUESTIONS = [(corpus, topic(number, 6), mode) for number, corpus in enumerate(("c0", "c1", "c0"))
             for mode in ("memorag", "rag")]


def ask(url: str, corpus: str, query: str, mode: str) -> dict:
    with httpx.Client(base_url=url, timeout=120) as client:
        with client.stream("POST", f"/corpora/{corpus}/ask", headers=JSON,
                           json={"query": query, "mode": mode}) as response:
            assert response.status_code == 200, response.read()
            events = read_events(response)
    kinds = [event for event, _ in events]
    assert kinds[-1] == "answer", events[-1]
    answer = events[-1][1]
    streamed = "".join(data["text"] for event, data in events if event == "token")
    return {"answer": answer["answer"], "clues": answer["clues"], "streamed": streamed,
            "evidence": [item["chunk_id"] for item in answer["evidence"]]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    model = tiny_model(seed=2)
    store = fake_store(tmp_path_factory.mktemp("store"), generator=LocalGenerator.from_memory_model(model, repetition_penalty=1.1),
                       memory_model=model)
    for number, corpus in enumerate(("c0", "c1")):
        store.memorize(corpus, [_document(f"d{number}", topic(number, 200))])
    return store


def _document(doc_id: str, text: str):
    from memorag.retrieval.chunking import Document

    return Document(id=doc_id, title="", text=text)


def test_asks_decoded_in_one_batch_equal_the_asks_served_one_at_a_time(store):
    with serving(store, batch_size=1) as url:
        alone = [ask(url, *question) for question in QUESTIONS]
        assert "batching" not in httpx.get(f"{url}/health").json()
    with serving(store, batch_size=6) as url:
        with ThreadPoolExecutor(len(QUESTIONS)) as pool:
            together = list(pool.map(lambda question: ask(url, *question), QUESTIONS))
        batching = httpx.get(f"{url}/health").json()["batching"]
        served = store.pipeline("c0")  # the pipelines hold views of the models that decode through the batch
        assert served.memory_model.shared_batch is not None and served.generator.shared_batch is not None
        assert served.memory_model.base_model is store.models.memory_model.base_model
    assert together == alone
    assert all(result["answer"] and result["streamed"].strip() for result in alone)
    assert batching["max_rows"] >= 2, batching  # decodings of several asks shared steps
    # the shared models were never changed, and once the server stops its pipelines hold them again
    assert store.models.memory_model.shared_batch is None and store.models.generator.shared_batch is None
    assert store.pipeline("c0").memory_model is store.models.memory_model
