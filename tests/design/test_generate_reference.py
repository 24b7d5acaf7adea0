"""The generator against PROTOCOL.md, for designs other than the reference.

The reference set pins one seed and one template set byte for byte (tests/evidence,
test_prepared); a rule that the reference never exercises (a repeated qualifier, a code drawn
twice, an exhausted pool, an odd template, another number of orders) could change unnoticed
there. Here PROTOCOL.md's "Materials", "Execution order", "Requests" and "Templates" sections
are transcribed step by step, using only ``JavaRandom`` and ``shuffle``, and hypothesis (or a
few small designs) compares them with ``generate_cases``, ``execution_plan`` and
``RequestBuilder``.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.design import generate
from needlepoint.design.audit import classify_near, shares_word
from needlepoint.design.generate import (
    RequestBuilder,
    Slot,
    execution_plan,
    generate_cases,
    near_slots,
    shuffled_cases,
)
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError
from needlepoint.rand import JavaRandom, shuffle


def protocol_md_cases(p: dict, code_space: int = 26 * 26 * 10000) -> list[dict]:
    """PROTOCOL.md, "Materials", transcribed step by step."""
    names = p["names"]
    places, sites, quals, suffix = (
        names["places"],
        names["sites"],
        names["qualifiers"],
        names["suffix"],
    )
    P, S, Q = len(places), len(sites), len(quals)  # the document's names
    rnd = JavaRandom(p["seeds"]["materials"])
    used: set[str] = set()

    def words() -> tuple[str, str, str]:
        idx = rnd.nextInt(P * S * Q)
        return places[idx // (S * Q)], sites[(idx // Q) % S], quals[idx % Q]

    def neighbours(word: str, pool: list[str]) -> list[str]:
        return [w for w in pool if (w[0] != word[0]) + (w[1] != word[1]) == 1]

    def code() -> str:
        while True:
            idx = rnd.nextInt(code_space)
            letters = idx // 10000
            c = chr(65 + letters // 26) + chr(65 + letters % 26) + "-" + f"{idx % 10000:04d}"
            if c not in used:
                used.add(c)
                return c

    def unrelated(taken: set[str], target: str) -> str:
        grams = {target[k : k + 2] for k in range(7)} - {suffix}
        for _ in range(100_000):
            name = "".join(words()) + suffix
            if name not in taken and not any(g in name for g in grams):
                taken.add(name)
                return name
        raise NeedlepointError("exhausted")

    cases, targets = [], set()
    for c in range(p["cases"]):
        for _ in range(100_000):  # 1. target
            place, site, qual = words()
            target = place + site + qual + suffix
            if target not in targets and neighbours(place, places) and neighbours(site, sites):
                targets.add(target)
                break
        near = []  # 2. near names
        for i, pool in ((0, places), (1, sites)):
            options = neighbours((place, site)[i], pool)
            w = [place, site, qual]
            w[i] = options[rnd.nextInt(len(options))]
            near.append(("".join(w) + suffix, "substitution"))
        skip = rnd.nextInt(3)
        swaps = [site + place + qual, place + qual + site, qual + site + place]
        near += [(swaps[t] + suffix, "swap") for t in range(3) if t != skip]
        accepted: list[str] = []
        while len(accepted) < 2:
            q = quals[rnd.nextInt(Q)]
            if q[0] != qual[0] and q[1] != qual[1] and q not in accepted:
                accepted.append(q)
        near += [(place + site + q + suffix, "qualifier") for q in accepted]
        shuffle(near, rnd)
        target_code = code()  # 3.
        backgrounds = []
        for n in p["lengths"]:  # 4.
            taken = {target, *(name for name, _ in near)}
            bg_names, bg_codes = [], []
            for _ in range(n):
                bg_names.append(unrelated(taken, target))
                bg_codes.append(code())
            placeholder = unrelated(taken, target)
            backgrounds.append((n, bg_names, bg_codes, placeholder, code()))
        cases.append(
            {
                "label": f"S{c + 1}",
                "target": target,
                "code": target_code,
                "near": near,
                "bg": backgrounds,
            }
        )
    return cases


def as_dicts(cases: tuple) -> list[dict]:
    return [
        {
            "label": c.label,
            "target": c.target_name,
            "code": c.target_code,
            "near": list(zip(c.near_names, c.near_kinds, strict=True)),
            "bg": [
                (b.length, list(b.names), list(b.codes), b.placeholder_name, b.placeholder_code)
                for b in c.backgrounds
            ],
        }
        for c in cases
    ]


def small_pools(n: int) -> dict:
    """Pools of n words each: enough neighbours, and few enough that repeats and rejections
    happen."""
    base = reference_protocol()["names"]
    return {
        **base,
        "places": base["places"][:n],
        "sites": base["sites"][:n],
        "qualifiers": base["qualifiers"][:n],
    }


@st.composite
def protocols(draw: st.DrawFn) -> dict:
    p = reference_protocol()
    p["cases"] = draw(st.integers(1, 4))
    p["lengths"] = draw(
        st.lists(st.sampled_from([12, 13, 24, 31]), min_size=1, max_size=2, unique=True)
    )
    p["seeds"] = {**p["seeds"], "materials": draw(st.integers(-(2**63), 2**63 - 1))}
    if draw(st.booleans()):
        p["names"] = small_pools(draw(st.integers(8, 14)))
    return p


@settings(derandomize=True, max_examples=60, deadline=None)
@given(protocols())
def test_generate_cases_follows_protocol_md(p: dict) -> None:
    cases = generate_cases(p)
    assert as_dicts(cases) == protocol_md_cases(p)
    for case in cases:
        assert [b.slots for b in case.backgrounds] == [near_slots(n) for n in p["lengths"]]


@settings(derandomize=True, max_examples=30, deadline=None)
@given(protocols())
def test_generated_cases_keep_the_audit_rules(p: dict) -> None:
    """The audit's own definitions, which share no code with the generator."""
    suffix = p["names"]["suffix"]
    cases = generate_cases(p)
    codes = []
    for case in cases:
        assert (
            sorted(classify_near(n, case.target_name) for n in case.near_names)
            == sorted(case.near_kinds)
            == ["qualifier", "qualifier", "substitution", "substitution", "swap", "swap"]
        )
        assert len({case.target_name, *case.near_names}) == 7
        codes.append(case.target_code)
        for bg in case.backgrounds:
            names = [*bg.names, bg.placeholder_name]
            assert len(set(names)) == len(names)
            assert not any(shares_word(n, case.target_name, suffix) for n in names)
            codes += [*bg.codes, bg.placeholder_code]
    assert len(codes) == len(set(codes))
    assert len({c.target_name for c in cases}) == len(cases)


def test_codes_drawn_twice_are_redrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    # Shrink the code space so that draws collide all the time; codes must stay unique.
    monkeypatch.setattr(generate, "_CODE_SPACE", 300)
    p = reference_protocol()
    p["cases"], p["lengths"] = 3, [12, 30]
    cases = generate_cases(p)
    assert as_dicts(cases) == protocol_md_cases(p, code_space=300)
    codes = [c.target_code for c in cases]
    codes += [x for c in cases for b in c.backgrounds for x in (*b.codes, b.placeholder_code)]
    assert len(codes) == len(set(codes)) == 3 * (1 + 13 + 31)


def test_preparation_gives_up_after_100000_consecutive_rejections() -> None:
    assert generate._MAX_REJECTIONS == 100_000  # PROTOCOL.md, "Materials"


def test_exhausted_pools_are_refused_with_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(generate, "_MAX_REJECTIONS", 2000)  # the same rule, sooner
    p = reference_protocol()
    p["names"], p["lengths"], p["cases"] = small_pools(4), [400], 1
    with pytest.raises(NeedlepointError) as info:
        generate_cases(p)
    assert str(info.value).startswith("names pools exhausted after ")
    assert str(info.value).endswith(" names: use larger pools or shorter lengths")


@pytest.mark.parametrize("pool", ["places", "sites"])
def test_pools_without_one_character_neighbours_are_refused(
    pool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(generate, "_MAX_REJECTIONS", 2000)
    p = reference_protocol()
    p["names"] = {**p["names"], pool: ["甲乙", "丙丁", "戊己"]}
    with pytest.raises(NeedlepointError) as info:
        generate_cases(p)
    assert str(info.value) == "no target with one-character neighbours in the names pools"


ORDERS = ["-".join(p) for p in itertools.permutations("BMAE")]


def protocol_md_plan(p: dict) -> list[tuple]:
    """PROTOCOL.md, "Execution order", steps 1-6."""
    c, k = p["cases"], len(p["orders"])
    cases = list(range(c))
    shuffle(cases, JavaRandom(p["seeds"]["order"]))  # 1. the shuffled case list
    plan, block, pair = [], 0, 0
    for i, case in enumerate(cases):  # 2. the i-th shuffled case
        for li, length in enumerate(p["lengths"]):  # 3. one pair per length
            pair += 1
            sims = ["low", "high"] if i % 2 == 0 else ["high", "low"]  # 4.
            for sim in sims:
                block += 1
                si = p["similarities"].index(sim)
                order = p["orders"][(i + li + si * (k // 2)) % k]  # 5.
                for cond in order.split("-"):  # 6. seq numbers every request in turn
                    plan.append((len(plan) + 1, block, pair, case, length, sim, cond, order))
    return plan


@st.composite
def designs(draw: st.DrawFn) -> dict:
    orders = draw(st.lists(st.sampled_from(ORDERS), min_size=1, max_size=5, unique=True))
    return {
        "cases": len(orders) * draw(st.integers(1, 3)),
        "orders": orders,
        "similarities": ["low", "high"],
        "lengths": draw(st.lists(st.integers(1, 500), min_size=1, max_size=3, unique=True)),
        "seeds": {"order": draw(st.integers(-(2**63), 2**63 - 1))},
    }


@settings(derandomize=True, max_examples=120, deadline=None)
@given(designs())
def test_execution_plan_follows_protocol_md(p: dict) -> None:
    plan = execution_plan(p)
    assert all(isinstance(s, Slot) for s in plan)
    got = [
        (s.seq, s.block, s.pair, s.case_index, s.length, s.similarity, s.condition, s.order)
        for s in plan
    ]
    assert got == protocol_md_plan(p)


@settings(derandomize=True, max_examples=100, deadline=None)
@given(designs())
def test_each_order_appears_equally_often_per_stratum(p: dict) -> None:
    plan = execution_plan(p)
    k = len(p["orders"])
    for length in p["lengths"]:
        for sim in ("low", "high"):
            blocks = {(s.block, s.order) for s in plan if (s.length, s.similarity) == (length, sim)}
            counts = [sum(o == order for _, o in blocks) for order in p["orders"]]
            assert counts == [p["cases"] // k] * k
    if k >= 2:  # the two blocks of a pair never share an order
        for pair in {s.pair for s in plan}:
            assert len({s.order for s in plan if s.pair == pair}) == 2


def test_shuffled_cases_is_collections_shuffle_of_the_case_indices() -> None:
    p = {"cases": 12, "seeds": {"order": 5}}
    cases = list(range(12))
    shuffle(cases, JavaRandom(5))
    assert shuffled_cases(p) == cases and sorted(cases) == list(range(12))


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
