"""The whole protocol, live, against a packaged model served offline on this machine.

Starts the llama.cpp server on a free loopback port, runs every notebook with the live
transport, checks every prompt's token count against the server's window before the first
request (a request that would not fit is a preparation error), and stores the server's facts
(its /v1/models answer, the GGUF's name and SHA-256, the server version, the context size) in
run.json. The server is stopped by its own process id when the pipeline ends or is interrupted.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from pathlib import Path

from needlepoint.errors import NeedlepointError

KEY_ENV = "NEEDLEPOINT_LOCAL_KEY"
# The local server checks no key, but the runner insists on one from the environment.
PLACEHOLDER_KEY = "local-llama-server-needs-no-key"
OVERRIDE_REASON = (
    "local llama.cpp server on 127.0.0.1 with one client: no shared rate limit and no cost, "
    "so the 20 s spacing that protects a paid API only adds idle time"
)


def run_local_pipeline(
    label: str,
    protocol_file: str | Path,
    *,
    model: str = "smollm2",
    n_ctx: int | None = None,
    timeout_s: float = 300.0,
    evidence_root: str | Path = "evidence",
    notebooks_dir: str | Path | None = None,
    date: str | None = None,
) -> Path:
    """Serve the packaged model and run the pipeline live into ``evidence_root/<date>-<label>``."""
    from needlepoint.local.server import served_model, server_facts
    from needlepoint.local.tokens import check_token_counts
    from needlepoint.notebook.pipeline import (
        DEPTH_NOTEBOOK,
        NOTEBOOKS,
        PILOT_NOTEBOOK,
        evidence_folder,
        run_pipeline,
    )

    protocol_path = Path(protocol_file)
    if not protocol_path.is_file():
        raise NeedlepointError(f"{protocol_path}: protocol file not found")
    date = date or dt.date.today().strftime("%Y%m%d")
    out = evidence_folder(evidence_root, label, date)  # refuses a label or date that escapes
    from needlepoint.design.prepared import load_protocol

    load_protocol(protocol_path)  # a bad protocol is refused before a server starts
    if out.exists() and any(out.iterdir()):
        raise NeedlepointError(f"{out}: already exists; choose another label")
    # Notebooks run inside the evidence folder, so they get the protocol file relative to it.
    relative_protocol = os.path.relpath(protocol_path.resolve(), out.resolve())
    os.environ.setdefault(KEY_ENV, PLACEHOLDER_KEY)
    log = Path(tempfile.gettempdir()) / f"needlepoint-{date}-{label}-server.log"
    with served_model(model, n_ctx=n_ctx, log_path=log) as server:
        facts = server_facts(server)
        print(f"serving {server.alias} (n_ctx {server.n_ctx}) on {server.base_url}; log {log.name}")

        def token_check(folder: Path) -> None:
            report = check_token_counts(folder / "prepared", server)
            print(report.summary_line())

        overrides = {
            "protocol_file": relative_protocol,
            "transport": "live",
            "base_url": server.base_url + "/v1",
            "model": server.alias,
            "api_key_env": KEY_ENV,
            "min_gap_s": 0,
            "override_reason": OVERRIDE_REASON,
            "timeout_s": timeout_s,
            "run_meta": {"local_server": facts},
        }
        return run_pipeline(
            label,
            overrides,
            evidence_root=evidence_root,
            notebooks_dir=notebooks_dir,
            date=date,
            # 07 compares several runs of one design; this pipeline makes one live run. 08's
            # offline default is a simulated pilot of v1, which says nothing about the served
            # model; a live pilot is made with `local-pilot`.
            only=[n for n in NOTEBOOKS if n not in ("07-compare", PILOT_NOTEBOOK, DEPTH_NOTEBOOK)],
            before={"03-run": token_check},
        )
