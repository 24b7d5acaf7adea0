"""`needlepoint self-test`: the built-in rule checks, runnable without pytest or the test tree.

Checks come from providers named in ``CHECK_PROVIDERS`` as ``module:function``; each function
yields ``(name, passed)`` pairs. Other modules add their own rule checks by adding a provider.
"""

from __future__ import annotations

import argparse
import importlib
import json
import tempfile
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

CHECK_PROVIDERS = (
    "needlepoint.cli.selftest:java_vector_checks",
    "needlepoint.cli.selftest:reference_set_checks",
    "needlepoint.run.scoring:scoring_selftest_checks",
)


def java_vectors() -> dict[str, Any]:
    """The java.util.Random / shuffle / trim vectors produced by a real OpenJDK 17."""
    text = resources.files("needlepoint").joinpath("data/java_vectors.json").read_text("utf-8")
    return json.loads(text)


def java_vector_checks() -> Iterator[tuple[str, bool]]:
    """One check per recorded Java stream."""
    from needlepoint.design.java_random import JavaRandom, shuffle

    v = java_vectors()
    for e in v["nextInt_bound"]:
        r = JavaRandom(e["seed"])
        got = [r.nextInt(e["bound"]) for _ in e["values"]]
        yield f"nextInt({e['bound']}) seed {e['seed']}", got == e["values"]
    for method in ("nextInt", "nextLong", "nextDouble", "nextBoolean"):
        for e in v[method]:
            r = JavaRandom(e["seed"])
            got = [getattr(r, method)() for _ in e["values"]]
            yield f"{method}() seed {e['seed']}", got == e["values"]
    for e in v["shuffle"]:
        items = list(range(e["size"]))
        shuffle(items, JavaRandom(e["seed"]))
        yield f"shuffle size {e['size']} seed {e['seed']}", items == e["result"]


def reference_set_checks() -> Iterator[tuple[str, bool]]:
    """Generate the reference set in memory, then verify and audit it from a temporary copy."""
    from needlepoint.design.audit import audit_prepared
    from needlepoint.design.freeze import generate, prepare
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


def run_checks() -> list[tuple[str, bool]]:
    """Every check from every provider; a provider that crashes counts as one failed check."""
    results: list[tuple[str, bool]] = []
    for spec in CHECK_PROVIDERS:
        module, func = spec.split(":")
        try:
            results += list(getattr(importlib.import_module(module), func)())
        except Exception as exc:  # a broken provider is a failed check, not a crash
            results.append((f"{spec} raised {type(exc).__name__}: {exc}", False))
    return results


def _cmd_self_test(args: argparse.Namespace) -> int:
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
    p = sub.add_parser("self-test", help="run the built-in rule checks without pytest")
    p.add_argument("-v", "--verbose", action="store_true", help="list passing checks too")
    p.set_defaults(func=_cmd_self_test)
