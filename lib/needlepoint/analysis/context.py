"""What was run where and when, read from the run folder: the headline's facts.

The endpoint's host (from run.json's base URL, never the full URL or a key), the run's first and
last date and its sessions (from the journal), and how long the prompts of each background
length are: in tokens counted by the served tokenizer (``token_counts.json`` in the prepared
folder, when it belongs to these very materials), else in the prompt tokens the endpoint
reported (``usage.prompt_tokens``), else in characters, labelled as such. This module reads no
analysis record, so the input stage can call it.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from needlepoint.analysis.inference import LengthSize, RunContext
from needlepoint.design.prepared import Prepared
from needlepoint.design.profiles import text_chars
from needlepoint.run.scoring import ERROR, java_trim

TOKEN_COUNTS_FILE = "token_counts.json"  # written by `local-model tokenize-check`
TOKENIZER = "token_counts.json (the served tokenizer)"
USAGE = "usage.prompt_tokens (reported by the endpoint)"
CHARACTERS = "characters of the prompt text (no token count recorded)"


def near_kind(row: Mapping[str, str], answer: Mapping[str, Any]) -> str | None:
    """The kind of the near name whose code a wrong answer gives (``unrelated`` under low)."""
    codes, kinds = list(answer.get("near_codes", ())), answer.get("near_kinds", ())
    code = java_trim(row["response_text"]) if row["status"] == ERROR and kinds else None
    return kinds[codes.index(code)] if code in codes else None


def _size(length: int, unit: str, source: str, values: list[int]) -> LengthSize:
    return LengthSize(
        length=length,
        unit=unit,
        source=source,
        requests=len(values),
        minimum=min(values),
        median=float(statistics.median(values)),
        maximum=max(values),
    )


def _tokenizer_counts(prepared: Prepared) -> dict[int, list[int]] | None:
    """Per length, the prompt tokens ``token_counts.json`` records, if it is whole and ours."""
    path = prepared.root / TOKEN_COUNTS_FILE
    try:
        if not path.is_file() or path.stat().st_size > 64 * 1024 * 1024:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("prepared_fingerprint") != prepared.fingerprint:
            return None
        lengths = {p.seq: p.length for p in prepared.plan}
        out: dict[int, list[int]] = defaultdict(list)
        for r in data["requests"]:
            tokens = r["prompt_tokens"]
            if type(tokens) is not int or lengths.get(r["seq"]) != r["length"]:
                return None
            out[r["length"]].append(tokens)
        return dict(out) if sorted(out) == sorted(set(lengths.values())) else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # unreadable or another shape: the next source is used


def length_sizes(prepared: Prepared, outcomes: Iterable[Any]) -> tuple[LengthSize, ...]:
    """Prompt size per background length, from the best source available for all of them."""
    rows = list(outcomes)
    lengths = sorted({o.length for o in rows})
    counted = _tokenizer_counts(prepared)
    if counted is not None:
        return tuple(_size(n, "tokens", TOKENIZER, counted[n]) for n in lengths)
    usage: dict[int, list[int]] = defaultdict(list)
    for o in rows:
        if o.prompt_tokens is not None:
            usage[o.length].append(o.prompt_tokens)
    if all(usage.get(n) for n in lengths):
        return tuple(_size(n, "tokens", USAGE, usage[n]) for n in lengths)
    chars: dict[int, list[int]] = defaultdict(list)
    for p in prepared.plan:
        chars[p.length].append(text_chars(json.loads(prepared.bodies[p.seq])))
    return tuple(_size(n, "characters", CHARACTERS, chars[n]) for n in lengths)


def run_context(
    prepared: Prepared, outcomes: Iterable[Any], records: list[dict[str, Any]] | None,
    base_url: str | None = None,
) -> RunContext:  # fmt: skip
    """The context of a run (``records``: its journal) or of a results table (None)."""
    host = urlsplit(base_url).hostname if base_url else None
    times = sorted(str(r["time"])[:10] for r in records or () if isinstance(r.get("time"), str))
    return RunContext(
        endpoint_host=host,
        first_date=times[0] if times else None,
        last_date=times[-1] if times else None,
        sessions=None if records is None else sum(r.get("type") == "session" for r in records),
        lengths=length_sizes(prepared, outcomes),
    )


def sessions_by_seq(records: Iterable[dict[str, Any]]) -> dict[int, int]:
    """The session that sent each attempted seq (the session record before its attempt)."""
    current, out = 0, {}
    for r in records:
        if r.get("type") == "session":
            current = int(r.get("session") or current + 1)
        elif r.get("type") == "attempt" and isinstance(r.get("seq"), int):
            out.setdefault(r["seq"], current)
    return out


def run_facts(
    run_dir: Path, prepared: Prepared, outcomes: Iterable[Any]
) -> tuple[RunContext, dict[int, int]]:
    """The context of a run folder and the session of each seq, from run.json and the journal."""
    from needlepoint.run.folder import read_run_record
    from needlepoint.run.journal import walk

    # Only what the context needs of each record, read as a stream: never the bodies.
    records = walk(run_dir).state.timeline()
    base_url = read_run_record(run_dir).base_url
    return run_context(prepared, outcomes, records, base_url), sessions_by_seq(records)
