"""Depth designs and near-name placement: validation, generation, order balance and the audit."""

from __future__ import annotations

import copy
import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from needlepoint.cli import main
from needlepoint.design import positions
from needlepoint.design.audit import audit_prepared
from needlepoint.design.audit import positions as audit_mod
from needlepoint.design.prepared import prepare, prepare_protocol
from needlepoint.design.protocol import (
    design_fingerprint,
    load_override,
    reference_protocol,
    validate,
)
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError

ROOT = Path(__file__).resolve().parents[2]
DEPTH_GRID = ROOT / "protocols" / "depth-grid.json"
V1_ORDERS = ["B-M-A-E", "M-E-B-A", "E-A-M-B", "A-B-E-M"]


def small(placement: str, **extra: object) -> dict:
    """A small depth design (6 cases, one length of 24) with the given placement."""
    override: dict = {
        "version": 900,
        "cases": 6,
        "lengths": [24],
        "depths": [0, 0.25, 0.5, 0.75, 1],
        "near_placement": placement,
        "seeds": {"materials": 11, "order": 12},
        "analysis": {"contrast": "ends-minus-interior"},
    }
    if placement == "per-case":
        override["seeds"]["placement"] = 13
    if placement == "around-target":
        override["near_offsets"] = [-3, -2, -1, 1, 2, 3]
    override |= extra
    return override


def load(tmp_path: Path, override: dict) -> dict:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(override), encoding="utf-8")
    return load_override(path)


@pytest.fixture(scope="module")
def grid_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return prepare(tmp_path_factory.mktemp("grid") / "prepared", DEPTH_GRID)


def plan_rows(root: Path) -> list[dict[str, str]]:
    with open(root / "plan.csv", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def answer_key(root: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (root / "answer_key.jsonl").read_text("utf-8").split("\n")
        if line
    ]


# --- the Williams square --------------------------------------------------------------------


def test_v1_orders_are_the_williams_square_of_b_m_e_a() -> None:
    assert positions.williams_orders(["B", "M", "E", "A"]) == V1_ORDERS
    assert reference_protocol()["orders"] == V1_ORDERS


@pytest.mark.parametrize("n", range(2, 13))
def test_williams_square_is_balanced_and_the_audit_rebuilds_it(n: int) -> None:
    conditions = [f"C{i}" for i in range(n)]
    rows = [r.split("-") for r in positions.williams_orders(conditions)]
    assert rows == [r.split("-") for r in audit_mod.williams(conditions)]
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for position in range(n):  # each condition equally often in each serial position
        assert Counter(r[position] for r in rows) == {c: len(rows) // n for c in conditions}
    follows = Counter((r[i], r[i + 1]) for r in rows for i in range(n - 1))
    assert len(set(follows.values())) == 1 and len(follows) == n * (n - 1)  # carry-over balance


@pytest.mark.parametrize(
    ("depth", "label"), [(0, "D0"), (1, "D1"), (0.25, "D0.25"), (0.5, "D0.5"), (0.125, "D0.125")]
)
def test_depth_labels(depth: float, label: str) -> None:
    assert positions.depth_label(depth) == label


# --- the protocol ---------------------------------------------------------------------------


def test_depth_grid_fills_in_conditions_and_orders() -> None:
    p = load_override(DEPTH_GRID)
    assert p["conditions"] == ["D0", "D0.25", "D0.5", "D0.75", "D1", "A"]
    assert p["orders"][0] == "D0-D0.25-A-D0.5-D1-D0.75" and len(p["orders"]) == 6
    assert p["cases"] % len(p["orders"]) == 0


def test_the_fingerprint_covers_every_option(tmp_path: Path) -> None:
    base = design_fingerprint(load(tmp_path, small("per-case")))
    for change in (
        {"depths": [0, 0.3, 0.5, 0.75, 1]},
        {"near_placement": "fixed", "seeds": {"materials": 11, "order": 12}},
        {"seeds": {"materials": 11, "order": 12, "placement": 14}},
        {"analysis": {"contrast": "first-minus-last"}},
    ):
        assert design_fingerprint(load(tmp_path, small("per-case", **change))) != base
    around = small("around-target")
    assert design_fingerprint(load(tmp_path, around)) != design_fingerprint(
        load(tmp_path, around | {"near_offsets": [-3, -2, -1, 1, 2, 4]})
    )


def test_v1_has_no_option_and_refuses_one() -> None:
    p = reference_protocol()
    assert not positions.has_options(p)
    for key, value in (("near_placement", "fixed"), ("depths", [0, 1])):
        changed = copy.deepcopy(p) | {key: value}
        with pytest.raises(NeedlepointError, match=r"v1 is frozen|field"):
            validate(changed)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"depths": [0, 1.5]}, r"field depths\[1\]: 1.5 is not a fraction from 0 to 1"),
        ({"depths": [0.5, 0.25, 1]}, "field depths: must increase strictly"),
        ({"depths": [0, 0.0001, 1]}, r"field depths\[1\]: 0.0001 has more than three decimals"),
        ({"depths": [0.5]}, "field depths: needs 2 to 11 depths, has 1"),
        ({"depths": [0, "x"]}, r"field depths\[1\]: expected a number"),
        ({"near_placement": "random"}, "field near_placement: 'random' is not one of"),
        ({"near_offsets": [1, 2, 3, 4, 5, 6]}, "field near_offsets: only with near_placement"),
        ({"analysis": {"contrast": "bigger"}}, "field analysis.contrast: 'bigger' is not one of"),
        ({"analysis": {}}, "field analysis.contrast: missing"),
        ({"depths": [0, 1]}, "field analysis.contrast: ends-minus-interior needs at least 3"),
        ({"cases": 8}, "field cases: must be a multiple of the 6 orders"),
        ({"orders": ["D0-D0.25-D0.5-D0.75-D1-A"] * 6}, "orders must be the Williams square"),
        ({"conditions": ["D0", "D0.25", "D0.5", "D0.75", "D9", "A"]}, "conditions must be"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(NeedlepointError, match=message) as err:
        load(tmp_path, small("fixed") | change)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("placement", "change", "message"),
    [
        ("per-case", {"seeds": {"materials": 1, "order": 2}}, "field seeds.placement: missing"),
        ("fixed", {"seeds": {"materials": 1, "order": 2, "placement": 3}}, "seeds.placement"),
        ("around-target", {"near_offsets": [-1, 1]}, "needs 6 offsets, has 2"),
        ("around-target", {"near_offsets": [-2, -1, 0, 1, 2, 3]}, "must be non-zero"),
        ("around-target", {"near_offsets": [-30, -2, -1, 1, 2, 3]}, "exceeds the shortest"),
    ],
)
def test_bad_placements_are_one_line_errors(
    tmp_path: Path, placement: str, change: dict, message: str
) -> None:
    override = small(placement) | change
    if placement == "around-target" and "near_offsets" not in change:
        del override["near_offsets"]
    with pytest.raises(NeedlepointError, match=message):
        load(tmp_path, override)


def test_around_target_without_offsets_is_refused(tmp_path: Path) -> None:
    override = small("around-target")
    del override["near_offsets"]
    with pytest.raises(NeedlepointError, match="field near_offsets: missing"):
        load(tmp_path, override)


# --- the depth grid, prepared -----------------------------------------------------------------


def test_depth_grid_passes_verify_and_audit(grid_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert verify_prepared(grid_dir).ok
    report = audit_prepared(grid_dir)
    assert report.ok, report.lines()
    counts = {c.name: c.count for c in report.checks}
    assert counts["position_balance"] == 2 * 2 * 6 * 6 and counts["williams_orders"] == 1
    assert main(["audit", str(grid_dir)]) == 0
    assert "audit OK: 22 checks" in capsys.readouterr().out


def test_each_condition_equally_often_in_each_serial_position_of_each_stratum(
    grid_dir: Path,
) -> None:
    # Counted from plan.csv alone: blocks are consecutive runs of six rows.
    rows = plan_rows(grid_dir)
    seen: Counter = Counter()
    for start in range(0, len(rows), 6):
        block = rows[start : start + 6]
        assert len({r["block"] for r in block}) == 1
        for position, r in enumerate(block):
            seen[(r["length"], r["similarity"], position, r["condition"])] += 1
    conditions = ["D0", "D0.25", "D0.5", "D0.75", "D1", "A"]
    for length in ("60", "240"):
        for sim in ("low", "high"):
            for position in range(6):
                assert [seen[(length, sim, position, c)] for c in conditions] == [3] * 6


def test_target_sits_at_its_depth_and_near_names_before_it_vary(grid_dir: Path) -> None:
    keys = answer_key(grid_dir)
    rows = plan_rows(grid_dir)
    requests = [
        json.loads(x) for x in (grid_dir / "requests.jsonl").read_text("utf-8").splitlines()
    ]
    before: dict[tuple[str, str], set[int]] = {}
    for key, row, req in zip(keys, rows, requests, strict=True):
        n = int(row["length"])
        user = req["body"]["messages"][1]["content"]
        records = user.split("\n")[1 : n + 2]
        if key["condition"] != "A":
            depth = float(key["condition"][1:])
            assert key["target_code"] in records[int(depth * 1000) * n // 1000]
        assert len(key["near_codes"]) == 6 and key["near_unplaced"] == []
        if key["similarity"] == "high":
            before.setdefault((row["length"], key["condition"]), set()).add(key["near_before"])
    # per-case slots: at every interior depth the count of near names ahead of the target varies.
    for (length, cond), counts in before.items():
        if cond not in ("D0", "D1", "A"):
            assert len(counts) >= 3, (length, cond, counts)


def test_low_and_high_share_the_per_case_slots(grid_dir: Path) -> None:
    keys = answer_key(grid_dir)
    rows = plan_rows(grid_dir)
    slots: dict[tuple[str, str, str], set[tuple[str, ...]]] = {}
    for key, row in zip(keys, rows, strict=True):
        slots.setdefault((row["case"], row["length"], key["condition"]), set()).add(
            tuple(key["near_codes"])
        )
    assert all(len(v) == 1 for v in slots.values())


@pytest.mark.parametrize("placement", ["fixed", "per-case", "around-target"])
def test_every_placement_prepares_verifies_and_audits(tmp_path: Path, placement: str) -> None:
    protocol = load(tmp_path, small(placement))
    root = prepare_protocol(tmp_path / "out", protocol)
    assert verify_prepared(root).ok
    report = audit_prepared(root)
    assert report.ok, report.lines()
    keys = answer_key(root)
    if placement == "around-target":
        # At depth 0 the three offsets before the target have no room, and are recorded.
        at_zero = [k for k in keys if k["condition"] == "D0"]
        assert all(
            k["near_unplaced"] == [-3, -2, -1] and len(k["near_codes"]) == 3 for k in at_zero
        )
        assert all(k["near_before"] == 0 for k in at_zero)
        middle = [k for k in keys if k["condition"] == "D0.5"]
        assert all(k["near_before"] == 3 and k["near_unplaced"] == [] for k in middle)
    if placement == "fixed":
        assert {k["near_before"] for k in keys if k["condition"] == "D0.5"} == {3}


def test_the_audit_finds_a_wrong_near_before(grid_dir: Path, tmp_path: Path) -> None:
    root = Path(shutil.copytree(grid_dir, tmp_path / "copy"))
    keys = answer_key(root)
    keys[4]["near_before"] += 1
    text = "".join(
        json.dumps(k, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"
        for k in keys
    )
    (root / "answer_key.jsonl").write_text(text, encoding="utf-8")
    report = audit_prepared(root)
    failed = {c.name for c in report.checks if not c.ok}
    assert "answer_key" in failed


def test_the_audit_finds_orders_that_are_not_the_williams_square(
    grid_dir: Path, tmp_path: Path
) -> None:
    root = Path(shutil.copytree(grid_dir, tmp_path / "copy"))
    p = json.loads((root / "protocol.json").read_text("utf-8"))
    p["orders"] = p["orders"][1:] + p["orders"][:1]  # same rows, another order
    (root / "protocol.json").write_text(json.dumps(p, ensure_ascii=False), encoding="utf-8")
    report = audit_prepared(root)
    failed = {c.name for c in report.checks if not c.ok}
    assert {"williams_orders", "case_shuffle"} <= failed


@pytest.mark.parametrize("placement", ["per-case", "around-target"])
def test_design_views_show_a_depth_design(tmp_path: Path, placement: str) -> None:
    from needlepoint.design.prepared import load_prepared
    from needlepoint.notebook import views as dv

    root = prepare_protocol(tmp_path / "out", load(tmp_path, small(placement)))
    prepared = load_prepared(root)
    table = dv.protocol_table(prepared.protocol)
    assert table.loc["planned requests", "value"] == 6 * 1 * 2 * 6
    assert table.loc["depths", "value"] == "0, 0.25, 0.5, 0.75, 1"
    assert table.loc["near-name placement", "value"].startswith(placement)
    spots = dv.positions_table(prepared.protocol)
    assert [spots.loc[24, f"{c} at"] for c in ("D0", "D0.25", "D0.5", "D0.75", "D1", "A")] == [
        0,
        6,
        12,
        18,
        24,
        12,
    ]
    sizes = dv.equal_length_table(prepared)
    assert len(sizes) == 6 and sizes["all equal"].all() and (sizes["requests"] == 12).all()
    assert dv.order_figure(prepared, tmp_path / "order.png").stat().st_size > 10_000


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    depths=st.one_of(
        _JSON,
        st.lists(st.floats(-0.5, 1.5) | st.integers(-2, 2), max_size=13),
        st.lists(st.integers(0, 1000), min_size=2, max_size=5, unique=True).map(
            lambda xs: [x / 1000 for x in sorted(xs)]
        ),
    ),
    placement=st.one_of(_JSON, st.sampled_from(["fixed", "per-case", "around-target"])),
    offsets=st.one_of(
        _JSON,
        st.lists(st.integers(-30, 30), max_size=7),
        st.lists(st.integers(-24, 24).filter(bool), min_size=6, max_size=6, unique=True).map(
            sorted
        ),
    ),
    contrast=st.one_of(_JSON, st.sampled_from(["ends-minus-interior", "first-minus-last"])),
)
def test_hostile_options_load_or_fail_in_one_line(
    tmp_path_factory: pytest.TempPathFactory,
    depths: object,
    placement: object,
    offsets: object,
    contrast: object,
) -> None:
    # Whatever the option fields hold, the loader accepts a design the generator can honour or
    # refuses it with one line; never a traceback.
    # 60 cases: a multiple of every Williams square of 3 to 6 conditions (6, 4, 10, 6 rows).
    override = small("fixed") | {"depths": depths, "near_placement": placement, "cases": 60}
    override |= {"near_offsets": offsets, "analysis": {"contrast": contrast}}
    override["seeds"] = {"materials": 1, "order": 2}
    if placement == "per-case":
        override["seeds"]["placement"] = 3
    if placement != "around-target":
        del override["near_offsets"]
    try:
        protocol = load(tmp_path_factory.mktemp("fuzz"), override)
    except NeedlepointError as exc:
        assert "\n" not in str(exc)
        return
    assert protocol["conditions"][-1] == "A"
    assert protocol["orders"] == positions.williams_orders(protocol["conditions"])


@pytest.mark.parametrize("placement", ["fixed", "around-target"])
def test_a_background_records_its_own_near_slots_only_where_they_are_fixed(
    tmp_path: Path, placement: str
) -> None:
    """Under around-target the near names follow each condition's target, so a background has
    no slots of its own; under fixed placement it holds the fixed slots of its length."""
    from needlepoint.design.generate import generate_cases, near_slots

    cases = generate_cases(load(tmp_path, small(placement)))
    slots = {bg.slots for case in cases for bg in case.backgrounds}
    assert slots == ({near_slots(24)} if placement == "fixed" else {()})
    assert near_slots(24) != ()
