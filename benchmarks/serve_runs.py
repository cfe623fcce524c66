"""The mixed load and the fault run of `benchmarks/serve.py` (`--run mixed`, `--run fault`).

    python benchmarks/serve.py --run mixed --clients 16 --seconds 60
    python benchmarks/serve.py --run mixed --batch-size 1 8 --repeats 2    # A/B: one job at a time vs batched
    python benchmarks/serve.py --run fault --trials 3

Both start `memorag serve` with the embedded models on 127.0.0.1 (a free port, a
temporary store), talk to it with httpx and bound every loop by a count and a time:
the mixed load starts no request after `--seconds` and waits at most `--max-seconds`
for those in flight; the fault run makes `--trials` kills, each followed by one restart.
With several `--batch-size` values the mixed load runs once per value and repeat, in turn
(1, 8, 1, 8, ...: a slow spell of a shared host falls on both), each on a fresh server
and store; the record holds every run and, per value, the median of the repeats.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from serve import QUESTIONS, ROOT, TEXT, free_port, percentile, wait_for_server

KINDS = ("ask rag", "clues", "memorize", "ask rag", "ask memorag", "memorize")


def start_server(store: str, port: int, args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    command = [sys.executable, "-m", "memorag.commands.main", "serve", "--store", store, "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning", "--batch-size", str(args.batch_size[0]),
               "--set", f"answer_max_new_tokens={args.max_new_tokens}",
               "--set", "clue_max_new_tokens=16"]
    return subprocess.Popen(command, cwd=ROOT, env=env)


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rss_mb(pid: int, field: str) -> float | None:
    """`VmRSS` (now) or `VmHWM` (peak) of process `pid`, in MB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def passages(count: int, chars: int, start: int = 0) -> list[str]:
    """`count` consecutive slices of the demo text, `chars` characters each, from `start`."""
    text = TEXT.read_text(encoding="utf-8")
    starts = [(start + i * chars) % (len(text) - chars) for i in range(count)]  # wraps around the text
    return [text[begin : begin + chars] for begin in starts]


# ----------------------------------------------------------------------------------------------
# mixed load


async def mixed_load(url: str, args, pid: int) -> dict:
    import httpx

    corpora = ["c0", "c1", "c2"]
    async with httpx.AsyncClient(base_url=url, timeout=args.max_seconds) as client:
        started = time.perf_counter()
        for name, text in zip(corpora, passages(3, 2000), strict=True):
            (await client.post(f"/corpora/{name}/memorize", json={"text": text, "overwrite": True})).raise_for_status()
        setup_s = round(time.perf_counter() - started, 1)
        small = passages(args.clients * 50, 400, start=8000)
        results: dict[str, list[float]] = {kind: [] for kind in KINDS}
        errors: list[str] = []
        stop_at = time.monotonic() + args.seconds
        hard_stop = time.monotonic() + args.max_seconds

        async def one(kind: str, client_id: int, turn: int) -> None:
            corpus = corpora[(client_id + turn) % len(corpora)]
            question = QUESTIONS[(client_id + turn) % len(QUESTIONS)]
            if kind.startswith("ask"):
                body = {"query": question, "mode": kind.split()[1]}
                async with client.stream("POST", f"/corpora/{corpus}/ask", json=body) as response:
                    if response.status_code != 200:
                        raise RuntimeError(f"{response.status_code} {(await response.aread())[:200]!r}")
                    last = None
                    async for line in response.aiter_lines():
                        if line.startswith("event: "):
                            last = line
                    if last != "event: answer":
                        raise RuntimeError(f"the stream ended with {last}")
                return
            if kind == "clues":
                response = await client.post(f"/corpora/{corpus}/clues", json={"query": question})
            else:
                text = small[(client_id * 50 + turn) % len(small)]
                response = await client.post(f"/corpora/{corpus}/memorize", json={
                    "documents": [{"id": f"client{client_id}-turn{turn}", "title": "", "text": text}]})
            if response.status_code != 200:
                raise RuntimeError(f"{response.status_code} {response.text[:200]}")

        async def client_loop(client_id: int) -> None:
            turn = 0
            while time.monotonic() < stop_at and turn < 50:
                kind = KINDS[(client_id + turn) % len(KINDS)]
                sent = time.perf_counter()
                try:
                    await asyncio.wait_for(one(kind, client_id, turn), max(1.0, hard_stop - time.monotonic()))
                    results[kind].append(time.perf_counter() - sent)
                except Exception as error:  # counted and reported, never hidden
                    errors.append(f"{kind}: {type(error).__name__} {error}"[:300])
                turn += 1

        peak_sampled = [rss_mb(pid, "VmRSS") or 0.0]
        sampling = True

        async def sample() -> None:
            while sampling:
                peak_sampled.append(rss_mb(pid, "VmRSS") or 0.0)
                await asyncio.sleep(0.5)

        sampler = asyncio.ensure_future(sample())
        load_started = time.perf_counter()
        await asyncio.gather(*(client_loop(n) for n in range(args.clients)))
        wall = time.perf_counter() - load_started
        sampling = False
        await sampler
        health = (await client.get("/health")).json()
    every = [latency for latencies in results.values() for latency in latencies]
    by_kind = {kind: {"served": len(values), "p50_s": round(percentile(values, 0.5), 2),
                      "p95_s": round(percentile(values, 0.95), 2)} for kind, values in results.items() if values}
    return {"setup_s": setup_s, "load_s": args.seconds, "wall_s_including_drain": round(wall, 1),
            "clients": args.clients, "served": len(every),
            "served_per_minute": round(len(every) / wall * 60, 1),  # the drain included
            "errors": len(errors), "error_samples": errors[:10],
            "p50_s": round(percentile(every, 0.5), 2) if every else None,
            "p95_s": round(percentile(every, 0.95), 2) if every else None, "by_kind": by_kind,
            "peak_rss_mb": rss_mb(pid, "VmHWM"), "peak_rss_sampled_mb": max(peak_sampled),
            "pending_after": health["pending"], "batch_size": health.get("batch_size"),
            "batching": health.get("batching")}


# ----------------------------------------------------------------------------------------------
# fault run


def documents_of(client, name: str) -> list[str] | None:
    response = client.get(f"/corpora/{name}")
    return response.json()["documents"] if response.status_code == 200 else None


def fault_run(store: str, port: int, args, deadline: float) -> dict:
    import httpx

    url = f"http://127.0.0.1:{port}"
    old, new, kept = passages(3, 8000)
    trials = []
    process = start_server(store, port, args)
    try:
        wait_for_server(process, url, deadline)
        with httpx.Client(base_url=url, timeout=600) as client:
            client.post("/corpora/kept/memorize", json={"documents": [{"id": "kept", "text": kept}]}).raise_for_status()
            started = time.perf_counter()
            client.post("/corpora/calibrate/memorize", json={"documents": [{"id": "new", "text": new}]}).raise_for_status()
            memorize_s = time.perf_counter() - started
        fractions = [0.3, 0.9, 0.98, 0.6, 0.99][: args.trials]
        for number, fraction in enumerate(fractions):
            if time.monotonic() > deadline:
                break
            target = f"target{number}"
            kind = ("overwrite", "append", "new")[number % 3]
            with httpx.Client(base_url=url, timeout=600) as client:
                if kind != "new":
                    client.post(f"/corpora/{target}/memorize",
                                json={"documents": [{"id": "old", "text": old}]}).raise_for_status()
                body = {"documents": [{"id": "new", "text": new}], "overwrite": kind == "overwrite"}
                sender = threading.Thread(target=_post_quietly, args=(url, f"/corpora/{target}/memorize", body))
                sender.start()
                time.sleep(fraction * memorize_s)
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
                sender.join(30)
            process = start_server(store, port, args)
            restarted = time.perf_counter()
            wait_for_server(process, url, deadline)
            restart_s = time.perf_counter() - restarted
            with httpx.Client(base_url=url, timeout=600) as client:
                found = documents_of(client, target)
                listed = [corpus["name"] for corpus in client.get("/corpora").json()["corpora"]]
                answers = {name: client.post(f"/corpora/{name}/ask", json={
                    "query": QUESTIONS[0], "mode": "rag", "stream": False}).status_code for name in listed}
                kept_docs = documents_of(client, "kept")
            allowed = {"overwrite": (["old"], ["new"]), "append": (["old"], ["old", "new"]), "new": (None, ["new"])}
            outcome = "absent" if found is None else {("old",): "old version whole", ("new",): "new version whole",
                                                      ("old", "new"): "appended whole"}.get(tuple(found), "other")
            trials.append({"trial": number, "write": kind, "killed_at_s": round(fraction * memorize_s, 2),
                           "killed_at_fraction": fraction, "found_documents": found, "outcome": outcome,
                           "whole_or_absent": found in allowed[kind], "corpora_listed": listed,
                           "ask_status_by_corpus": answers, "kept_intact": kept_docs == ["kept"],
                           "restart_s": round(restart_s, 1),
                           "store_entries": sorted(os.listdir(store))})
            print(f"trial {number}: {trials[-1]}", file=sys.stderr, flush=True)
    finally:
        stop_server(process)
    return {"memorize_s": round(memorize_s, 2), "memorize_chars": len(new), "trials": trials,
            "all_intact": bool(trials) and all(t["whole_or_absent"] and t["kept_intact"]
                                                and set(t["ask_status_by_corpus"].values()) == {200} for t in trials)}


def _post_quietly(url: str, path: str, body: dict) -> None:
    """The memorize the kill interrupts; its connection breaks, which is the point."""
    import httpx

    try:
        httpx.post(url + path, json=body, timeout=600)
    except httpx.TransportError:
        pass


# ----------------------------------------------------------------------------------------------


def one_mixed_run(args, batch_size: int, deadline: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="memorag-serve-bench-") as store:
        port = free_port()
        process = start_server(store, port, argparse.Namespace(**{**vars(args), "batch_size": [batch_size]}))
        try:
            wait_for_server(process, f"http://127.0.0.1:{port}", deadline)
            return asyncio.run(mixed_load(f"http://127.0.0.1:{port}", args, process.pid))
        finally:
            stop_server(process)


def mixed_runs(args, deadline: float) -> dict:
    """The mixed load once per batch size and repeat, in turn; one run's record when there is one."""
    runs = []
    for repeat in range(args.repeats):
        for batch_size in args.batch_size:
            print(f"mixed load: batch size {batch_size}, repeat {repeat + 1} of {args.repeats}", flush=True)
            runs.append(one_mixed_run(args, batch_size, deadline))
    if len(runs) == 1:
        return runs[0]
    keys = ("served", "served_per_minute", "errors", "p50_s", "p95_s", "peak_rss_mb")
    medians = {str(size): {key: statistics.median(run[key] for run in runs if run["batch_size"] == size)
                           for key in keys} for size in args.batch_size}
    return {"runs": runs, "median_by_batch_size": medians}


def run(args) -> int:
    from memorag.benchmarking.machine import load_average, machine_record

    load_before = load_average()
    deadline = time.monotonic() + args.max_seconds
    out = Path(args.out or ROOT / "results" / "benchmarks" / f"serve_{'load' if args.run == 'mixed' else 'fault'}.json")
    if args.run == "mixed":
        result = mixed_runs(args, deadline)
    else:
        with tempfile.TemporaryDirectory(prefix="memorag-serve-bench-") as store:
            result = fault_run(store, free_port(), args, deadline)
    result["settings"] = {"run": args.run, "max_new_tokens": args.max_new_tokens, "clue_max_new_tokens": 16,
                          "max_seconds": args.max_seconds, "threads": args.threads, "clients": args.clients,
                          "seconds": args.seconds, "batch_sizes": args.batch_size, "repeats": args.repeats}
    result["machine"] = machine_record(load_before)
    print(json.dumps(result, indent=2))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    errors = sum(run.get("errors", 0) for run in result.get("runs", [result]))
    return 0 if errors == 0 and result.get("all_intact", True) else 1
