"""Two sections of the local comparison's README: what each run's difference is made of, and the
other runs of the same design on record.

The preregistered difference averages two changes from low to high similarity, in B − M and in
E − M (each per complete case, then over the cases); saying both, with each position's accuracy
under high similarity, tells a reader whether near names deepened a *middle* loss or pulled an
end position down with it. The runs on record come from the study record (`registry`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

from needlepoint.local.compare_files import Entrant, Layout


def _changes(analysis_dir: Path) -> tuple[int, Fraction, Fraction] | None:
    """(complete cases, mean change in B − M, mean change in E − M): the effects the run's
    analysis.json holds (each per complete case, lengths averaged, then over the cases)."""
    from needlepoint.analysis.effects import find
    from needlepoint.analysis.primary import DIFFERENCE
    from needlepoint.analysis.record import read_document

    effects = read_document(analysis_dir / "analysis.json").effects
    if effects.cases == 0:
        return None
    bm, em = (find(effects.measures, m, DIFFERENCE).estimate_exact for m in ("B − M", "E − M"))
    assert bm is not None and em is not None  # complete cases give every estimate
    return effects.cases, Fraction(bm), Fraction(em)


def _number(x: Fraction) -> str:
    return f"{float(x):.3g}" if x.denominator != 1 else str(x.numerator)


def effect_lines(layout: Layout, entrants: Sequence[Entrant]) -> list[str]:
    """For each run with complete cases: the two changes behind its difference, and B, M, E
    under high similarity."""
    from needlepoint.compare.record import read_comparison

    doc = read_comparison(layout.comparison / "comparison.json")
    runs = {Path(r.run_dir).name: r for r in doc.runs}
    out = ["## What each difference is made of", ""]
    out += [
        "The preregistered difference is the mean over complete cases of two changes from low "
        "to high similarity, in B − M and in E − M, halved (middle loss is (B + E)/2 − M). "
        "Both, and each position under high similarity (all cases):",
        "",
    ]
    for e in entrants:
        run = runs[e.key]
        changes = _changes(layout.analysis(e))
        high = {c.condition: c for c in run.accuracy if c.similarity == "high"}
        cells = ", ".join(f"{k} {high[k].correct}/{high[k].valid}" for k in "BME" if k in high)
        if changes is None or run.difference is None:
            out.append(f"- `runs/{e.key}`: {run.decision}, no difference; high similarity {cells}.")
            continue
        n, bm, em = changes
        line = (
            f"- `runs/{e.key}`: over {n} complete case(s), B − M changes by {_number(bm)} and "
            f"E − M by {_number(em)} (difference {_number((bm + em) / 2)}); high similarity {cells}"
        )
        if em == 0 and bm != 0:
            line += ". All of it is in B − M; E − M does not change"
            if (
                "E" in high
                and "M" in high
                and high["E"].correct * high["M"].valid <= (high["M"].correct * high["E"].valid)
            ):
                line += (
                    " (under high similarity E is right no more often than M): the near names "
                    "pull the end down with the middle rather than deepen a middle loss"
                )
        out.append(line + ".")
    return [*out, ""]


def on_record_lines(layout: Layout, entrants: Sequence[Entrant], root: Path) -> list[str]:
    """The other runs of this folder's design under ``root`` (not these journals), each with its
    decision and its agreement with this folder's run of the same request bytes."""
    from needlepoint.study.registry import agreement, collect
    from needlepoint.study.registry_lines import run_line
    from needlepoint.study.runs import read_entry

    mine = [read_entry(layout.run(e), f"runs/{e.key}") for e in entrants]
    designs = {r.design_fingerprint for r in mine}
    journals = {r.journal_sha256 for r in mine}
    reg = collect(root)
    others = [
        r
        for r in reg.runs
        if r.design_fingerprint in designs and r.journal_sha256 not in journals and not r.pilot
    ]
    out = ["## Other runs of this design on record", ""]
    if not others:
        return [*out, f"None under `{root.name}` (`needlepoint registry`).", ""]
    out += [
        f"Found under `{root.name}` by `needlepoint registry`; each analysed alone, never pooled "
        "with this comparison (its folder's README says why it was run):",
        "",
    ]
    for other in others:
        out.append(f"- {run_line(other)}")
        for r in mine:
            line = agreement(r, other)
            if line is not None:
                out.append(f"  - same request bytes as `{r.path}`: {line}")
    return [*out, ""]


def readme_sections(layout: Layout, entrants: Sequence[Entrant], root: Path) -> list[str]:
    """Both sections, as README.md places them after the result table."""
    return [*effect_lines(layout, entrants), *on_record_lines(layout, entrants, root)]
