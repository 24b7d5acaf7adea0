"""Seconds per request of the packaged local model, by background length, on this machine.

Sends the first ``--per-length`` frozen requests of each length (in plan order, so the server's
prefix reuse is as in a real run) to a freshly started llama-cpp-python server. The baseline,
measured in the same run, is a one-line chat request: the fixed cost of a request. Prompt and
generation speeds come from the server's own ``llama_perf_context_print`` log lines.

    python benchmarks/bench_localmodel.py PREPARED [--per-length 8] [--n-ctx 8192]

The prepared folder's protocol must name the served model (see docs/local-model.md).
Absolute seconds depend on how busy the two cores are; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from needlepoint.design.prepared import load_prepared
from needlepoint.design.profiles import ENDPOINTS, body_profile
from needlepoint.local.server import served_model

PERF = re.compile(r"(prompt eval|\beval) time =\s+([\d.]+) ms /\s+(\d+) (?:tokens|runs)")


def _speeds(log: Path) -> tuple[float, float]:
    """Median prompt and generation tokens/s over the requests in the server log."""
    prompt, gen = [], []
    for kind, ms, n in PERF.findall(log.read_text(errors="replace")):
        if float(ms) > 50:  # sub-50 ms lines are cache hits or 1-token probes, not throughput
            (prompt if kind == "prompt eval" else gen).append(int(n) / (float(ms) / 1000))
    return statistics.median(prompt), statistics.median(gen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prepared")
    ap.add_argument("--per-length", type=int, default=8)
    ap.add_argument("--n-ctx", type=int, default=None)
    args = ap.parse_args()
    prepared = load_prepared(args.prepared)
    chosen: dict[int, list[int]] = {}
    for row in prepared.plan:
        if len(chosen.setdefault(row.length, [])) < args.per_length:
            chosen[row.length].append(row.seq)
    order = sorted(seq for seqs in chosen.values() for seq in seqs)
    length_of = {row.seq: row.length for row in prepared.plan}
    log = Path(tempfile.mkdtemp()) / "server.log"
    seconds: dict[int, list[float]] = {}
    tokens: dict[int, list[int]] = {}
    with served_model(prepared.protocol["model"], n_ctx=args.n_ctx, log_path=log) as server:
        # Each frozen body goes to its profile's endpoint (a base model's to /v1/completions).
        url = server.base_url + "/v1" + ENDPOINTS[body_profile(prepared.protocol)]
        chat = server.base_url + "/v1/chat/completions"
        tiny = {"model": server.alias, "messages": [{"role": "user", "content": "Say OK."}]}
        baseline = []
        with httpx.Client(timeout=900) as client:
            for _ in range(3):
                start = time.perf_counter()
                client.post(chat, json={**tiny, "max_tokens": 8}).raise_for_status()
                baseline.append(time.perf_counter() - start)
            for seq in order:
                start = time.perf_counter()
                answer = client.post(
                    url, content=prepared.bodies[seq], headers={"content-type": "application/json"}
                )
                answer.raise_for_status()
                length = length_of[seq]
                seconds.setdefault(length, []).append(time.perf_counter() - start)
                tokens.setdefault(length, []).append(answer.json()["usage"]["prompt_tokens"])
    base = statistics.median(baseline)
    prompt_tps, gen_tps = _speeds(log)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load} (1, 5, 15 min); baseline one-line request {base:.2f} s")
    for length in sorted(seconds):
        med = statistics.median(seconds[length])
        print(
            f"length {length}: {len(seconds[length])} requests, median {med:.2f} s/request "
            f"(range {min(seconds[length]):.2f}-{max(seconds[length]):.2f}; "
            f"{med / base:.0f}x baseline), median prompt {statistics.median(tokens[length]):.0f} "
            "tokens"
        )
    print(f"server log medians: prompt {prompt_tps:.0f}, generation {gen_tps:.0f} tokens/s")
    print(json.dumps({"seconds": seconds, "prompt_tokens": tokens, "baseline_s": baseline}))


if __name__ == "__main__":
    main()
