"""Bounded load and fault runs of `memorag serve` on the loopback address, with the embedded models.

    python benchmarks/serve.py                                  # 24 asks, 4 clients at a time; stops within --max-seconds
    python benchmarks/serve.py --asks 8 --concurrency 2 --max-seconds 300
    python benchmarks/serve.py --run mixed --clients 16 --seconds 60   # -> results/benchmarks/serve_load.json
    python benchmarks/serve.py --run fault --trials 3                  # -> results/benchmarks/serve_fault.json

`--run mixed` (benchmarks/serve_runs.py): `--clients` clients for `--seconds`, each sending
asks (rag and memorag modes, streamed), clues and small memorizes over three corpora in
turn; requests served, p50/p95 latency per kind, errors, the server's peak RSS.
`--run fault`: the server killed with SIGKILL during memorizes (at fractions of a measured
memorize's duration), restarted, and the store checked: every corpus lists and answers,
and the interrupted write is whole or absent.

Starts `memorag serve` in a subprocess on 127.0.0.1 (a free port, a temporary store),
memorizes the first `--chars` characters of the demo text into one corpus, then runs
three rounds with httpx, each bounded by a request count and the remaining time:
- `health`: GET /health, the HTTP and event-loop overhead alone;
- `ask (rag)`: streamed asks in the `rag` mode (retrieval and a generated answer of at most
  `--max-new-tokens` tokens), `--concurrency` clients at once; model work is queued, so
  latency grows with the queue; time to the first token is reported too;
- `ask (memorag)`: the same with the memory's clues (three clue generations per ask).
Latency is measured per request from send to last byte; `failures` counts the
requests that failed or were not started before --max-seconds ran out. Prints a table and writes JSON
to results/benchmarks/serve.json (or --out). The server is stopped at the end, or when
--max-seconds runs out (the rounds left are reported as not run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = ROOT / "examples" / "kjv_ruth_esther_jonah.txt"
QUESTIONS = ["Which city was Jonah sent to?", "Who raised Esther?", "Where did Naomi return to?",
             "What swallowed Jonah?", "Who married Ruth?", "Which king made Esther queen?"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (the smallest value with at least `fraction` of them at or below it)."""
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def summarize(name: str, latencies: list[float], seconds: float, failures: int, first_token: list[float]) -> dict:
    row = {"round": name, "requests": len(latencies), "failures": failures, "seconds": round(seconds, 2),
           "requests_per_s": round(len(latencies) / seconds, 2) if seconds > 0 else None}
    if latencies:
        row.update({f"p{int(q * 100)}_s": round(percentile(latencies, q), 4) for q in (0.5, 0.9, 0.99)})
    if first_token:
        row["first_token_p50_s"] = round(percentile(first_token, 0.5), 4)
    return row


async def run_round(client, name: str, count: int, concurrency: int, deadline: float, request) -> dict:
    """`count` requests, `concurrency` at a time, none started after `deadline`."""
    latencies: list[float] = []
    first_token: list[float] = []
    failures = 0
    queue = list(range(count))
    started = time.perf_counter()

    async def client_loop() -> None:
        nonlocal failures
        while queue and time.monotonic() < deadline:
            number = queue.pop(0)
            sent = time.perf_counter()
            try:
                first = await asyncio.wait_for(request(client, number), timeout=max(1.0, deadline - time.monotonic()))
            except Exception:
                failures += 1
                continue
            latencies.append(time.perf_counter() - sent)
            if first is not None:
                first_token.append(first - sent)

    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return summarize(name, latencies, time.perf_counter() - started, failures + len(queue), first_token)


def ask_request(mode: str):
    async def request(client, number: int) -> float | None:
        body = {"query": QUESTIONS[number % len(QUESTIONS)], "mode": mode}
        first = None
        async with client.stream("POST", "/corpora/bench/ask", json=body) as response:
            if response.status_code != 200:
                raise RuntimeError(await response.aread())
            ended = False
            async for line in response.aiter_lines():
                if line == "event: token" and first is None:
                    first = time.perf_counter()
                if line in ("event: answer", "event: error"):
                    ended = line == "event: answer"
            if not ended:
                raise RuntimeError("the stream ended without an answer")
        return first

    return request


async def health_request(client, number: int) -> None:
    response = await client.get("/health")
    response.raise_for_status()


async def load_test(url: str, args: argparse.Namespace, deadline: float) -> tuple[list[dict], dict]:
    import httpx

    text = TEXT.read_text(encoding="utf-8")[: args.chars]
    async with httpx.AsyncClient(base_url=url, timeout=args.max_seconds) as client:
        started = time.perf_counter()
        response = await client.post("/corpora/bench/memorize", json={"text": text, "overwrite": True})
        response.raise_for_status()
        memorized = {"seconds": round(time.perf_counter() - started, 2), "chars": len(text),
                     "memory_tokens": response.json()["memory_tokens"], "chunks": response.json()["num_chunks"]}
        rounds = [("health", args.health_requests, 8, health_request), ("ask (rag)", args.asks, args.concurrency,
                  ask_request("rag")), ("ask (memorag)", args.asks, args.concurrency, ask_request("memorag"))]
        results = []
        for name, count, concurrency, request in rounds:
            if time.monotonic() >= deadline:
                results.append({"round": name, "requests": 0, "not_run": "out of time (--max-seconds)"})
                continue
            results.append(await run_round(client, name, count, concurrency, deadline, request))
            print(f"{name}: {results[-1]}", file=sys.stderr, flush=True)
    return results, memorized


def wait_for_server(process: subprocess.Popen, url: str, deadline: float) -> None:
    import httpx

    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"memorag serve exited with status {process.returncode} before it was ready")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise TimeoutError("memorag serve did not answer /health in time")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=24, help="asks per round (default 24)")
    parser.add_argument("--concurrency", type=int, default=4, help="clients asking at once (default 4)")
    parser.add_argument("--health-requests", type=int, default=500, help="GET /health requests (default 500)")
    parser.add_argument("--chars", type=int, default=16000, help="characters of the demo text to memorize")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="longest answer, in tokens (default 32)")
    parser.add_argument("--max-seconds", type=float, default=900, help="stop after this many seconds (default 900)")
    parser.add_argument("--threads", type=int, help="torch threads in the server (default: torch's own choice)")
    parser.add_argument("--out", help="JSON output (default: results/benchmarks/serve.json, serve_load.json or "
                                      "serve_fault.json by --run)")
    parser.add_argument("--run", choices=("rounds", "mixed", "fault"), default="rounds")
    parser.add_argument("--clients", type=int, default=16, help="--run mixed: clients at once (default 16)")
    parser.add_argument("--seconds", type=float, default=60, help="--run mixed: seconds of load (default 60)")
    parser.add_argument("--batch-size", type=int, nargs="+", default=[8], metavar="N",
                        help="the server's --batch-size; several values: one mixed load each, in turn (default 8)")
    parser.add_argument("--repeats", type=int, default=1, help="--run mixed: runs per batch size (default 1)")
    parser.add_argument("--trials", type=int, default=3, help="--run fault: kills (default 3)")
    args = parser.parse_args()
    if args.run != "rounds":
        from serve_runs import run  # benchmarks/serve_runs.py

        return run(args)
    args.out = args.out or str(ROOT / "results" / "benchmarks" / "serve.json")
    if min(args.asks, args.concurrency, args.health_requests, args.chars) < 1 or args.max_seconds <= 0:
        parser.error("counts, --chars and --max-seconds must be positive")

    from memorag.benchmarking.machine import load_average, machine_record

    load_before = load_average()
    deadline = time.monotonic() + args.max_seconds
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory(prefix="memorag-serve-bench-") as store:
        command = [sys.executable, "-m", "memorag.commands.main", "serve", "--store", store, "--host", "127.0.0.1",
                   "--port", str(port), "--log-level", "warning",
                   "--set", f"answer_max_new_tokens={args.max_new_tokens}"]
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=env)
        try:
            wait_for_server(process, url, deadline)
            startup = round(time.perf_counter() - started, 2)
            rounds, memorized = asyncio.run(load_test(url, args, deadline))
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    result = {"server_start_s": startup, "memorized": memorized, "rounds": rounds,
              "settings": {"asks": args.asks, "concurrency": args.concurrency, "max_new_tokens": args.max_new_tokens,
                           "max_seconds": args.max_seconds},
              "machine": {**machine_record(load_before), "threads": args.threads}}  # the server's (None: torch's)
    print(f"\nserver start {startup:.1f} s; memorized {memorized['chars']:,} chars ({memorized['memory_tokens']:,} "
          f"tokens) in {memorized['seconds']:.1f} s\n")
    print("| round | requests | failures | requests/s | p50 s | p90 s | p99 s | first token p50 s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rounds:
        if "not_run" in row:
            print(f"| {row['round']} | not run: {row['not_run']} | | | | | | |")
            continue
        cells = [row.get(key) for key in ("p50_s", "p90_s", "p99_s", "first_token_p50_s")]
        print(f"| {row['round']} | {row['requests']} | {row['failures']} | {row['requests_per_s']} | "
              + " | ".join("" if cell is None else f"{cell:.3f}" for cell in cells) + " |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
