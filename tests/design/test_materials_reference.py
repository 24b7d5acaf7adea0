"""The material generator against PROTOCOL.md's "Materials" section, for other seeds and sizes.

The reference set pins one seed byte for byte (tests/evidence, test_freeze); a rule that the
reference draws never exercise (a repeated qualifier, a code drawn twice, an exhausted pool)
could change unnoticed there. Here the section is transcribed step by step, using only
``JavaRandom`` and ``shuffle``, and hypothesis compares it with ``generate_cases`` over seeds,
case counts, lengths and small pools, where those rules do fire.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.design import materials
from needlepoint.design.audit_rules import classify_near, shares_word
from needlepoint.design.java_random import JavaRandom, shuffle
from needlepoint.design.materials import generate_cases, near_slots
from needlepoint.design.protocol import reference_protocol
from needlepoint.errors import NeedlepointError


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
    monkeypatch.setattr(materials, "_CODE_SPACE", 300)
    p = reference_protocol()
    p["cases"], p["lengths"] = 3, [12, 30]
    cases = generate_cases(p)
    assert as_dicts(cases) == protocol_md_cases(p, code_space=300)
    codes = [c.target_code for c in cases]
    codes += [x for c in cases for b in c.backgrounds for x in (*b.codes, b.placeholder_code)]
    assert len(codes) == len(set(codes)) == 3 * (1 + 13 + 31)


def test_preparation_gives_up_after_100000_consecutive_rejections() -> None:
    assert materials._MAX_REJECTIONS == 100_000  # PROTOCOL.md, "Materials"


def test_exhausted_pools_are_refused_with_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(materials, "_MAX_REJECTIONS", 2000)  # the same rule, sooner
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
    monkeypatch.setattr(materials, "_MAX_REJECTIONS", 2000)
    p = reference_protocol()
    p["names"] = {**p["names"], pool: ["甲乙", "丙丁", "戊己"]}
    with pytest.raises(NeedlepointError) as info:
        generate_cases(p)
    assert str(info.value) == "no target with one-character neighbours in the names pools"
