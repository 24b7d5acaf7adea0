"""The design stage's rule constants, each pinned at its exact boundary with literal values.

Never the constant itself: a test that imports the limit it checks moves with it.
``make mutate-constants`` (docs/mutation.md) changes each constant in turn.
"""

from __future__ import annotations

import pytest

from needlepoint.design import profiles
from needlepoint.design.generate import _Drawer
from needlepoint.errors import NeedlepointError


class _Draws:
    """A JavaRandom stand-in: hands out the given values and records the bounds asked for."""

    def __init__(self, *values: int) -> None:
        self.values, self.bounds = list(values), []

    def nextInt(self, bound: int) -> int:  # Java's name
        self.bounds.append(bound)
        return self.values.pop(0)


def drawer(*values: int) -> _Drawer:
    d = _Drawer.__new__(_Drawer)
    d.rng, d.used_codes = _Draws(*values), set()
    return d


@pytest.mark.parametrize(
    ("draw", "code"),
    [(0, "AA-0000"), (9_999, "AA-9999"), (10_000, "AB-0000"), (259_999, "AZ-9999"),
     (260_000, "BA-0000"), (6_759_999, "ZZ-9999")],
)  # fmt: skip
def test_a_code_is_one_draw_below_26_26_10000_split_into_letters_and_digits(
    draw: int, code: str
) -> None:
    d = drawer(draw)
    assert d.code() == code
    assert d.rng.bounds == [6_760_000]


def test_a_code_drawn_twice_is_drawn_again() -> None:
    d = drawer(5, 5, 6)
    assert (d.code(), d.code()) == ("AA-0005", "AA-0006")


def protocol_with_stop(stop: object) -> dict:
    from needlepoint.design.protocol import reference_protocol

    return dict(reference_protocol(), stop=stop)


def stop_problem(stop: object) -> str | None:
    try:
        profiles.validate_body_fields(protocol_with_stop(stop), "p.json")
    except NeedlepointError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "piece",
    ["A", "Z", "AB", "ZZ", "-", "A-", "Z-1", "AB-", "AB-1", "AB-1234", "-0", "-9", "B-12",
     "1", "0", "9", "12", "1234", "UNK", "NOWN"],
)  # fmt: skip
def test_a_stop_sequence_that_could_be_inside_an_answer_is_refused(piece: str) -> None:
    assert stop_problem([piece]) == f"p.json: stop sequence {piece!r} could cut an answer short"


@pytest.mark.parametrize(
    "stop",
    ["ABC", "ABC-1", "AB-12345", "12345", "@", "[", "@-1", "[-1", "AB-/", "AB-:", "/", ":",
     "a", "ab-1234", "\n", "Answer", "###"],
)  # fmt: skip
def test_a_stop_sequence_no_code_or_unknown_can_hold_is_allowed(stop: str) -> None:
    assert stop_problem([stop]) is None


def test_one_to_four_stop_sequences() -> None:
    assert stop_problem(["\n", "###", "END", "$$"]) is None
    message = "p.json: stop must be a list of 1 to 4 strings"
    assert stop_problem(["\n", "###", "END", "$$", "%%"]) == message
    assert stop_problem([]) == message
    assert stop_problem("\n") == message
    assert stop_problem([""]) == "p.json: every stop sequence must be a non-empty string"
    assert stop_problem(["\n", "\n"]) == "p.json: stop repeats a sequence"


def test_the_profiles_their_endpoints_and_defaults() -> None:
    assert profiles.PROFILES == ("chat", "reasoning", "completion")
    assert profiles.DEFAULT_PROFILE == "chat"
    assert profiles.ENDPOINTS == {
        "chat": "/chat/completions",
        "reasoning": "/chat/completions",
        "completion": "/completions",
    }
    assert profiles.body_profile({}) == "chat"


def test_a_completion_variant_gets_a_one_line_stop_and_the_answer_cue() -> None:
    from needlepoint.design.protocol import reference_protocol

    out = profiles.convert(reference_protocol(), "completion")
    assert (out["stop"], out["answer_cue"]) == (["\n"], "\nAnswer:")
    assert profiles.completion_prompt("S", "U", out["answer_cue"]) == "S\n\nU\nAnswer:"


def _seed_whose_first_31_bits_are(u: int) -> int:
    """A Java seed whose first next(31) is ``u`` (the multiplier is odd, so it inverts mod 2^48)."""
    multiplier, mask = 0x5DEECE66D, (1 << 48) - 1
    state = ((u << 17) - 0xB) * pow(multiplier, -1, 1 << 48) & mask
    return state ^ multiplier


@pytest.mark.parametrize("u", [2_147_483_646, 2_147_483_647])
def test_next_int_3_rejects_the_draws_past_the_last_whole_multiple(u: int) -> None:
    # Java rejects u when u - u % 3 + 2 overflows an int: for bound 3 only these two draws.
    from needlepoint.rand import JavaRandom

    seed = _seed_whose_first_31_bits_are(u)
    probe = JavaRandom(seed)
    assert probe.next(31) == u
    second = probe.next(31)
    assert JavaRandom(seed).nextInt(3) == second % 3
    kept = _seed_whose_first_31_bits_are(2_147_483_645)
    assert JavaRandom(kept).nextInt(3) == 2_147_483_645 % 3


def test_a_case_whose_near_names_do_not_fill_the_slots_is_refused() -> None:
    import dataclasses

    from needlepoint.design.generate import RequestBuilder, generate_cases
    from needlepoint.design.protocol import reference_protocol

    protocol = dict(reference_protocol(), cases=1)
    case = generate_cases(protocol)[0]
    short = dataclasses.replace(case, near_names=case.near_names[:5])
    builder = RequestBuilder(protocol)
    assert len(builder.lines(case, case.backgrounds[0], "high")) == case.backgrounds[0].length
    with pytest.raises(ValueError, match="zip"):
        RequestBuilder(protocol).lines(short, short.backgrounds[0], "high")
    bg = case.backgrounds[0]
    fewer = dataclasses.replace(bg, codes=bg.codes[:-1])
    with pytest.raises(ValueError, match="zip"):
        RequestBuilder(protocol).lines(case, fewer, "low")


def small_drawer(*draws: int) -> _Drawer:
    d = drawer(*draws)
    d.places, d.sites, d.quals, d.suffix = (
        ["pa", "pb"],
        ["sa", "sb"],
        ["ab", "ax", "xb", "ba", "cd"],
        "S",
    )
    return d


def test_a_qualifier_change_differs_in_both_characters() -> None:
    # Two substitutions and the skipped swap draw 0; then the qualifier draws ax, xb (each
    # keeps one character of ab: a substitution, refused), ba, ax again, cd; then the shuffle.
    d = small_drawer(0, 0, 0, 1, 2, 3, 1, 4, *[0] * 5)
    near = d.near_names(("pa", "sa", "ab"))
    assert sorted(n for n, kind in near if kind == "qualifier") == ["pasabaS", "pasacdS"]
    assert (
        sorted(kind for _, kind in near) == ["qualifier"] * 2 + ["substitution"] * 2 + ["swap"] * 2
    )


def test_neighbours_differ_in_exactly_one_character_of_the_same_length() -> None:
    d = small_drawer()
    assert d.neighbours("abc", ["abd", "xbc", "xyc", "abc", "xyz"]) == ["abd", "xbc"]
    with pytest.raises(ValueError, match="zip"):
        d.neighbours("abc", ["ab"])


def test_bigrams_are_every_two_character_substring() -> None:
    from needlepoint.design.generate import bigrams

    assert bigrams("abcd") == {"ab", "bc", "cd"}
    assert bigrams("a") == set()
