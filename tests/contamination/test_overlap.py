"""Reference vs context: exact matches with file:line, discards and manifest verification, and
the token-boundary rule of exact matching, against a brute-force statement of the rule.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.contamination import context_file, discards, reference

from needlepoint.contamination.context import build_manifest, load_context, write_manifest
from needlepoint.contamination.inputs import read_discards, read_reference
from needlepoint.contamination.overlap import AnswerIndex, check_overlap, tokens
from needlepoint.errors import NeedlepointError


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    context_file(ws, "CLAUDE.md", "# Rules\nPilot hands over under OM-3642.\n")
    context_file(ws, "memory/facts.md", "distance 975 km\nfounded 1975\nOM-3642 again\n")
    context_file(ws, "src/code.py", "KT-4471 = 1\n")  # not automatic context
    ref = reference(
        tmp_path / "ref.csv", {"R1": "OM-3642", "R2": "975", "R3": "KT-4471", "R4": "1"}
    )
    return ws, ref


def test_matches_report_file_and_line_and_share(setup: tuple[Path, Path]) -> None:
    ws, ref = setup
    result = check_overlap(read_reference(ref), load_context(ws))
    assert [(m.reference_id, m.where) for m in result.matches] == [
        ("R1", "CLAUDE.md:2"),
        ("R1", "memory/facts.md:3"),
        ("R2", "memory/facts.md:1"),
    ]
    assert result.present_ids == ("R1", "R2")
    assert result.share == 0.5 and result.leaked
    assert result.sentence().startswith("2 of 4 reference answers present")


def test_no_overlap_is_clean(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    context_file(ws, "CLAUDE.md", "nothing to see; 1975 and XOM-3642\n")
    ref = reference(tmp_path / "ref.csv", {"R1": "OM-3642", "R2": "975"})
    result = check_overlap(read_reference(ref), load_context(ws))
    assert result.matches == () and result.share == 0 and not result.leaked


def test_discard_with_reason_removes_only_that_match(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    d = discards(tmp_path / "d.csv", [("R2", "memory/facts.md", 1, "a rail distance, by chance")])
    result = check_overlap(read_reference(ref), load_context(ws), read_discards(d))
    assert result.present_ids == ("R1",)
    assert [(m.reference_id, m.discard_reason) for m in result.discarded] == [
        ("R2", "a rail distance, by chance")
    ]
    assert result.unused_discards == ()


def test_discard_without_reason_is_refused(setup: tuple[Path, Path], tmp_path: Path) -> None:
    d = discards(tmp_path / "d.csv", [("R2", "memory/facts.md", 1, "")])
    with pytest.raises(NeedlepointError, match=r"d\.csv:2: field reason"):
        read_discards(d)


def test_discard_of_unknown_id_is_refused_and_stale_one_reported(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    bad = discards(tmp_path / "bad.csv", [("R9", "memory/facts.md", 1, "chance")])
    with pytest.raises(NeedlepointError, match=r"bad\.csv:2: field reference_id: 'R9'"):
        check_overlap(read_reference(ref), load_context(ws), read_discards(bad))
    stale = discards(tmp_path / "stale.csv", [("R2", "memory/facts.md", 2, "moved line")])
    result = check_overlap(read_reference(ref), load_context(ws), read_discards(stale))
    assert [d.line for d in result.unused_discards] == [2]
    assert result.present_ids == ("R1", "R2")


def test_manifest_context_verifies_hashes_and_says_so(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    manifest = tmp_path / "m.json"
    write_manifest(build_manifest(ws), manifest)
    result = check_overlap(read_reference(ref), load_context(manifest))
    assert result.verification is not None and result.verification.verified
    assert result.verification.sentence() == "all 2 frozen files still hash as frozen"

    context_file(ws, "memory/facts.md", "distance 975 km\n")
    (ws / "CLAUDE.md").unlink()
    context_file(ws, "notes/new.md", "OM-3642\n")
    result = check_overlap(read_reference(ref), load_context(manifest))
    check = result.verification
    assert check is not None and not check.verified
    assert [(c.path, c.kind) for c in check.changes] == [
        ("CLAUDE.md", "missing"),
        ("memory/facts.md", "changed"),
        ("notes/new.md", "added"),
    ]
    assert "not the frozen context" in check.sentence()


def test_single_file_context_and_include_override(setup: tuple[Path, Path]) -> None:
    ws, ref = setup
    one = check_overlap(read_reference(ref), load_context(ws / "memory" / "facts.md"))
    assert [m.where for m in one.matches] == ["facts.md:3", "facts.md:1"]
    code = check_overlap(read_reference(ref), load_context(ws, ["src/**"]))
    assert [(m.reference_id, m.where) for m in code.matches] == [
        ("R3", "src/code.py:1"),
        ("R4", "src/code.py:1"),
    ]


def test_undecodable_context_file_is_matched_and_reported(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "bin.md").write_bytes(b"\xff\xfe 975 km\n")
    ref = reference(tmp_path / "ref.csv", {"R2": "975"})
    result = check_overlap(read_reference(ref), load_context(ws))
    assert result.present_ids == ("R2",)
    assert [(p.path, p.kind) for p in result.problems] == [("memory/bin.md", "not-utf8")]


def test_fifo_in_place_of_a_frozen_file_is_reported(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, ref = setup
    manifest = tmp_path / "m.json"
    write_manifest(build_manifest(ws), manifest)
    (ws / "CLAUDE.md").unlink()
    os.mkfifo(ws / "CLAUDE.md")
    result = check_overlap(read_reference(ref), load_context(manifest))  # must not block
    assert ("CLAUDE.md", "not-a-regular-file") in {(p.path, p.kind) for p in result.problems}
    assert result.verification is not None
    assert [(c.path, c.kind) for c in result.verification.changes] == [("CLAUDE.md", "unreadable")]


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
