"""The pipeline's wall time, and each notebook against the same library calls without papermill.

The baseline runs, in this process, exactly the library calls each notebook makes (with a
warm interpreter and no kernel); the ratio shows what papermill, the kernel start and the HTML
rendering add.

    python benchmarks/bench_pipeline.py [--repeats 3]      (run from the repository root)

Every notebook of the pipeline has its direct counterpart (07 and 08 read their defaults from
the notebooks' own parameters cells), so the table has no missing row.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from needlepoint.analysis.document import analyze_run
from needlepoint.analysis.power import sensitivity_lines
from needlepoint.compare.document import compare_runs
from needlepoint.contamination import build_report, build_synthetic_workspace, write_report
from needlepoint.design.audit import audit_prepared
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.design.verify import verify_prepared
from needlepoint.notebook import views as dv
from needlepoint.notebook.pipeline import NOTEBOOKS, run_pipeline
from needlepoint.notebook.steps import (
    calibrate_step,
    figures_step,
    pilot_step,
    run_step,
    simulate_variants,
)
from needlepoint.pilot.calibrate import CalibrationOptions
from needlepoint.run.results import journal_summary, write_results

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"


def _direct(root: Path) -> dict[str, float]:
    """The notebooks' library calls, step by step, timed."""
    steps: dict[str, Callable[[], object]] = {
        "01-design": lambda: (
            dv.protocol_table((d := dv.preview()).protocol),
            dv.excerpt_table(d),
            dv.equal_length_table(d),
            dv.order_figure(d, root / "figures" / "order.png"),
        ),
        "02-freeze": lambda: (
            prepare(root / "prepared"),
            dv.manifest_table(load_prepared(root / "prepared")),
            verify_prepared(root / "prepared"),
            dv.audit_table(audit_prepared(root / "prepared")),
        ),
        "03-run": lambda: (
            run_step(
                root / "prepared", root / "run", transport="simulate", allow=128, progress="off"
            ),
            journal_summary(root / "run"),
            write_results(root / "run", root / "prepared"),
        ),
        "04-analysis": lambda: analyze_run(root / "run", root / "analysis", root / "prepared"),
        "05-power": lambda: sensitivity_lines(out=root / "power"),
        "06-contamination": lambda: _contamination(root / "contamination"),
        "07-compare": lambda: _compare(root / "compare"),
        "08-pilot": lambda: _pilot(root),
    }
    out = {}
    for name, step in steps.items():
        start = time.perf_counter()
        step()
        out[name] = time.perf_counter() - start
    return out


def _parameters(name: str) -> dict[str, Any]:
    """A notebook's default parameters (its ``parameters`` cell holds literals only)."""
    cell = next(
        c
        for c in json.loads((NOTEBOOKS_DIR / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]
        if "parameters" in c.get("metadata", {}).get("tags", [])
    )
    tree = ast.parse("".join(cell["source"]))
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
    }


def _compare(root: Path) -> None:
    """Notebook 07's calls: three simulated model variants, then the comparison."""
    p = _parameters("07-compare")
    runs = [root / Path(d).name for d in p["run_dirs"]]
    simulate_variants(runs, p["simulated"], root / "prepared")
    compare_runs(runs, root / "comparison")


def _pilot(root: Path) -> None:
    """Notebook 08's calls: a simulated pilot, its calibration and figures."""
    p = _parameters("08-pilot")
    pilot_step(
        None, root / "pilot", simulate=True, lengths=p["pilot_lengths"], cases=p["pilot_cases"],
        sim_params=p["pilot_sim_params"],
    )  # fmt: skip
    options = CalibrationOptions(
        band_low=p["band_low"], band_high=p["band_high"], effect=p["effect"],
        max_cases=p["max_cases"], simulations=p["simulations"], seed=p["seed"],
    )  # fmt: skip
    step = calibrate_step(root / "pilot", root / "calibration", options)
    figures_step(step, p["power_effects"])


def _contamination(root: Path) -> None:
    fx = build_synthetic_workspace(root / "ws")
    from needlepoint.contamination import build_manifest, write_manifest

    write_manifest(build_manifest(fx.workspace), root / "manifest.json")
    write_report(
        build_report(fx.reference, fx.runs, fx.results, root / "manifest.json", fx.discards), root
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    piped: list[dict[str, float]] = []
    direct: list[dict[str, float]] = []
    totals = []
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            timings: dict[str, float] = {}
            start = time.perf_counter()
            run_pipeline(
                f"bench{i}", {}, evidence_root=Path(tmp) / "ev", date="20000101", timings=timings
            )
            totals.append(time.perf_counter() - start)
            piped.append(timings)
            (Path(tmp) / "direct").mkdir()
            direct.append(_direct(Path(tmp) / "direct"))
    print(f"\npipeline wall time: median {statistics.median(totals):.1f} s over {len(totals)} runs")
    print(f"{'notebook':<18} {'papermill s':>11} {'direct s':>9} {'ratio':>6}")
    for name in NOTEBOOKS:
        p = statistics.median(t[name] for t in piped)
        d = statistics.median(t[name] for t in direct)
        print(f"{name:<18} {p:11.2f} {d:9.2f} {p / d:6.1f}")
    p_all = statistics.median(sum(t.values()) for t in piped)
    d_all = statistics.median(sum(t.values()) for t in direct)
    print(f"{'all':<18} {p_all:11.2f} {d_all:9.2f} {p_all / d_all:6.1f}")


if __name__ == "__main__":
    main()
