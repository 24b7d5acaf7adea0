"""`needlepoint local-pilot`: a live pilot against a packaged model served on this machine.

Serves the model on a free loopback port, creates (or resumes) the pilot folder, checks every
pilot prompt's token count against the server's window before the first request, records the
server's facts in the pilot run's run.json, and stops the server by its own process id.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from needlepoint.local.pipeline import KEY_ENV, OVERRIDE_REASON, PLACEHOLDER_KEY
from needlepoint.pilot.folder import PilotRun, run_pilot
from needlepoint.run.settings import RunOptions


def run_local_pilot(
    protocol_file: str | Path | None,
    out_dir: str | Path,
    lengths: tuple[int, ...],
    cases: int,
    *,
    allow: int,
    model: str = "smollm2",
    n_ctx: int | None = None,
    timeout_s: float = 300.0,
    progress: str = "auto",
) -> PilotRun:
    """Serve ``model`` and run (or resume) the pilot of ``protocol_file`` live against it."""
    from needlepoint.local.server import served_model, server_facts
    from needlepoint.local.tokens import check_token_counts

    os.environ.setdefault(KEY_ENV, PLACEHOLDER_KEY)
    log = Path(tempfile.gettempdir()) / f"needlepoint-pilot-{Path(out_dir).name}-server.log"
    with served_model(model, n_ctx=n_ctx, log_path=log) as server:
        print(f"serving {server.alias} (n_ctx {server.n_ctx}) on {server.base_url}; log {log.name}")
        options = RunOptions(
            allow=allow,
            base_url=server.base_url + "/v1",
            model=server.alias,
            api_key_env=KEY_ENV,
            min_gap_s=0,
            override_reason=OVERRIDE_REASON,
            timeout_s=timeout_s,
            progress=progress,
            run_meta={"local_server": server_facts(server)},
        )

        def token_check(prepared: Path) -> None:
            print(check_token_counts(prepared, server).summary_line())

        return run_pilot(protocol_file, out_dir, lengths, cases, options, before_run=token_check)
