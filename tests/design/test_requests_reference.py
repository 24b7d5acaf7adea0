"""Request bodies against PROTOCOL.md's "Requests" and "Templates" sections, for odd templates.

The reference set pins one template set byte for byte; here the templates carry the edge cases
the section spells out (format-string braces, a ``{name}`` before ``{records}``, text around
every placeholder), and every condition and similarity of a few small designs is built both
by ``RequestBuilder`` and by the section transcribed step by step.
"""

from __future__ import annotations

import itertools

import pytest

from needlepoint.design.materials import RequestBuilder, generate_cases
from needlepoint.design.protocol import reference_protocol

TEMPLATES = {
    "system": "Answer with the code only.",
    "record": "<{name}> = [{code}] {0}}",
    "user": "{name} stays literal here.\n{records}\n--\nWhat is the code of {name}? {{x}}",
}


def protocol_md_request(p: dict, case, bg, sim: str, cond: str) -> dict:
    """PROTOCOL.md, "Requests" and "Templates"."""
    t = p["templates"]
    head, rest = t["record"].split("{name}")
    mid, tail = rest.split("{code}")

    def record(name: str, code: str) -> str:
        return head + name + mid + code + tail

    n = bg.length
    slots = [((2 * k + 1) * n) // 12 for k in range(6)]
    names = list(bg.names)
    if sim == "high":
        for k, s in enumerate(slots):
            names[s] = case.near_names[k]
    lines = [record(names[j], bg.codes[j]) for j in range(n)]
    inserted = (
        record(bg.placeholder_name, bg.placeholder_code)
        if cond == "A"
        else record(case.target_name, case.target_code)
    )
    half = n // 2
    at = {"B": 0, "M": half, "A": half, "E": n}[cond]
    records = [*lines[:at], inserted, *lines[at:]]
    before, after = t["user"].split("{records}")
    user = before + "\n".join(records) + after.replace("{name}", case.target_name)
    inserted_code = bg.placeholder_code if cond == "A" else case.target_code
    return {
        "body": {
            "model": p["model"],
            "messages": [
                {"role": "system", "content": t["system"]},
                {"role": "user", "content": user},
            ],
            "temperature": p["temperature"],
            "max_tokens": p["max_tokens"],
        },
        "expected": p["unknown"] if cond == "A" else case.target_code,
        "codes_present": tuple(sorted([*bg.codes, inserted_code])),
        "near_codes": tuple(bg.codes[s] for s in slots),
        "near_names": tuple(names[s] for s in slots),
    }


@pytest.mark.parametrize(("lengths", "templates"), [([12, 25], TEMPLATES), ([13], None)])
def test_every_request_follows_protocol_md(lengths: list[int], templates: dict | None) -> None:
    p = reference_protocol()
    p["cases"], p["lengths"] = 2, lengths
    p["unknown"], p["model"], p["temperature"], p["max_tokens"] = "NONE", "m-1", 0.5, 9
    if templates:
        p["templates"] = templates
    builder = RequestBuilder(p)
    for case in generate_cases(p):
        for bg, sim, cond in itertools.product(case.backgrounds, ("low", "high"), "BMEA"):
            got = builder.build(case, bg, sim, cond)
            want = protocol_md_request(p, case, bg, sim, cond)
            assert {
                "body": got.body,
                "expected": got.expected,
                "codes_present": got.codes_present,
                "near_codes": got.near_codes,
                "near_names": got.near_names,
            } == want, (case.label, bg.length, sim, cond)
            # Built twice (from the cache the second time), the same request comes back.
            assert builder.build(case, bg, sim, cond) == got


def test_the_literal_placeholders_survive() -> None:
    p = reference_protocol()
    p["cases"], p["lengths"], p["templates"] = 1, [12], TEMPLATES
    case = generate_cases(p)[0]
    user = RequestBuilder(p).build(case, case.backgrounds[0], "low", "B").body["messages"][1]
    text = user["content"]
    assert text.startswith("{name} stays literal here.\n<" + case.target_name + "> = [")
    assert text.endswith(f"--\nWhat is the code of {case.target_name}? {{{{x}}}}")
    assert text.count("{0}}") == 13
