"""`needlepoint local-pilot` and `local-run`: a pilot or a run against a packaged local model.

Each serves the model on a free loopback port, checks every prompt's token count against the
server's window before the first request (a prompt that would not fit sends nothing), records
the server's facts in run.json, writes results.csv after the session, and stops the server by
its own process id. Running the same command again resumes, as `run` does.

The whole protocol, live, against a packaged model served offline on this machine.

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.pilot.folder import OnRecord, PilotRun, run_pilot
from needlepoint.pilot.record import RUN_DIR
from needlepoint.run.options import RunOptions
from needlepoint.run.runner import RunSummary, run_protocol
from needlepoint.safeio import relative_path

KEY_ENV = "NEEDLEPOINT_LOCAL_KEY"
# The local server checks no key, but the runner insists on one from the environment.
PLACEHOLDER_KEY = "local-llama-server-needs-no-key"
OVERRIDE_REASON = (
    "local llama.cpp server on 127.0.0.1 with one client: no shared rate limit and no cost, "
    "so the 20 s spacing that protects a paid API only adds idle time"
)


def local_route(base_url: str, alias: str) -> dict[str, Any]:
    """How a run reaches a packaged model served at ``base_url`` as ``alias``: the placeholder
    key's variable, and no spacing, with the reason that overrides the protocol's (run options)."""
    return {
        "base_url": base_url + "/v1",
        "model": alias,
        "api_key_env": KEY_ENV,
        "min_gap_s": 0,
        "override_reason": OVERRIDE_REASON,
    }


@dataclass(frozen=True)
class Serving:
    """The settings of a live pilot or run on a packaged model: the allowance, which model, its
    context size, the request timeout, progress, and the declaration the run starts under."""

    allow: int
    model: str = "smollm2"
    n_ctx: int | None = None
    timeout_s: float = 300.0
    progress: str = "auto"
    declaration: str | None = None

    def check(self) -> None:
        """Refuse bad settings before a server starts."""
        check_before_serving(self.allow, self.timeout_s, self.progress)
        if self.declaration is not None:
            from needlepoint.run.declaration import read_for_run

            read_for_run(self.declaration, live=True)


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
    from needlepoint.local.server import check_token_counts, served_model, server_facts
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
    relative_protocol = relative_path(protocol_path, out)
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
            **local_route(server.base_url, server.alias),
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


def resume_port(run_dir: Path) -> int | None:
    """The loopback port a run folder was served on, so that resuming it serves the same URL.

    The runner refuses to pool sessions whose base_url differs; a local server's port is
    otherwise a fresh free one each time, which would make every local run unresumable.
    """
    from urllib.parse import urlsplit

    from needlepoint.run.folder import has_run_record, read_run_record

    if not has_run_record(run_dir):
        return None
    parts = urlsplit(read_run_record(run_dir).base_url or "")
    return parts.port if parts.hostname == "127.0.0.1" else None


def check_before_serving(allow: int, timeout_s: float, progress: str) -> None:
    """Every run option a served model does not decide, checked before any server starts."""
    from needlepoint.run.options import check_options

    os.environ.setdefault(KEY_ENV, PLACEHOLDER_KEY)
    check_options(
        RunOptions(
            # The port is the server's; only the shape of the route is checked here.
            **local_route("http://127.0.0.1:1", "served"),
            allow=allow,
            timeout_s=timeout_s,
            progress=progress,
        )
    )


def check_compare_inputs(
    protocol_path: Path, entrants: Sequence[Any], timeout_s: float, progress: str
) -> None:
    """Refuse a bad protocol file or run option before the evidence folder is created."""
    from needlepoint.design.prepared import load_protocol
    from needlepoint.local.model import model_spec

    for entrant in entrants:
        load_protocol(
            protocol_path, model=model_spec(entrant.key).alias, body_profile=entrant.body_profile
        )
    check_before_serving(1, timeout_s, progress)


@contextmanager
def _served(
    serving: Serving, run_dir: Path, label: str
) -> Iterator[tuple[RunOptions, Callable[[Path], None]]]:
    """Serve the model; yield the live run options and the token check for a prepared folder."""
    from needlepoint.local.server import check_token_counts, served_model, server_facts

    os.environ.setdefault(KEY_ENV, PLACEHOLDER_KEY)
    log = Path(tempfile.gettempdir()) / f"needlepoint-{label}-server.log"
    port = resume_port(run_dir)
    with served_model(serving.model, n_ctx=serving.n_ctx, port=port, log_path=log) as server:
        print(f"serving {server.alias} (n_ctx {server.n_ctx}) on {server.base_url}; log {log.name}")
        options = RunOptions(
            **local_route(server.base_url, server.alias),
            allow=serving.allow,
            timeout_s=serving.timeout_s,
            progress=serving.progress,
            run_meta={"local_server": server_facts(server)},
            declaration=serving.declaration,
        )

        def token_check(prepared: Path) -> None:
            print(check_token_counts(prepared, server).summary_line())

        yield options, token_check


def run_local_pilot(
    protocol_file: str | Path | None,
    out_dir: str | Path,
    lengths: tuple[int, ...],
    cases: int,
    serving: Serving,
    *,
    version: int | None = None,
    records: tuple[OnRecord, ...] = (),
    check: Callable[[dict[str, Any]], None] | None = None,
) -> PilotRun:
    """Serve the model and run (or resume) the pilot of ``protocol_file`` live against it;
    ``records`` and ``check``: what a new pilot must avoid on record (``run_pilot``)."""
    from needlepoint.pilot.folder import check_pilot_shape, load_design

    # Bad input is refused before a server starts.
    check_pilot_shape(load_design(protocol_file), lengths, cases)
    serving.check()
    served = _served(serving, Path(out_dir) / RUN_DIR, f"pilot-{Path(out_dir).name}")
    # The token check must not shadow ``check``, the version check of what is on record.
    with served as (options, token_check):
        return run_pilot(
            protocol_file,
            out_dir,
            lengths,
            cases,
            options,
            before_run=token_check,
            version=version,
            records=records,
            check=check,
        )


def run_local(
    prepared_dir: str | Path,
    run_dir: str | Path,
    serving: Serving,
) -> tuple[RunSummary, Any]:
    """Serve the model and run (or resume) a prepared folder live; results.csv after it."""
    from needlepoint.run.options import check_prepared
    from needlepoint.run.results import write_results

    serving.check()
    check_prepared(prepared_dir)  # verify and audit before a server starts
    served = _served(serving, Path(run_dir), f"run-{Path(run_dir).name}")
    with served as (options, check):
        check(Path(prepared_dir))
        summary = run_protocol(prepared_dir, run_dir, options)
    return summary, write_results(run_dir, prepared_dir)
