"""The whole protocol, live, against a packaged model served offline on this machine.

Starts the llama.cpp server on a free loopback port, runs every notebook with the live
transport, checks every prompt's token count against the server's window before the first
request (a request that would not fit is a preparation error), and stores the server's facts
(its /v1/models answer, the GGUF's name and SHA-256, the server version, the context size) in
run.json. The server is stopped by its own process id when the pipeline ends or is interrupted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
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
    notebooks_dir: str | Path = "notebooks",
    date: str | None = None,
) -> Path:
    """Serve the packaged model and run the pipeline live into ``evidence_root/<date>-<label>``."""
    from needlepoint.localmodel import served_model, server_facts
    from needlepoint.pipeline import run_pipeline
    from needlepoint.tokencheck import check_token_counts

    protocol_path = Path(protocol_file)
    if not protocol_path.is_file():
        raise NeedlepointError(f"{protocol_path}: protocol file not found")
    date = date or dt.date.today().strftime("%Y%m%d")
    out = Path(evidence_root) / f"{date}-{label}"
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
            before={"03-run": token_check},
        )


def _cmd_local_pipeline(args: argparse.Namespace) -> int:
    from needlepoint.pipeline import PipelineFailed

    try:
        out = run_local_pipeline(
            args.label,
            args.protocol,
            model=args.model,
            n_ctx=args.n_ctx,
            timeout_s=args.timeout_s,
            evidence_root=args.evidence_root,
            date=args.date,
        )
    except PipelineFailed as exc:
        print(f"needlepoint local-pipeline: {exc}", file=sys.stderr)
        return 1
    print(f"evidence written to {out}/")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the local-pipeline command."""
    p = sub.add_parser(
        "local-pipeline", help="serve the packaged model and run every notebook live against it"
    )
    p.add_argument("--label", required=True, help="evidence folder label, e.g. local-smollm2")
    p.add_argument("--protocol", default="protocols/local-smollm2.json")
    p.add_argument("--model", default="smollm2", help="packaged model key or alias")
    p.add_argument("--n-ctx", type=int, help="server context size (default: the model's window)")
    p.add_argument("--timeout-s", type=float, default=300.0, help="per-request read timeout")
    p.add_argument("--evidence-root", default="evidence")
    p.add_argument("--date", help="YYYYMMDD for the folder name (default: today)")
    p.set_defaults(func=_cmd_local_pipeline)
