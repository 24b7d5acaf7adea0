"""The token-boundary rule of exact matching, against a brute-force statement of the rule."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from needlepoint.contamination.matching import AnswerIndex, tokens


def lines_hit(value: str, text: str) -> list[int]:
    return [h.line for h in AnswerIndex({"k": value}).search(text)]


def test_number_does_not_match_inside_a_longer_number() -> None:
    assert lines_hit("975", "founded in 1975") == []
    assert lines_hit("975", "9750 km") == []
    assert lines_hit("975", "975a") == []
    assert lines_hit("975", "x_975") == []


def test_number_matches_at_token_boundaries() -> None:
    assert lines_hit("975", "975") == [1]
    assert lines_hit("975", "by rail: 975 km") == [1]
    assert lines_hit("975", "(975)") == [1]
    assert lines_hit("975", "9.975") == [1]  # '.' separates tokens, as in grep -w
    assert lines_hit("975", "距离975公里") == [1]  # Han characters are single tokens


def test_code_with_hyphen_and_multiword_answers() -> None:
    assert lines_hit("OM-3642", "under OM-3642.") == [1]
    assert lines_hit("OM-3642", "XOM-3642") == []
    assert lines_hit("OM-3642", "OM-36420") == []
    assert lines_hit("Lower Vetluga yard", "go to Lower Vetluga yard.") == [1]
    assert lines_hit("Lower Vetluga yard", "Lower Vetluga  yard") == []  # exact, no folding
    assert lines_hit("Lower Vetluga yard", "Lower Vetluga yards") == []


def test_exact_means_case_and_script_sensitive() -> None:
    assert lines_hit("Kestrel", "kestrel") == []
    assert lines_hit("Белозерск", "город Белозерск.") == [1]
    assert lines_hit("Белозерск", "Белозерский") == []


def test_line_numbers_count_lf_and_ignore_trailing_cr() -> None:
    index = AnswerIndex({"a": "975", "b": "OM-3642"})
    hits = list(index.search("x\r\n975 km\r\nnone\nOM-3642 and 975\n"))
    assert [(h.line, h.keys, h.text) for h in hits] == [
        (2, ("a",), "975 km"),
        (4, ("b",), "OM-3642 and 975"),
        (4, ("a",), "OM-3642 and 975"),
    ]


def test_one_value_shared_by_two_keys_reports_both() -> None:
    hits = list(AnswerIndex({"R1": "42", "R2": "42"}).search("answer 42"))
    assert [h.keys for h in hits] == [("R1", "R2")]


def test_tokens_split_words_and_single_characters() -> None:
    assert tokens("a1_b-c 中文") == ["a1_b", "-", "c", " ", "中", "文"]


def _word(c: str) -> bool:
    return (c.isalnum() or c == "_") and not ("\u4e00" <= c <= "\u9fff")


def brute(value: str, line: str) -> bool:
    """The rule as stated: an exact occurrence whose word-character edges are not glued on."""
    n = len(value)
    for i in range(len(line) - n + 1):
        if line[i : i + n] != value:
            continue
        left = not _word(value[0]) or i == 0 or not _word(line[i - 1])
        right = not _word(value[-1]) or i + n == len(line) or not _word(line[i + n])
        if left and right:
            return True
    return False


ALPHABET = st.sampled_from(list("a19 -_.中é"))
VALUE = st.text(ALPHABET, min_size=1, max_size=4).filter(lambda v: v == v.strip())


@given(value=VALUE, text=st.text(st.one_of(ALPHABET, st.just("\n")), max_size=24))
def test_index_agrees_with_the_brute_force_rule(value: str, text: str) -> None:
    expected = [n for n, line in enumerate(text.split("\n"), start=1) if brute(value, line)]
    assert lines_hit(value, text) == expected


ASCII = st.sampled_from(list("a19 -_.!\t"))


@given(values=st.lists(VALUE, min_size=1, max_size=4), text=st.text(ALPHABET, max_size=24))
def test_many_values_are_found_as_if_searched_one_by_one(values: list[str], text: str) -> None:
    index = AnswerIndex({f"k{i}": v for i, v in enumerate(values)})
    found = {h.value for h in index.search(text)}
    assert found == {v for v in values if brute(v, text)}


def token_rule(value: str, line: str) -> bool:
    """The rule as the docs state it: the value's tokens are consecutive tokens of the line."""
    vt, lt = tokens(value), tokens(line)
    return any(lt[k : k + len(vt)] == vt for k in range(len(lt) - len(vt) + 1))


@given(value=VALUE, line=st.text(ALPHABET, max_size=14))
def test_token_statement_and_edge_statement_agree(value: str, line: str) -> None:
    assert token_rule(value, line) == brute(value, line)


@given(
    values=st.lists(
        st.text(ASCII, min_size=1, max_size=4).filter(lambda v: v == v.strip()), min_size=1
    ),
    text=st.text(ASCII, max_size=24),
)
def test_ascii_fast_path_finds_what_the_rule_finds(values: list[str], text: str) -> None:
    index = AnswerIndex({f"k{i}": v for i, v in enumerate(values)})
    assert {h.value for h in index.search(text)} == {v for v in values if brute(v, text)}
