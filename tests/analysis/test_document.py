"""The whole analysis of one run: the committed Gemma 3 270M run as the worked example.

The run (evidence/20261201-local-compare, runs/gemma3) is the worked example of the issue that
asked for Q1, the effects and the robustness panel: 5/14 with interval [0, 9/14], not
supported; its interrupted seq 19 scored correct gives 3/8 [1/16, 5/8], supported, scored wrong
1/4 [-1/8, 9/16]; leaving S6 out gives 1/2 [1/4, 3/4], supported; the sign-flip test of its
seven case differences gives one-sided p = 3/32 (0.094). summary.md opens with the headline and
a legend, and names the model checks and the size source in words.
"""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from support.analysis import analysis_params
from support.results import make_input

from needlepoint.analysis.document import analyze_run, build_document
from needlepoint.analysis.inputs import from_run
from needlepoint.analysis.primary import preregistered_numerators, scores
from needlepoint.analysis.report import summary_markdown
from needlepoint.analysis.robustness import (
    model_fits,
)
from needlepoint.cli import main
from needlepoint.design.prepared import Prepared

GEMMA = Path(__file__).resolve().parents[2] / "evidence" / "20261201-local-compare" / "runs"


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("gemma") / "analysis"
    analyze_run(GEMMA / "gemma3", out)
    return json.loads((out / "analysis.json").read_text(encoding="utf-8"))


def test_gemma_numbers_are_exact_fractions_in_analysis_json(gemma: dict) -> None:
    p = gemma["primary"]
    assert (p["estimate_exact"], p["interval"]["lower_exact"], p["interval"]["upper_exact"]) == (
        "5/14",
        "0",
        "9/14",
    )
    assert p["decision"] == "not supported"
    r = gemma["robustness"]
    [correct, wrong] = r["missing"]
    assert correct["label"].startswith("seq 19 (S3, 12 records, low, M) is scored correct")
    assert (correct["estimate_exact"], correct["lower_exact"], correct["upper_exact"]) == (
        "3/8",
        "1/16",
        "5/8",
    )
    assert (correct["decision"], correct["changes"], correct["cells"]) == ("supported", True, [19])
    assert (wrong["estimate_exact"], wrong["lower_exact"], wrong["upper_exact"]) == (
        "1/4",
        "-1/8",
        "9/16",
    )
    assert (wrong["decision"], wrong["changes"]) == ("not supported", False)
    without = {s["label"]: s for s in r["leave_one_out"]}
    s6 = without["without S6"]
    assert (s6["estimate_exact"], s6["lower_exact"], s6["upper_exact"]) == ("1/2", "1/4", "3/4")
    assert s6["decision"] == "supported" and s6["changes"]
    assert [k for k, s in without.items() if s["changes"]] == ["without S6"]
    flip = r["sign_flip"]
    assert (flip["p_one_sided_exact"], flip["p_one_sided"], flip["patterns"]) == (
        "3/32",
        0.09375,
        128,
    )
    assert r["verdict"] == (
        "fragile: leaving out S6 flips it; it flips when seq 19 (S3, 12 records, low, M) is "
        "scored correct (supported); sign-flip p 3/32"
    )


def test_gemma_where_the_effect_is(gemma: dict) -> None:
    rows = {(e["measure"], e["similarity"]): e for e in gemma["effects"]["measures"]}
    # From low to high similarity B − M changes by 5/7 and E − M by exactly 0.
    assert rows[("B − M", "high − low")]["estimate_exact"] == "5/7"
    assert rows[("E − M", "high − low")]["estimate_exact"] == "0"
    assert rows[("middle loss", "high − low")]["estimate_exact"] == "5/14"
    assert rows[("middle loss", "high − low")]["lower_exact"] == "0"
    ctx = gemma["context"]
    assert (ctx["endpoint_host"], ctx["first_date"], ctx["sessions"]) == (
        "127.0.0.1",
        "2026-12-01",
        2,
    )
    assert ctx["lengths"][0]["unit"] == "tokens" and ctx["lengths"][0]["median"] == 316


def test_analysing_gemma_prints_q1_q2_and_the_robustness_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["analyze", str(GEMMA / "gemma3"), "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("model gemma3-270m-q4_k_m (completion profile), endpoint 127.0.0.1")
    assert any(line.startswith("Q1, what shape is the position curve?") for line in out)
    assert any(line.startswith("Q2, does similarity add to it?") for line in out)
    robust = next(line for line in out if line.startswith("Robustness: "))
    assert "seq 19" in robust and "leaving out S6 flips it" in robust


def test_the_summary_opens_with_the_headline_and_a_legend(prepared: Prepared) -> None:
    # Every B answer wrong (0 of 32), everything else right: no global floor or ceiling.
    doc = build_document(
        make_input(prepared, lambda p: "error:bad_format" if p.condition == "B" else "correct")
    )
    md = summary_markdown(doc)
    head = md.split("## Primary analysis (preregistered)")[0]
    assert head.index("**Q1, what shape is the position") < head.index("**Q2, does similarity")
    assert "**Robustness: " in head
    assert "`0 / -0.5, -0.5` reads: middle loss under low similarity 0, under high" in head
    assert "A: absent (an unrelated record of the same length in the middle" in head
    caveats = md.split("### Caveats\n\n")[1].split("\n\n")[0]
    assert caveats != "No caveat applies."
    assert "Position at floor or ceiling: B under low similarity 0/16 (floor); " in caveats
    assert "B under high similarity 0/16 (floor)" in caveats


def test_the_model_checks_and_the_size_source_are_named_in_words(prepared: Prepared) -> None:
    """The names a reader sees in the panel and the lengths line, as literal text (a test
    comparing them with the module's own constants could not notice a changed name)."""
    from needlepoint.analysis.inputs import length_sizes

    inp = from_run(GEMMA / "gemma3")
    cases, _, _ = preregistered_numerators(inp.outcomes)
    logistic, linear = model_fits(scores(inp.outcomes), cases, [12], Fraction(5, 14),
                                  "not supported", analysis_params())  # fmt: skip
    assert logistic.model == "GEE, logistic (logit link)"
    assert linear.model == "GEE, linear probability (identity link)"
    sandwich = "bias-reduced sandwich (Mancl–DeRouen), t on cases − 1 df"
    assert logistic.covariance == linear.covariance == sandwich
    # No token_counts.json and no usage: the size is in characters, and says so.
    outcomes = [replace(o, prompt_tokens=None) for o in make_input(prepared).outcomes]
    sizes = length_sizes(prepared, outcomes)
    assert {s.source for s in sizes} == {"characters of the prompt text (no token count recorded)"}
    assert {s.unit for s in sizes} == {"characters"}


def test_the_panel_says_when_the_sign_flip_test_disagrees_and_shows_half_a_bound_as_none(
    prepared: Prepared,
) -> None:
    from needlepoint.analysis.report import robustness_lines

    doc = build_document(make_input(prepared))
    r = doc.robustness
    assert r.sign_flip is not None and r.leave_one_out
    flip = replace(r.sign_flip, agrees=False)
    half = replace(r.leave_one_out[0], lower_exact="1/4", upper_exact=None, label="half")
    doc = replace(doc, robustness=replace(r, sign_flip=flip, leave_one_out=(half,)))
    lines = robustness_lines(doc)
    sign = next(line for line in lines if line.startswith("- Sign-flip test"))
    assert sign.endswith("; DISAGREES with the decision.")
    row = next(line for line in lines if line.startswith("| half |"))
    assert row.split(" | ")[3] == "—"  # an interval needs both bounds
    agreeing = robustness_lines(
        replace(doc, robustness=replace(r, sign_flip=replace(flip, agrees=True)))
    )
    assert next(x for x in agreeing if x.startswith("- Sign-flip")).endswith(
        "; agrees with the decision."
    )
    # A BCa interval whose upper bound is exactly 0 shows it as 0.
    assert r.second_interval is not None
    bca = replace(r.second_interval, lower=-0.5, upper=0.0)
    lines = robustness_lines(replace(doc, robustness=replace(r, second_interval=bca)))
    assert any(line.startswith(f"- {bca.method}") and ": [-0.5, 0];" in line for line in lines)
    # Each way a BCa interval can stand to the decision, in words, and the percentile
    # interval it is set against ("—" when there is none).
    for agrees, words in ((False, "DISAGREES with"), (None, "cannot be compared with")):
        said = replace(r, second_interval=replace(bca, agrees=agrees))
        for primary, interval in ((doc.primary, "["), (replace(doc.primary, interval=None), "—).")):
            got = robustness_lines(replace(doc, robustness=said, primary=primary))
            line = next(x for x in got if x.startswith(f"- {bca.method}"))
            assert f"; {words} the decision (percentile interval {interval}" in line
    # A model check that disagrees says so in capitals, like the others.
    assert r.models
    fitted = replace(r.models[0], estimate=0.25, se=0.1, lower=0.05, upper=0.45, p_one_sided=0.02)
    lost = replace(r, models=(replace(fitted, agrees=False),))
    got = robustness_lines(replace(doc, robustness=lost))
    assert next(x for x in got if x.startswith(f"- {fitted.model}")).endswith(
        "; DISAGREES with the decision."
    )


def test_a_model_check_shows_zero_bounds_as_zero_and_a_half_interval_as_its_note(
    prepared: Prepared,
) -> None:
    from needlepoint.analysis.report import robustness_lines

    doc = build_document(make_input(prepared))
    r = doc.robustness
    assert r.models
    flat = replace(r.models[0], estimate=0.0, se=0.0, lower=-0.5, upper=0.0, p_one_sided=0.0)
    flat = replace(flat, agrees=True)
    got = robustness_lines(replace(doc, robustness=replace(r, models=(flat,))))
    line = next(x for x in got if x.startswith(f"- {flat.model}"))
    assert line == (
        f"- {flat.model}, {flat.covariance}: contrast 0 (SE 0), [-0.5, 0], one-sided p 0; "
        "agrees with the decision."
    )
    # an estimate without its lower bound is not a fit to show: the note says why
    half = replace(flat, lower=None, note="the fit did not converge")
    got = robustness_lines(replace(doc, robustness=replace(r, models=(half,))))
    assert f"- {flat.model}: the fit did not converge." in got
