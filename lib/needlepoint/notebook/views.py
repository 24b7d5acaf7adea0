"""What the notebooks show: figures named by their fingerprint, and the tables of each stage.

The stages compute; this module only arranges their records as tables and figures for a reader,
and needs pandas and matplotlib where the stages do not.

Notebook display helpers that keep saved outputs reproducible and readable.

A figure is shown together with one printed line naming it by its relative path and the
SHA-256 of its PNG bytes, so nbval (which compares text, not images) still proves that every
figure re-renders identically.

Tables and the order figure that the design and freeze notebooks show.

They read a prepared folder only, so what a notebook displays is exactly what was frozen.

pandas tables of the check results, for notebooks; the checks themselves never need pandas.
"""

from __future__ import annotations

import io
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from needlepoint.contamination.inputs import Run, iso_from_ns
from needlepoint.design import positions
from needlepoint.design.audit import AuditReport
from needlepoint.design.generate import near_slots
from needlepoint.design.prepared import Prepared, load_prepared
from needlepoint.design.profiles import body_profile, text_chars
from needlepoint.jsonio import file_sha256
from needlepoint.notebook import paths
from needlepoint.safeio import write_bytes_atomic


def show_figure(rel: str) -> Any:
    """Print the figure's name and fingerprint, and return it for display."""
    from IPython.display import Image

    path = paths.read_path(rel)
    print(f"figure {rel}  sha256 {file_sha256(path)[:16]}")
    return Image(filename=str(path))


def show_lines(lines: list[str]) -> None:
    """Print library report lines as one block."""
    print("\n".join(lines))


_IMAGE = re.compile(r"(!\[[^\]]*\]\()([^)\s]+)(\))")


def markdown_text(rel: str, drop: tuple[str, ...] = ()) -> str:
    """A Markdown file's text as a notebook shows it (see ``show_markdown``)."""
    path = paths.read_path(rel)
    kept: list[str] = []
    skipping = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            skipping = line[3:].strip() in drop
        if not skipping:
            kept.append(line)
    folder = path.parent
    base = folder if not folder.is_absolute() else Path(os.path.relpath(folder, Path.cwd()))

    def rebase(match: re.Match[str]) -> str:
        target = match.group(2)
        if ":" in target or target.startswith("/"):
            return match.group(0)
        return match.group(1) + (base / target).as_posix() + match.group(3)

    return _IMAGE.sub(rebase, "\n".join(kept).rstrip("\n") + "\n")


def show_markdown(rel: str, drop: tuple[str, ...] = ()) -> Any:
    """A Markdown document written by the library (summary.md, comparison.md), for display.

    Sections whose ``##`` title is in ``drop`` are left out because the notebook shows them
    itself (the figures, each with its fingerprint). Images the document names beside itself
    are pointed at its folder, so they resolve where the notebook (and its HTML) is.
    """
    from IPython.display import Markdown

    return Markdown(markdown_text(rel, drop))


KIND_LABELS = {
    "substitution": "One-character change",
    "swap": "Reordered words",
    "qualifier": "Changed qualifier",
}
CONDITION_COLOURS = {"B": "#4575b4", "M": "#d73027", "E": "#91bfdb", "A": "#bdbdbd"}


def condition_colours(conditions: list[str]) -> dict[str, str]:
    """v1's colours, or for a depth design one shade per depth (light to dark) and grey for A."""
    if all(c in CONDITION_COLOURS for c in conditions):
        return CONDITION_COLOURS
    import matplotlib

    present = [c for c in conditions if c != "A"]
    cmap = matplotlib.colormaps["viridis"]
    shades = {
        c: matplotlib.colors.to_hex(cmap(i / max(1, len(present) - 1)))
        for i, c in enumerate(present)
    }
    return shades | {"A": CONDITION_COLOURS["A"]}


def preview(protocol_file: str | None = None) -> Prepared:
    """The materials a protocol would freeze, prepared in a scratch folder and loaded."""
    import tempfile

    from needlepoint.design.prepared import load_prepared, prepare

    with tempfile.TemporaryDirectory() as tmp:
        return load_prepared(prepare(Path(tmp) / "preview", protocol_file))


def protocol_table(protocol: dict[str, Any]) -> pd.DataFrame:
    """The design parameters a reader checks first."""
    rows = [
        ("protocol", f"{protocol['protocol_id']} v{protocol['version']}"),
        ("model", protocol["model"]),
        *_body_rows(protocol),
        ("cases", protocol["cases"]),
        ("background lengths", ", ".join(map(str, protocol["lengths"]))),
        ("similarity", ", ".join(protocol["similarities"])),
        ("conditions", ", ".join(protocol["conditions"])),
        ("condition orders", ", ".join(protocol["orders"])),
        (
            "seeds (materials / order)",
            f"{protocol['seeds']['materials']} / {protocol['seeds']['order']}",
        ),
        *_option_rows(protocol),
        (
            "planned requests",
            protocol["cases"] * len(protocol["lengths"]) * 2 * len(protocol["conditions"]),
        ),
        ("minimum gap (s)", protocol["runner"]["min_gap_s"]),
        ("effect threshold", protocol["analysis"]["threshold"]),
    ]
    return pd.DataFrame(rows, columns=["parameter", "value"]).set_index("parameter")


def _option_rows(protocol: dict[str, Any]) -> list[tuple[str, Any]]:
    """A depth design's depths and near-name placement (nothing for v1 and v2)."""
    if not positions.has_options(protocol):
        return []
    rows: list[tuple[str, Any]] = []
    if "depths" in protocol:
        rows.append(("depths", ", ".join(f"{d:g}" for d in protocol["depths"])))
        rows.append(("preregistered contrast", protocol["analysis"]["contrast"]))
    placement = positions.placement(protocol)
    if placement == positions.PER_CASE:
        placement += f" (seed {protocol['seeds']['placement']})"
    elif placement == positions.AROUND:
        placement += f" (offsets {', '.join(map(str, protocol['near_offsets']))})"
    rows.append(("near-name placement", placement))
    return rows


def _body_rows(protocol: dict[str, Any]) -> list[tuple[str, Any]]:
    """The body fields: v1's one row, plus the profile and its fields for a model variant."""
    if body_profile(protocol) == "chat" and "stop" not in protocol:
        return [
            ("temperature / max_tokens", f"{protocol['temperature']} / {protocol['max_tokens']}")
        ]
    rows: list[tuple[str, Any]] = [("body profile", body_profile(protocol))]
    for key in ("temperature", "max_tokens", "max_completion_tokens", "reasoning_effort"):
        if key in protocol:
            rows.append((key, protocol[key]))
    for key in ("stop", "answer_cue"):
        if key in protocol:
            rows.append((key, json.dumps(protocol[key], ensure_ascii=False)))
    return rows


def excerpt_table(prepared: Prepared, case: str = "S1") -> pd.DataFrame:
    """Like the seed's S1 table: the target and one near name of each kind, with codes."""
    seq = next(r.seq for r in prepared.plan if r.case == case and r.similarity == "high")
    key = prepared.answer_key[seq]
    rows = [("Target", key["target_name"], key["target_code"])]
    for kind, label in KIND_LABELS.items():
        i = key["near_kinds"].index(kind)
        rows.append((label, key["near_names"][i], key["near_codes"][i]))
    return pd.DataFrame(rows, columns=["record", "project name", "code"]).set_index("record")


def positions_table(protocol: dict[str, Any]) -> pd.DataFrame:
    """Near-name slots and insertion points for every background length."""
    if positions.has_options(protocol):
        return _option_positions(protocol)
    rows = []
    for n in protocol["lengths"]:
        rows.append(
            {
                "background N": n,
                "near-name slots floor((2k+1)N/12)": ", ".join(map(str, near_slots(n))),
                "B at": 0,
                "M at": n // 2,
                "E at": n,
                "A placeholder at": n // 2,
            }
        )
    return pd.DataFrame(rows).set_index("background N")


def _option_positions(protocol: dict[str, Any]) -> pd.DataFrame:
    """Where each condition's record goes, and how the near names are placed."""
    placement = positions.placement(protocol)
    slots = {
        positions.FIXED: "floor((2k+1)N/12)",
        positions.PER_CASE: "drawn per case and length from seeds.placement",
        positions.AROUND: "at the offsets around each condition's record",
    }[placement]
    rows = []
    for n in protocol["lengths"]:
        row: dict[str, Any] = {"background N": n}
        if placement == positions.FIXED:
            row["near-name slots"] = ", ".join(map(str, near_slots(n)))
        else:
            row["near-name slots"] = slots
        for cond in protocol["conditions"]:
            row[f"{cond} at"] = positions.insertion_index(protocol, cond, n)
        rows.append(row)
    return pd.DataFrame(rows).set_index("background N")


def equal_length_table(prepared: Prepared) -> pd.DataFrame:
    """Character length of every request, pair by pair: all of a pair's (8 in v1) must be equal."""
    rows = []
    by_pair: dict[int, list[int]] = {}
    for r in prepared.plan:
        body = json.loads(prepared.bodies[r.seq])
        by_pair.setdefault(r.pair, []).append(text_chars(body))
    for r in prepared.plan[:: 2 * len(prepared.protocol["conditions"])]:
        sizes = by_pair[r.pair]
        rows.append(
            {
                "pair": r.pair,
                "case": r.case,
                "length": r.length,
                "requests": len(sizes),
                "characters": sizes[0],
                "all equal": len(set(sizes)) == 1,
            }
        )
    return pd.DataFrame(rows).set_index("pair")


def order_figure(prepared: Prepared, path: str | Path) -> Path:
    """The execution-order matrix: one row per block, conditions coloured in sent order."""
    import matplotlib.style
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle

    width = len(prepared.protocol["conditions"])
    colours = condition_colours(prepared.protocol["conditions"])
    blocks = [prepared.plan[i : i + width] for i in range(0, len(prepared.plan), width)]
    with matplotlib.style.context("default"):
        fig = Figure(
            figsize=(6.5 if width == 4 else 1.6 * width + 0.6, 0.8 + 0.24 * len(blocks)),
            dpi=100,
            layout="constrained",
        )
        ax = fig.subplots()
        for y, block in enumerate(blocks):
            for x, row in enumerate(block):
                ax.add_patch(Rectangle((x, y), 0.95, 0.9, color=colours[row.condition]))
                ax.text(
                    x + 0.47,
                    y + 0.45,
                    f"{row.condition} ({row.seq})",
                    ha="center",
                    va="center",
                    fontsize=7,
                )
        ax.set_xlim(0, width)
        ax.set_ylim(len(blocks), 0)
        ax.set_yticks([y + 0.45 for y in range(len(blocks))])
        ax.set_yticklabels(
            [f"{b[0].block}: {b[0].case} N={b[0].length} {b[0].similarity}" for b in blocks],
            fontsize=7,
        )
        ax.set_xticks([i + 0.47 for i in range(width)])
        ax.set_xticklabels([_ordinal(i + 1) for i in range(width)])
        ax.set_xlabel("position within block (seq in brackets)")
        ax.legend(
            handles=[Patch(color=c, label=k) for k, c in colours.items()],
            loc="upper center",
            bbox_to_anchor=(0.5, -0.04 - 2.0 / len(blocks)),
            ncol=width,
            fontsize=8,
        )
        fig.suptitle("Execution order: blocks top to bottom, conditions left to right")
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", metadata={"Software": None})
        write_bytes_atomic(out, buffer.getvalue())
    return out


def _ordinal(n: int) -> str:
    return f"{n}{'st' if n == 1 else 'nd' if n == 2 else 'rd' if n == 3 else 'th'}"


def manifest_table(prepared: Prepared) -> pd.DataFrame:
    """The fingerprints frozen in manifest.json."""
    rows = [("file", name, digest) for name, digest in sorted(prepared.manifest["files"].items())]
    rows += [
        ("source", name, digest) for name, digest in sorted(prepared.manifest["sources"].items())
    ]
    rows.append(("folder", "manifest.json (protocol fingerprint)", prepared.fingerprint))
    if "design_fingerprint" in prepared.manifest:
        design = prepared.manifest["design_fingerprint"]
        rows.append(("folder", "design fingerprint (protocol.json's design fields)", design))
    return pd.DataFrame(rows, columns=["kind", "name", "sha256"])


def audit_table(report: AuditReport) -> pd.DataFrame:
    """The audit's checks with their counts, as a table."""
    return pd.DataFrame(
        [(c.name, c.count, c.failed, c.description) for c in report.checks],
        columns=["check", "items", "failed", "rule"],
    ).set_index("check")


if TYPE_CHECKING:
    import pandas as pd

    from needlepoint.contamination.canary import CanaryResult
    from needlepoint.contamination.context import Manifest
    from needlepoint.contamination.overlap import OverlapResult, TimelineResult
    from needlepoint.contamination.report import ContaminationReport


def _frame(rows: list[dict[str, object]], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


def manifest_frame(manifest: Manifest) -> pd.DataFrame:
    """One row per frozen file: relative path, size, exact UTC mtime, hash prefix."""
    rows = [
        {"path": e.path, "size": e.size, "mtime (UTC)": e.mtime, "sha256": e.sha256[:16]}
        for e in manifest.files
    ]
    return _frame(rows, ["path", "size", "mtime (UTC)", "sha256"])


def overlap_frame(result: OverlapResult) -> pd.DataFrame:
    """Every match with its location; discarded ones carry their reason."""
    rows = [
        {
            "reference": m.reference_id,
            "answer": m.answer,
            "where": m.where,
            "kept": m.discard_reason is None,
            "discard reason": m.discard_reason or "",
        }
        for m in result.matches
    ]
    return _frame(rows, ["reference", "answer", "where", "kept", "discard reason"])


def runs_frame(runs: tuple[Run, ...]) -> pd.DataFrame:
    """The runs as the timeline sees them."""
    rows = [
        {"run": r.run_id, "battery": r.battery, "started (UTC)": iso_from_ns(r.started_ns),
         "values": ", ".join(r.values)}
        for r in runs
    ]  # fmt: skip
    return _frame(rows, ["run", "battery", "started (UTC)", "values"])


def holdings_frame(result: TimelineResult) -> pd.DataFrame:
    """Context files that hold a run's values, with their mtime relative to the run's start."""
    rows = [
        {
            "file": h.file,
            "file mtime (UTC)": iso_from_ns(h.mtime_ns),
            "run": h.run_id,
            "minutes after run start": round(h.minutes_after_start),
            "written after the run": h.after_run,
        }
        for h in result.holdings
    ]
    columns = [
        "file",
        "file mtime (UTC)",
        "run",
        "minutes after run start",
        "written after the run",
    ]
    return _frame(rows, columns)


def poisoned_frame(result: TimelineResult) -> pd.DataFrame:
    """Runs that started after a file holding an earlier run's results existed."""
    rows = [
        {"run": p.run_id, "started (UTC)": iso_from_ns(p.started_ns), "file": p.file,
         "file mtime (UTC)": iso_from_ns(p.file_mtime_ns), "from run(s)": ", ".join(p.source_runs)}
        for p in result.poisoned
    ]  # fmt: skip
    return _frame(rows, ["run", "started (UTC)", "file", "file mtime (UTC)", "from run(s)"])


def canary_frame(result: CanaryResult) -> pd.DataFrame:
    """The seed's table: closed questions per condition, exact answers, tool calls."""
    rows = [
        {"condition": s.condition, "closed questions": s.questions, "exact": s.exact,
         "tool calls": s.tool_calls}
        for s in result.summary
    ]  # fmt: skip
    return _frame(rows, ["condition", "closed questions", "exact", "tool calls"])


def findings_frame(report: ContaminationReport) -> pd.DataFrame:
    """Why the gate fails, one row per finding."""
    rows = [{"check": f.check, "kind": f.kind, "message": f.message} for f in report.gate.findings]
    return _frame(rows, ["check", "kind", "message"])


def markdown_lines(lines: list[str]) -> Any:
    """Report lines written as Markdown (a declaration chain, say), rendered rather than
    printed: printed, their ``**`` and backticks would show as literal characters."""
    from IPython.display import Markdown

    return Markdown("\n".join(lines).rstrip("\n") + "\n")


def show_table(frame: Any) -> None:
    """Display a DataFrame whole: no cell cut to pandas' 50 characters (the audit's rules are
    sentences), no column or row left out."""
    import pandas as pd
    from IPython.display import display

    with pd.option_context(
        "display.max_colwidth", None, "display.max_columns", None, "display.width", 250
    ):
        display(frame)


def position_balance(prepared: Path) -> Any:
    """How often each condition sits in each serial position, per length × similarity stratum
    (a pandas table: one row per stratum and position, one column per condition)."""
    import pandas as pd

    p = load_prepared(prepared)
    width = len(p.protocol["conditions"])
    counts: Counter[tuple[int, str, int, str]] = Counter()
    for i in range(0, len(p.plan), width):
        for position, row in enumerate(p.plan[i : i + width], start=1):
            counts[(row.length, row.similarity, position, row.condition)] += 1
    rows = []
    for n in p.protocol["lengths"]:
        for sim in p.protocol["similarities"]:
            for position in range(1, width + 1):
                row = {"length": n, "similarity": sim, "position": position}
                row |= {c: counts[(n, sim, position, c)] for c in p.protocol["conditions"]}
                rows.append(row)
    return pd.DataFrame(rows).set_index(["length", "similarity", "position"])
