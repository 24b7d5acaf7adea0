"""`needlepoint self-test`: the built-in rule checks, runnable without pytest or the test tree.

Checks come from the provider functions in ``CHECK_PROVIDERS``, imported directly so that a
reader (or a tool) can follow them; each yields ``(name, passed)`` pairs. Another module adds
its own rule checks with a provider function listed there.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from needlepoint.cli.run import command
from needlepoint.run.scoring import scoring_selftest_checks


def java_vectors() -> dict[str, Any]:
    """The java.util.Random / shuffle / trim vectors produced by a real OpenJDK 17."""
    text = resources.files("needlepoint").joinpath("data/java_vectors.json").read_text("utf-8")
    return json.loads(text)


def java_vector_checks() -> Iterator[tuple[str, bool]]:
    """One check per recorded Java stream."""
    from needlepoint.rand import JavaRandom, shuffle

    v = java_vectors()
    for e in v["nextInt_bound"]:
        r = JavaRandom(e["seed"])
        got = [r.nextInt(e["bound"]) for _ in e["values"]]
        yield f"nextInt({e['bound']}) seed {e['seed']}", got == e["values"]
    for e in v["nextInt"]:
        r = JavaRandom(e["seed"])
        yield f"nextInt() seed {e['seed']}", [r.nextInt() for _ in e["values"]] == e["values"]
    for e in v["shuffle"]:
        items = list(range(e["size"]))
        shuffle(items, JavaRandom(e["seed"]))
        yield f"shuffle size {e['size']} seed {e['seed']}", items == e["result"]


def reference_set_checks() -> Iterator[tuple[str, bool]]:
    """Generate the reference set in memory, then verify and audit it from a temporary copy."""
    from needlepoint.design.audit import audit_prepared
    from needlepoint.design.generate import generate
    from needlepoint.design.prepared import prepare
    from needlepoint.design.protocol import reference_protocol
    from needlepoint.design.verify import verify_prepared

    first, second = generate(reference_protocol()), generate(reference_protocol())
    yield "reference set generates identical bytes twice", first == second
    yield "reference set has 128 requests", first["requests.jsonl"].count(b"\n") == 128
    with tempfile.TemporaryDirectory() as tmp:
        folder = prepare(Path(tmp) / "prepared")
        yield "prepared folder verifies", verify_prepared(folder).ok
        for check in audit_prepared(folder).checks:
            yield f"audit {check.name} ({check.count} items)", check.ok and check.count > 0


def _reply(choice: dict[str, Any], model: str = "m") -> bytes:
    return json.dumps({"model": model, "choices": [choice]}).encode()


def profile_checks() -> Iterator[tuple[str, bool]]:
    """Body profiles: each one's request shape, and where its answer is read and scored.

    Why: a model variant keeps the design's scoring only if every profile reads the same final
    text by the same rules; reasoning text must never reach the score.
    """
    from needlepoint.design.profiles import build_body, convert
    from needlepoint.run.scoring import classify

    base = {"model": "m", "temperature": 0, "max_tokens": 16}
    chat = build_body(base, "S", "U")
    yield (
        "chat body: temperature and max_tokens",
        (chat.get("temperature"), chat.get("max_tokens")) == (0, 16),
    )
    reasoning = build_body({**convert(base, "reasoning"), "model": "m"}, "S", "U")
    yield (
        "reasoning body: max_completion_tokens, no temperature",
        reasoning.get("max_completion_tokens") == 16
        and "temperature" not in reasoning
        and "max_tokens" not in reasoning,
    )
    completion = build_body({**convert(base, "completion"), "model": "m"}, "S", "U")
    yield (
        "completion body: one prompt from system and user text, frozen stop",
        isinstance(completion.get("prompt"), str)
        and completion["prompt"].startswith("S")
        and "U" in completion["prompt"]
        and "messages" not in completion
        and bool(completion.get("stop")),
    )
    key = {"expected": "OM-3642", "near_codes": [], "codes_present": ["OM-3642"]}

    def kind(choice: dict[str, Any], profile: str = "chat") -> str:
        c = classify(
            http_status=200,
            transport_error=None,
            body=_reply(choice),
            answer=key,
            model="m",
            profile=profile,
        )
        return c.kind or c.status

    msg = {"role": "assistant", "content": "OM-3642"}
    yield "chat content scored", kind({"finish_reason": "stop", "message": msg}) == "correct"
    yield (
        "completion text scored",
        kind({"finish_reason": "stop", "text": " OM-3642"}, "completion") == "correct",
    )
    yield (
        "completion ignores a chat message",
        kind({"finish_reason": "stop", "message": msg}, "completion") != "correct",
    )
    think = {"role": "assistant", "content": "<think>ZZ-9999?</think>\nOM-3642"}
    yield (
        "a leading think block is not scored",
        kind({"finish_reason": "stop", "message": think}) == "correct",
    )
    hidden = {**msg, "reasoning_content": "the answer might be ZZ-9999"}
    yield (
        "reasoning_content is not scored",
        kind({"finish_reason": "stop", "message": hidden}) == "correct",
    )
    cut = {"role": "assistant", "content": "<think>still thinking"}
    yield (
        "length with only reasoning is length_empty",
        kind({"finish_reason": "length", "message": cut}) == "length_empty",
    )
    partial = {"role": "assistant", "content": "OM-36"}
    yield (
        "length with an answer is finish_reason",
        kind({"finish_reason": "length", "message": partial}) == "finish_reason",
    )


# In the order the checks run (and are listed with --verbose).
CHECK_PROVIDERS: tuple[Callable[[], Iterable[tuple[str, bool]]], ...] = (
    java_vector_checks,
    reference_set_checks,
    scoring_selftest_checks,
    profile_checks,
)


def run_checks() -> list[tuple[str, bool]]:
    """Every check from every provider; a provider that crashes counts as one failed check."""
    results: list[tuple[str, bool]] = []
    for provider in CHECK_PROVIDERS:
        try:
            results += list(provider())
        except Exception as exc:  # a broken provider is a failed check, not a crash
            name = f"{provider.__module__}:{provider.__qualname__}"
            results.append((f"{name} raised {type(exc).__name__}: {exc}", False))
    return results


def _cmd_self_test(args: argparse.Namespace) -> int:
    """run the built-in rule checks without pytest"""
    results = run_checks()
    failed = [name for name, ok in results if not ok]
    for name in failed:
        print(f"FAIL {name}")
    if args.verbose:
        for name, ok in results:
            if ok:
                print(f"ok   {name}")
    print(f"self-test: {len(results)} checks ran, {len(results) - len(failed)} passed")
    return 0 if not failed else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add the self-test command."""
    p = command(sub, "self-test", _cmd_self_test)
    p.add_argument("-v", "--verbose", action="store_true", help="list passing checks too")
