"""PROTOCOL.md is a port's only source, so the facts it states are checked against the generator.

Check values (hashes, redraw locations, field lists) are parsed out of PROTOCOL.md itself, so the
document and the code cannot drift apart without a test failing.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from needlepoint.design import generate
from needlepoint.design.audit import audit_prepared
from needlepoint.design.generate import execution_plan, shuffled_cases
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.design.protocol import load_override, reference_protocol, validate
from needlepoint.design.schema import DATA_FILES
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes
from needlepoint.rand import JavaRandom

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "PROTOCOL.md"
EXAMPLE = ROOT / "protocols" / "spec-redraws.json"


def _section(title: str) -> str:
    """The text of one `## ` section of PROTOCOL.md, found by the start of its title."""
    text = SPEC.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}.*?(?=^## |\Z)", text, re.M | re.S)
    assert match, f"PROTOCOL.md has no section {title!r}"
    return match.group(0)


def _example_protocol() -> dict[str, Any]:
    return load_override(EXAMPLE)


@pytest.fixture(scope="module")
def example_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spec example prepared once; treat as read-only."""
    return prepare(tmp_path_factory.mktemp("spec") / "prepared", EXAMPLE)


# -- the reference example -------------------------------------------------------------------


def test_example_prepares_verifies_and_audits(example_dir: Path) -> None:
    """The example is a valid protocol whose folder passes both independent checks."""
    report = verify_prepared(example_dir)
    assert report.ok, report.problems
    audit = audit_prepared(example_dir)
    assert audit.ok, audit.lines()


def test_example_hashes_are_the_documented_ones(example_dir: Path) -> None:
    """A port checks itself against these values, so they must be the generator's."""
    section = _section("Reference example")
    stated = dict(re.findall(r"^(\S+\.(?:json|jsonl|csv))\s+([0-9a-f]{64})$", section, re.M))
    assert set(stated) == set(DATA_FILES)
    for name in DATA_FILES:
        assert hashlib.sha256((example_dir / name).read_bytes()).hexdigest() == stated[name], name
    fingerprint = re.search(r"Materials fingerprint: `([0-9a-f]{64})`", section)
    assert fingerprint and load_prepared(example_dir).fingerprint == fingerprint.group(1)


def test_documented_override_is_the_committed_file() -> None:
    """The JSON shown in PROTOCOL.md is the committed file, description aside."""
    block = re.search(r"```json\n(.*?)```", _section("Reference example"), re.S)
    assert block
    committed = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    assert json.loads(block.group(1)) == {k: v for k, v in committed.items() if k != "description"}
    assert committed["version"] != 1


def _observe_redraws(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Generate the example, recording every rejected code() and target() draw.

    ``nextInt`` is wrapped to number the draws; every draw a code() or target() call makes
    before its last one was rejected. Rejected values are decoded with PROTOCOL.md's formulas.
    """
    protocol = _example_protocol()
    names = protocol["names"]
    places, sites, quals = names["places"], names["sites"], names["qualifiers"]
    s, q = len(sites), len(quals)
    draws: list[int] = []
    targets: list[str] = []
    codes: list[str] = []
    rejected: list[tuple[str, str, int, str]] = []
    real_next, real_code, real_target = (
        JavaRandom.nextInt,
        generate._Drawer.code,
        generate._Drawer.target,
    )

    def next_int(self: JavaRandom, bound: int | None = None) -> int:
        value = real_next(self, bound)
        draws.append(value)
        return value

    def code(self: generate._Drawer) -> str:
        start = len(draws)
        value = real_code(self)
        for n in range(start, len(draws) - 1):
            letters, digits = divmod(draws[n], 10000)
            word = chr(65 + letters // 26) + chr(65 + letters % 26) + f"-{digits:04d}"
            rejected.append(("code", f"S{len(targets)}", n + 1, word))
        codes.append(value)
        return value

    def target(self: generate._Drawer, taken: set[str]) -> tuple[str, str, str]:
        start = len(draws)
        value = real_target(self, taken)
        for n in range(start, len(draws) - 1):
            idx = draws[n]
            name = places[idx // (s * q)] + sites[idx // q % s] + quals[idx % q] + names["suffix"]
            rejected.append(("target", f"S{len(targets) + 1}", n + 1, name))
        targets.append("".join(value) + names["suffix"])
        return value

    monkeypatch.setattr(JavaRandom, "nextInt", next_int)
    monkeypatch.setattr(generate._Drawer, "code", code)
    monkeypatch.setattr(generate._Drawer, "target", target)
    cases = generate.generate_cases(protocol)
    return {
        "rejected": rejected,
        "targets": targets,
        "codes": codes,
        "draws": len(draws),
        "cases": cases,
    }


def test_example_takes_both_redraws(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example exists to exercise both redraws; v1 and v2 take neither."""
    seen = _observe_redraws(monkeypatch)
    rejected = seen["rejected"]
    codes_rejected = [r for r in rejected if r[0] == "code"]
    assert codes_rejected, "no code() draw was rejected"
    assert all(r[3] in seen["codes"] for r in codes_rejected)  # it repeated an earlier code
    repeats = [r for r in rejected if r[0] == "target" and r[3] in seen["targets"]]
    assert repeats, "no target() draw repeated an earlier target"
    for _, case, _, name in repeats:
        assert seen["targets"].index(name) < int(case[1:]) - 1  # an *earlier* case's target


def test_redraw_table_is_what_the_generator_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row of PROTOCOL.md's redraw table, and no other rejection, happens at that draw."""
    section = _section("Reference example")
    rows = re.findall(
        r"^\| (target|code) \| (S\d+) \| [^|]+ \| (\d+) \| (\S+) \| [^|]+ \|$", section, re.M
    )
    stated = [(kind, case, int(draw), value) for kind, case, draw, value in rows]
    seen = _observe_redraws(monkeypatch)
    assert seen["rejected"] == stated
    total = re.search(r"makes (\d+) draws in all", section)
    assert total and seen["draws"] == int(total.group(1))
    order = re.search(r"shuffled case order is ((?:S\d+, )*S\d+)", section)
    assert order
    assert [f"S{i + 1}" for i in shuffled_cases(_example_protocol())] == order.group(1).split(", ")
    targets = re.findall(r"(S\d+) (\S+项目)\s+\(([A-Z]{2}-\d{4})\)", section)
    assert len(targets) == len(seen["cases"])
    for label, target, code in targets:
        case = seen["cases"][int(label[1:]) - 1]
        assert (case.target_name, case.target_code) == (target, code)


# -- file formats ------------------------------------------------------------------------------


def test_plan_csv_is_unquoted_lf_lowercase_hex(example_dir: Path) -> None:
    """plan.csv bytes are as documented: header, LF only, final newline, no quoting."""
    data = (example_dir / "plan.csv").read_bytes()
    header = re.search(r"`(seq,[a-z_,0-9]+)`", _section("Files"))
    assert header and data.startswith(header.group(1).encode() + b"\n")
    assert data.endswith(b"\n") and not data.endswith(b"\n\n")
    assert b"\r" not in data and b'"' not in data
    bodies = load_prepared(example_dir).bodies
    for line in data.decode().splitlines()[1:]:
        fields = line.split(",")
        assert len(fields) == 9 and re.fullmatch(r"[0-9a-f]{64}", fields[-1])
        assert hashlib.sha256(bodies[int(fields[0])]).hexdigest() == fields[-1]


def test_answer_key_fields_are_the_documented_ones(example_dir: Path) -> None:
    """Every answer-key line is canonical JSON with exactly the fields PROTOCOL.md lists."""
    section = _section("Files")
    listed = section[section.index("`answer_key.jsonl`:") : section.index("`manifest.json`,")]
    documented = set(re.findall(r"^  - `([a-z_]+)`:", listed, re.M))
    assert len(documented) == 10
    kinds = {"low": {"unrelated"}, "high": {"substitution", "swap", "qualifier"}}
    for raw in (example_dir / "answer_key.jsonl").read_bytes().splitlines(keepends=True):
        key = json.loads(raw)
        assert set(key) == documented
        assert raw == canonical_bytes(key) + b"\n"
        assert set(key["near_kinds"]) == kinds[key["similarity"]]
        assert key["codes_present"] == sorted(key["codes_present"])


def test_requests_lines_and_message_shape(example_dir: Path) -> None:
    """Lines are {"body","seq"} canonical; bodies hold exactly the documented members."""
    for seq, raw in enumerate((example_dir / "requests.jsonl").read_bytes().splitlines(), 1):
        line = json.loads(raw)
        assert raw == canonical_bytes(line) and line["seq"] == seq
        body = line["body"]
        assert raw.startswith(b'{"body":{"max_tokens":')
        assert sorted(body) == ["max_tokens", "messages", "model", "temperature"]
        assert [sorted(m) for m in body["messages"]] == [["content", "role"]] * 2
        assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_protocol_json_layout(example_dir: Path) -> None:
    """protocol.json: 2-space indent, ',' then newline, '": "', one final newline."""
    text = (example_dir / "protocol.json").read_text(encoding="utf-8")
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert all(line == line.rstrip() for line in text.split("\n"))
    assert '  "lengths": [\n    12\n  ],\n' in text
    assert '"threshold": 0.1\n' in text and '"temperature": 0,\n' in text


# -- numbers, generator, order, templates, overrides ---------------------------------------------


def test_documented_float_layouts_are_pythons() -> None:
    """Each float example in the Numbers section is exactly how canonical JSON writes it."""
    section = _section("Canonical JSON")
    rules = section[section.index("- if `-4 <= e < 16`") : section.index("- NaN")]
    examples = re.findall(r"`(-?\d+(?:\.\d+)?(?:e[+-]\d+)?)`", rules)
    assert len(examples) >= 10
    for text in examples:
        assert canonical_bytes(float(text)) == text.encode()
    assert canonical_bytes([0, 0.0, 2**63 - 1]) == b"[0,0.0,9223372036854775807]"


def test_float_temperature_keeps_version_1_but_changes_the_bytes(tmp_path: Path) -> None:
    """temperature is a model-variant field: 0.0 is a v1 variant whose bytes differ from v1's."""
    path = tmp_path / "float.json"
    path.write_text('{"temperature": 0.0}', encoding="utf-8")
    protocol = load_override(path)
    assert protocol["version"] == 1
    assert b'"temperature":0.0' in canonical_bytes({"temperature": protocol["temperature"]})
    path.write_text('{"temperature": false}', encoding="utf-8")
    with pytest.raises(NeedlepointError, match="field temperature: expected a finite number"):
        load_override(path)


def test_design_fields_are_compared_as_their_canonical_bytes() -> None:
    """Python finds 8 == 8.0 == True; the version rule, like the fingerprint, does not."""
    from needlepoint.design.protocol import _changed_fields

    for other in (8.0, True):
        assert _changed_fields({"cases": 8}, {"cases": other}) == ["cases"]
    assert _changed_fields({"cases": 8}, {"cases": 8}) == []
    p = reference_protocol() | {"cases": 8.0}
    with pytest.raises(NeedlepointError, match="field cases: expected an integer"):
        validate(p)


def test_power_of_two_bound_needs_a_64_bit_product() -> None:
    """(bound * r) >> 31 overflows 32 bits for large power-of-two bounds."""
    bound, rnd, twin = 1 << 30, JavaRandom(20260930), JavaRandom(20260930)
    truncated_differs = False
    for _ in range(50):
        r = twin.next(31)
        assert rnd.nextInt(bound) == (bound * r) >> 31 == r >> 1
        wrapped = (bound * r) & 0xFFFFFFFF
        truncated_differs |= (wrapped - (1 << 32) if wrapped >> 31 else wrapped) >> 31 != r >> 1
    assert truncated_differs
    assert JavaRandom(1).nextInt(1) == 0


def test_cases_divide_by_len_orders_and_high_offset_is_floor_half() -> None:
    """The real rule is a multiple of len(orders), and the high offset is len(orders) // 2."""
    p = reference_protocol()
    p.update(version=2, cases=3, orders=["B-M-E-A", "M-E-A-B", "E-A-B-M"])
    validate(p)
    shuffled = shuffled_cases(p)
    for slot in execution_plan(p):
        i = shuffled.index(slot.case_index)
        li = p["lengths"].index(slot.length)
        si = p["similarities"].index(slot.similarity)
        assert slot.order == p["orders"][(i + li + si * (3 // 2)) % 3]
    p["cases"] = 4
    with pytest.raises(NeedlepointError, match="multiple"):
        validate(p)


def test_overrides_merge_objects_and_replace_lists(tmp_path: Path) -> None:
    """Objects merge key by key, lists are replaced whole, unknown keys are refused."""
    path = tmp_path / "o.json"
    path.write_text('{"version": 2, "seeds": {"materials": 7}, "lengths": [12]}', "utf-8")
    p = load_override(path)
    assert p["seeds"] == {"materials": 7, "order": 20260930} and p["lengths"] == [12]
    path.write_text('{"version": 2, "names": {"towns": ["松塔"]}}', "utf-8")
    with pytest.raises(NeedlepointError, match="unknown protocol field 'towns'"):
        load_override(path)


def test_templates_are_literal_and_name_is_replaced_after_records_only() -> None:
    """Braces are never format syntax; {name} is replaced only in the text after {records}."""
    p = _example_protocol()
    p["version"] = 101
    for user, question in (("{records}\nwho is {name}? {code}", "\nwho is {target}? {{code}}"),):
        p["templates"] = {"system": "plain", "record": "{{{name}}} {0} {code}", "user": user}
        validate(p)
        case = generate.generate_cases(p)[0]
        bg = case.backgrounds[0]
        body = generate.RequestBuilder(p).build(case, bg, "low", "B").body
        records = [(case.target_name, case.target_code), *zip(bg.names, bg.codes, strict=True)]
        expected = user.split("{records}")[0] + "\n".join(
            "{{" + name + "}} {0} " + code for name, code in records
        )
        assert body["messages"][1]["content"] == expected + question.format(target=case.target_name)


@pytest.mark.parametrize(
    ("templates", "message"),
    [
        ({"record": "{code} for {name}"}, "field templates.record: {name} must come before {code}"),
        ({"user": "{name}: {records}"}, "field templates.user: {name} must come after {records}"),
    ],
)
def test_template_order_defects_are_refused_in_validation(templates, message) -> None:
    """Formerly an internal error in generation and a literal {name} that broke the audit."""
    p = reference_protocol()
    p["version"] = 2
    p["templates"] = {**p["templates"], **templates}
    with pytest.raises(NeedlepointError, match=re.escape(message)):
        validate(p)


def test_qualifiers_without_two_that_differ_in_both_characters_are_refused() -> None:
    """Formerly the qualifier-change loop never ended for such a pool."""
    p = reference_protocol()
    p["version"] = 2
    p["names"] = {**p["names"], "qualifiers": ["试验", "试修", "改验", "改修"]}
    with pytest.raises(
        NeedlepointError, match=re.escape("field names.qualifiers: '试验' needs at least two")
    ):
        validate(p)
