"""The contamination report's files: contamination.json (canonical) and contamination.md."""

from __future__ import annotations

import os
from pathlib import Path

from needlepoint.contamination.markdown import report_markdown
from needlepoint.contamination.report import ContaminationReport
from needlepoint.jsonio import canonical_bytes, write_bytes_atomic


def write_report(report: ContaminationReport, out_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write contamination.json (canonical) and contamination.md into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "contamination.json", out / "contamination.md"
    write_bytes_atomic(json_path, canonical_bytes(report.to_json()) + b"\n")
    write_bytes_atomic(md_path, report_markdown(report).encode("utf-8"))
    return json_path, md_path
