"""jsonio at its interface: canonical bytes, hashes, strict parsing and the files it refuses."""

from __future__ import annotations

import hashlib
import os
import sys
import tracemalloc
from pathlib import Path

import pytest

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import (
    MAX_JSON_DEPTH,
    canonical_bytes,
    file_sha256,
    is_canonical,
    json_depth,
    jsonl_bytes,
    parse_json,
    read_json,
    sha256_hex,
    unique_object,
)

VALUE = {"b": [1, 2.5, None, True], "a": {"é": "ü"}}
CANONICAL = '{"a":{"é":"ü"},"b":[1,2.5,null,true]}'.encode()


def test_canonical_bytes_sort_keys_keep_utf8_and_drop_whitespace() -> None:
    """Sorted keys, raw UTF-8 (no \\u escapes) and no spaces after separators."""
    assert canonical_bytes(VALUE) == CANONICAL


def test_canonical_bytes_refuse_nan() -> None:
    """NaN has no JSON form, so it is refused rather than written as NaN."""
    with pytest.raises(ValueError):
        canonical_bytes({"x": float("nan")})


def test_is_canonical_accepts_exactly_the_canonical_bytes() -> None:
    """The canonical bytes of a value with multi-byte characters are recognised."""
    assert is_canonical(VALUE, CANONICAL)
    assert is_canonical([], b"[]")


@pytest.mark.parametrize(
    "data",
    [
        b'{"b":[1,2.5,null,true],"a":{"\xc3\xa9":"\xc3\xbc"}}',  # unsorted
        b'{"a":{"\\u00e9":"\\u00fc"},"b":[1,2.5,null,true]}',  # ASCII escapes
        b'{"a": {"\xc3\xa9": "\xc3\xbc"}, "b": [1, 2.5, null, true]}',  # spaces
        CANONICAL + b"\n",  # a trailing byte
        CANONICAL[:-1],  # one byte short
        b"",
    ],
    ids=["unsorted", "escaped", "spaced", "trailing-byte", "truncated", "empty"],
)
def test_is_canonical_refuses_any_other_bytes(data: bytes) -> None:
    """Every departure from the canonical form, however small, is not canonical."""
    assert not is_canonical(VALUE, data)


def test_is_canonical_compares_from_the_first_byte() -> None:
    """A leading extra byte is not canonical even when the rest matches."""
    assert not is_canonical(1, b" 1")
    assert is_canonical(12, b"12")


@pytest.mark.parametrize(
    ("value", "data"),
    [
        (float("nan"), b"NaN"),
        ({"x": object()}, b'{"x":null}'),
        ("\ud800", "\ud800".encode("utf-8", "surrogatepass")),
    ],
    ids=["nan", "not-serialisable", "lone-surrogate"],
)
def test_is_canonical_is_false_for_values_without_a_canonical_form(
    value: object, data: bytes
) -> None:
    """A value that canonical_bytes would refuse is never canonical, whatever the bytes."""
    assert is_canonical(value, data) is False


def test_is_canonical_is_false_for_a_value_nested_past_the_stack() -> None:
    """A value too deep to encode is not canonical (no RecursionError escapes)."""
    deep: list = []
    for _ in range(sys.getrecursionlimit() + 50):
        deep = [deep]
    assert is_canonical(deep, b"[]") is False


def test_sha256_hex_is_the_hex_digest_of_the_bytes() -> None:
    """The standard SHA-256 test vector for 'abc'."""
    assert sha256_hex(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_file_sha256_hashes_every_byte_of_a_file_over_one_chunk(tmp_path: Path) -> None:
    """A file longer than the 1 MiB read chunk is hashed whole."""
    data = bytes(range(256)) * (5 * 1024 + 3)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()
    small = tmp_path / "small.bin"
    small.write_bytes(b"abc")
    assert file_sha256(str(small)) == sha256_hex(b"abc")


def test_file_sha256_holds_at_most_two_mib_of_a_large_file_at_once(tmp_path: Path) -> None:
    # Streamed in 1 MiB pieces: the piece being hashed and the one being read are the most held
    # at once. Reading the whole file, or larger pieces, would hold more.
    path = tmp_path / "large.bin"
    path.write_bytes(b"a" * (16 << 20))
    tracemalloc.start()
    try:
        file_sha256(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 << 20


def test_file_sha256_follows_a_link_to_a_file(tmp_path: Path) -> None:
    """A symbolic link to a regular file is hashed as that file."""
    (tmp_path / "target").write_bytes(b"abc")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert file_sha256(tmp_path / "link") == sha256_hex(b"abc")


def test_file_sha256_refuses_a_fifo(tmp_path: Path) -> None:
    """A FIFO is refused in one line instead of blocking the reader."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NeedlepointError) as caught:
        file_sha256(fifo)
    assert str(caught.value) == f"{fifo}: is a FIFO, not a file to read"


def test_read_json_reads_a_document_and_follows_links_by_default(tmp_path: Path) -> None:
    """By default a link to a JSON file is read like the file."""
    (tmp_path / "doc.json").write_bytes(CANONICAL)
    (tmp_path / "link.json").symlink_to(tmp_path / "doc.json")
    assert read_json(tmp_path / "doc.json") == VALUE
    assert read_json(str(tmp_path / "link.json")) == VALUE


def test_read_json_without_follow_refuses_a_link(tmp_path: Path) -> None:
    """follow=False (a run folder's records) refuses a symbolic link."""
    (tmp_path / "doc.json").write_bytes(b"{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "doc.json")
    assert read_json(tmp_path / "doc.json", follow=False) == {}
    with pytest.raises(NeedlepointError) as caught:
        read_json(tmp_path / "link.json", follow=False)
    assert str(caught.value).startswith(f"{tmp_path / 'link.json'}: ")


def test_read_json_refuses_a_fifo_unless_pipes(tmp_path: Path) -> None:
    """A FIFO is refused by default, in one line that says what it is."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(NeedlepointError) as caught:
        read_json(fifo)
    assert str(caught.value) == f"{fifo}: is a FIFO, not a file to read"


def test_read_json_with_pipes_reads_a_pipe() -> None:
    """pipes=True reads a document from a pipe, as from ``--protocol <(...)``."""
    r, w = os.pipe()
    try:
        os.write(w, b'{"a": [1]}')
        os.close(w)
        assert read_json(f"/dev/fd/{r}", pipes=True) == {"a": [1]}
    finally:
        os.close(r)


def test_read_json_names_the_byte_that_is_not_utf8(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are refused with the reason and the byte offset."""
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(NeedlepointError) as caught:
        read_json(path)
    assert str(caught.value) == f"{path}: not UTF-8 (invalid start byte at byte 7)"


def test_read_json_names_the_file_and_line_of_broken_json(tmp_path: Path) -> None:
    """A parse error names the file and the line within it."""
    path = tmp_path / "broken.json"
    path.write_text('{\n"a": 1\n"b": 2}\n', encoding="utf-8")
    with pytest.raises(NeedlepointError) as caught:
        read_json(path)
    assert str(caught.value) == (f"{path}:3: broken JSON (Expecting ',' delimiter)")


def test_read_json_of_a_missing_file_says_so(tmp_path: Path) -> None:
    """A missing file is one line, not a traceback."""
    with pytest.raises(NeedlepointError) as caught:
        read_json(tmp_path / "absent.json")
    assert str(caught.value) == f"{tmp_path / 'absent.json'}: file not found"


def test_parse_json_returns_the_value_with_duplicate_free_objects() -> None:
    """Ordinary JSON parses to the same value json.loads gives."""
    assert parse_json('{"b": [1, {"c": null}], "a": 2.5}', "in.json") == {
        "b": [1, {"c": None}],
        "a": 2.5,
    }


@pytest.mark.parametrize(
    ("text", "where", "line", "message"),
    [
        # Without a given line, the parser's own line number is named.
        ("[1,\n2\n3]", "in.json", None, "in.json:3: broken JSON (Expecting ',' delimiter)"),
        # With a given line (a JSONL file), that line is named, not the one in the text.
        ("\n\n{", "in.jsonl", 7, "in.jsonl:7: broken JSON (Expecting property name enclosed"),
        # A duplicate key without a given line names the file alone.
        (
            '{"a": 1, "a": 2}',
            "in.json",
            None,
            "in.json: duplicate key 'a' (each key may appear once)",
        ),
    ],
    ids=["line-in-text", "given-line", "duplicate-key"],
)
def test_parse_json_names_where_a_refusal_is(
    text: str, where: str, line: int | None, message: str
) -> None:
    """Each refusal names the file, and the line where one is known."""
    with pytest.raises(NeedlepointError) as caught:
        parse_json(text, where, line)
    assert str(caught.value).startswith(message)


def test_parse_json_cuts_a_long_reason_to_120_characters() -> None:
    """An integer too long to read is refused with the first 120 characters of the reason."""
    with pytest.raises(NeedlepointError) as caught:
        parse_json("1" * 5000, "in.json", 2)
    reason = (
        "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits; "
        "use sys.set_int_max_str_digits() to increase the limit"
    )[:120]
    assert str(caught.value) == f"in.json:2: not JSON ({reason})"


def test_parse_json_refuses_nesting_past_the_parsers_stack() -> None:
    """Nesting deeper than the parser can recurse is one line, not a RecursionError."""
    depth = 100_000
    with pytest.raises(NeedlepointError) as caught:
        parse_json("[" * depth + "]" * depth, "in.json")
    assert str(caught.value) == "in.json: JSON nested too deeply"


def test_parse_json_allows_exactly_the_maximum_depth() -> None:
    """MAX_JSON_DEPTH (128) levels are read; one more is refused with the limit named."""
    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json_depth(parse_json(ok, "in.json")) == MAX_JSON_DEPTH
    deeper = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(NeedlepointError) as caught:
        parse_json(deeper, "in.json", 4)
    assert str(caught.value) == "in.json:4: JSON nested more than 128 levels deep"


@pytest.mark.parametrize(
    ("value", "depth"),
    [
        (1, 0),
        ("[[]]", 0),
        ([], 1),
        ({}, 1),
        ({"a": []}, 2),
        ({"a": {"b": [1, {"c": []}]}}, 5),
        ([[], [[[]]], []], 4),
        ([[[[]]], []], 4),
    ],
    ids=[
        "int",
        "string",
        "list",
        "dict",
        "dict-of-list",
        "mixed",
        "deepest-middle",
        "deepest-first",
    ],
)
def test_json_depth_counts_nested_objects_and_lists(value: object, depth: int) -> None:
    """Depth is the number of containers on the deepest path, scalars and strings counting 0."""
    assert json_depth(value) == depth


def test_unique_object_keeps_distinct_keys_in_order() -> None:
    """Distinct keys give the ordinary dict, in the order written."""
    value = unique_object([("b", 1), ("a", [2])])
    assert value == {"b": 1, "a": [2]} and list(value) == ["b", "a"]


def test_unique_object_names_the_repeated_key() -> None:
    """A key that appears twice is refused with its name, even when the values agree."""
    with pytest.raises(ValueError) as caught:
        unique_object([("a", 1), ("b", 2), ("b", 2)])
    assert getattr(caught.value, "key", None) == "b"


def test_jsonl_bytes_end_each_canonical_document_with_a_newline() -> None:
    """One canonical document per line, the last also newline-terminated; none gives no bytes."""
    assert jsonl_bytes([1, {"b": 1, "a": "é"}]) == '1\n{"a":"é","b":1}\n'.encode()
    assert jsonl_bytes([]) == b""
