"""Screenshots of the evidence inspector for docs/serving.md, over the embedded models (no fakes):

    python -m tests.serve.inspector_screenshots --out docs/images

Serves a fresh store on 127.0.0.1, uploads a two-page PDF and a Markdown file through the
page in headless chromium (tests/serve/browser.py), asks one question in the memorag and rag
modes side by side, opens the first PDF citation (one page: a PDF is chunked page by page),
and saves the page at 1,400 and 390 pixels
wide (`inspector-desktop.png`, `inspector-phone.png`). Prints the answers and timings it saw.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from memorag.serve.app import create_app
from memorag.serve.store import CorpusStore
from tests.documents.builders import pdf_bytes
from tests.serve.browser import Chromium
from tests.serve.conftest import free_port

REPORT_PAGES = [
    "Harbour survey, spring season. The survey team arrived at Kestrel Point on the fourth of April and set up "
    "the tide gauge on the old stone pier. The first week was spent measuring the channel depth at low water. "
    "The northern channel was found to be silting up: its depth fell from six metres to four since the last "
    "survey, mostly near the mouth of the Alder river, which carries sand down after the spring rains.",
    "Recommendations. The harbour board should dredge the northern channel before the autumn storms, starting "
    "at the Alder mouth. Ingrid Holm, the survey's engineer, proposes a sediment trap upstream of the river "
    "mouth, which would cut the sand reaching the channel by about half. The southern channel needs no work; "
    "its depth held at seven metres. The next survey is planned for the spring after the dredging.",
]
NOTES = ("# Field notes\n\nThe tide gauge on the stone pier was read every hour. Fog stopped the boat work on two "
         "days.\n\n## Equipment\n\nThe echo sounder was calibrated each morning against a weighted line.\n")
QUESTION = "Why is the northern channel getting shallower, and what should be done?"


def serve_in_thread(store: CorpusStore) -> tuple[str, object]:
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_app(store), host="127.0.0.1", port=free_port(),
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{server.config.port}", server


def drive(page, folder: Path) -> dict:
    """Upload, ask in two modes, open the first PDF citation; what the page showed."""
    page.wait_for("document.body?.dataset.ready === 'true'")
    page.evaluate("document.getElementById('corpus-name').value = 'harbour'")
    page.set_files("#files", [folder / "harbour-survey.pdf", folder / "field-notes.md"])
    page.evaluate("document.getElementById('memorize').click()")
    page.wait_for("document.getElementById('memorize-status').textContent.startsWith('Memorized')", timeout=600)
    page.evaluate(f"document.getElementById('query').value = {json.dumps(QUESTION)}")
    page.evaluate("document.getElementById('ask').click()")
    page.wait_for("document.querySelectorAll('.run[data-done=true]').length === 2", timeout=900)
    page.evaluate("[...document.querySelectorAll('.cite')].find(c => c.textContent.includes('.pdf, p.')).click()")
    page.wait_for("(i => !i.hidden && i.complete && i.naturalWidth > 0)(document.getElementById('page-image'))")
    return page.evaluate("[...document.querySelectorAll('.run')].map(run => ({mode: run.dataset.mode, "
                         "answer: run.querySelector('.answer').textContent, "
                         "timings: run.querySelector('.timings').textContent, "
                         "clues: [...run.querySelectorAll('.clues li')].map(li => li.textContent)}))")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"), help="folder for the two PNGs")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the models")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memorag-inspector-") as scratch:
        folder = Path(scratch)
        (folder / "harbour-survey.pdf").write_bytes(pdf_bytes(REPORT_PAGES))
        (folder / "field-notes.md").write_text(NOTES)
        store = CorpusStore(folder / "store", {"threads": args.threads, "clue_max_new_tokens": 32,
                                               "answer_max_new_tokens": 48})
        print("models:", store.load_models())
        url, server = serve_in_thread(store)
        with Chromium.start() as browser, browser.open(f"{url}/") as page:
            page.resize(1400, 900)
            print(json.dumps(drive(page, folder), indent=2))
            page.screenshot(args.out / "inspector-desktop.png")
            page.resize(390, 844, mobile=True)
            time.sleep(0.5)
            page.screenshot(args.out / "inspector-phone.png")
        server.should_exit = True
    for name in ("inspector-desktop.png", "inspector-phone.png"):
        print(name, f"{(args.out / name).stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
