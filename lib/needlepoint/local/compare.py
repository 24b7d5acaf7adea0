"""Two packaged models, one design, each run live and complete, then compared side by side.

`needlepoint local-compare` prepares one model variant of the design per packaged model (same
design fingerprint; the base model with the completion profile, the instruct model with chat),
serves each model in turn on 127.0.0.1, checks every prompt's token count against the server's
window before the first request, and runs the variant with every guarantee of `run` (the gap
override and its reason, and the server's facts, recorded in run.json). Then each run must pass
`audit-run`; results, the analyses and the comparison are written into one evidence folder.

One model at a time (two llama.cpp servers would share the same two cores). Running it again
resumes: prepared folders are reused when the protocol gives them, complete runs are left alone,
an unfinished run is resumed at its recorded address.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from needlepoint.errors import NeedlepointError
from needlepoint.local.compare_files import (
    Entrant,
    Layout,
    check_marker,
    evidence_folder,
    write_readme,
)
from needlepoint.local.pipeline import KEY_ENV, OVERRIDE_REASON, PLACEHOLDER_KEY

if TYPE_CHECKING:
    from needlepoint.run.records import RunRecord

DEFAULT_ENTRANTS = (Entrant("gemma3", "completion"), Entrant("smollm2", "chat"))
# One window for both models, so that the served context is not one more difference between
# them; the token check refuses a request that would not fit.
DEFAULT_N_CTX = 4096
Say = Callable[[str], None]


class RunStopped(NeedlepointError):
    """A stop rule ended a run before every planned request was attempted."""


class AuditFailed(NeedlepointError):
    """A finished run failed `audit-run`: nothing is analysed."""


@dataclass(frozen=True)
class CompareOutcome:
    """Where the evidence went, and each model's live seconds in this invocation."""

    folder: Path
    live_seconds: dict[str, float]


def run_local_compare(
    label: str,
    protocol_file: str | Path,
    *,
    entrants: Sequence[Entrant] = DEFAULT_ENTRANTS,
    n_ctx: int = DEFAULT_N_CTX,
    timeout_s: float = 300.0,
    evidence_root: str | Path = "evidence",
    notebooks_dir: str | Path = "notebooks",
    date: str | None = None,
    notebooks: bool = True,
    progress: str = "auto",
    say: Say = print,
    declaration: str | Path | None = None,
) -> CompareOutcome:
    """Prepare, run (or resume), audit, analyse and compare into ``<root>/<date>-<label>/``;
    every run under ``declaration`` when one is given (a resume must name the same one)."""
    protocol_path = Path(protocol_file)
    if not protocol_path.is_file():
        raise NeedlepointError(f"{protocol_path}: protocol file not found")
    if len({e.key for e in entrants}) != len(entrants) or len(entrants) < 2:
        raise NeedlepointError("local-compare needs at least two different packaged models")
    from needlepoint.local.live import check_compare_inputs

    check_compare_inputs(protocol_path, entrants, timeout_s, progress)  # before any folder
    folder = evidence_folder(Path(evidence_root), label, date)
    layout = Layout(folder)
    check_marker(layout, protocol_path, entrants, n_ctx, declaration)
    design = prepare_variants(layout, protocol_path, entrants)
    say(f"{folder.name}: design fingerprint {design[:16]}…, {len(entrants)} model variants")
    live: dict[str, float] = {}
    for i, entrant in enumerate(entrants, start=1):
        done, planned = attempted(layout.run(entrant)), planned_count(layout.prepared(entrant))
        if done >= planned:
            say(f"[{i}/{len(entrants)}] {entrant.key}: complete ({done} of {planned} attempted)")
            continue
        say(f"[{i}/{len(entrants)}] {entrant.key}: {done} of {planned} attempted; serving")
        start = time.perf_counter()
        run_live(layout, entrant, n_ctx, timeout_s, progress, say, declaration)
        live[entrant.key] = time.perf_counter() - start
        say(f"[{i}/{len(entrants)}] {entrant.key}: complete in {live[entrant.key] / 60:.1f} min")
    finish(layout, entrants, protocol_path, Path(notebooks_dir), notebooks, say)
    return CompareOutcome(folder, live)


def prepare_variants(layout: Layout, protocol_path: Path, entrants: Sequence[Entrant]) -> str:
    """Prepare each model variant once (reused when it is what the protocol gives); the design."""
    from needlepoint.design.prepared import load_prepared, load_protocol, prepare
    from needlepoint.design.protocol import protocol_bytes
    from needlepoint.jsonio import sha256_hex
    from needlepoint.local.model import model_spec

    designs: dict[str, str] = {}
    for entrant in entrants:
        alias = model_spec(entrant.key).alias
        folder = layout.prepared(entrant)
        wanted = load_protocol(protocol_path, model=alias, body_profile=entrant.body_profile)
        if not folder.is_dir() or not any(folder.iterdir()):
            prepare(folder, protocol_path, model=alias, body_profile=entrant.body_profile)
        prepared = load_prepared(folder)
        if prepared.manifest["files"]["protocol.json"] != sha256_hex(protocol_bytes(wanted)):
            raise NeedlepointError(
                f"{folder}: prepared from another protocol than {protocol_path.name} for "
                f"{alias} ({entrant.body_profile}); use a new --label"
            )
        designs[entrant.key] = prepared.manifest["design_fingerprint"]
    first = entrants[0].key
    for key, fingerprint in designs.items():
        if fingerprint != designs[first]:
            raise NeedlepointError(f"{key}: design fingerprint differs from {first}'s")
    return designs[first]


def planned_count(prepared_dir: Path) -> int:
    """How many requests the prepared folder plans."""
    from needlepoint.design.prepared import load_prepared

    return len(load_prepared(prepared_dir).plan)


def attempted(run_dir: Path) -> int:
    """How many planned requests the run folder's journal has attempted (0 for a new folder)."""
    from needlepoint.run.folder import has_run_record
    from needlepoint.run.journal import walk

    return len(walk(run_dir).state.attempts) if has_run_record(run_dir) else 0


def recorded_run(run_dir: Path) -> RunRecord | None:
    """The run folder's run.json, or None before its first session."""
    from needlepoint.run.folder import has_run_record, read_run_record

    return read_run_record(run_dir) if has_run_record(run_dir) else None


def resume_port(record: RunRecord | None) -> int | None:
    """The port an unfinished run was sent to: a resume must use the same base URL."""
    if record is None:
        return None
    port = urlsplit(record.base_url or "").port
    if port is None:
        raise NeedlepointError("run.json: base_url has no port; this run cannot be resumed here")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the server binds: connections of the last session may linger in TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise NeedlepointError(
                f"port {port} (this run's recorded base_url) is in use; a resumed run must be "
                "sent to the same address, so free that port and run the command again"
            ) from None
    return port


def check_same_server(record: RunRecord | None, facts: dict[str, Any]) -> None:
    """A resumed run must be answered by the same weights in the same window as it began."""
    if record is None:
        return
    saved = record.extra.get("local_server") or {}
    for name, was, now in (
        ("GGUF sha256", (saved.get("gguf") or {}).get("sha256"), facts["gguf"]["sha256"]),
        ("n_ctx", saved.get("n_ctx"), facts["n_ctx"]),
    ):
        if was != now:
            raise NeedlepointError(
                f"run.json: the run began with {name} {was!r}, the server now has {now!r}; "
                "use a new --label"
            )


# The server and its checks, as module attributes so that tests can put a loopback server here.
def serve(key: str, n_ctx: int, port: int | None, log_path: Path) -> Any:
    """The packaged model served on 127.0.0.1 (a context manager yielding a Server)."""
    from needlepoint.local.server import served_model

    return served_model(key, n_ctx=n_ctx, port=port, log_path=log_path)


def facts_of(server: Any) -> dict[str, Any]:
    """What run.json records about the server."""
    from needlepoint.local.server import server_facts

    return server_facts(server)


def token_check(prepared_dir: Path, server: Any) -> Any:
    """Count every prompt with the server's tokenizer; refuse any that would not fit."""
    from needlepoint.local.tokens import check_token_counts

    return check_token_counts(prepared_dir, server)


def timed_timeout(prepared_dir: Path, server: Any, report: Any, floor_s: float) -> dict[str, Any]:
    """The run's request timeout, from the measured time of its longest prompt."""
    from needlepoint.local.tokens import local_timeout, time_longest_prompt

    return local_timeout(floor_s, time_longest_prompt(prepared_dir, server, report))


def run_live(
    layout: Layout,
    entrant: Entrant,
    n_ctx: int,
    timeout_s: float,
    progress: str,
    say: Say,
    declaration: str | Path | None = None,
) -> None:
    """Serve one model, check its token counts, and run (or resume) its variant completely."""
    from needlepoint.run.options import RunOptions
    from needlepoint.run.runner import run_protocol

    prepared, run_dir = layout.prepared(entrant), layout.run(entrant)
    record = recorded_run(run_dir)
    port = resume_port(record)
    os.environ.setdefault(KEY_ENV, PLACEHOLDER_KEY)
    log = Path(tempfile.gettempdir()) / f"needlepoint-{layout.root.name}-{entrant.key}-server.log"
    with serve(entrant.key, n_ctx, port, log) as server:
        facts = facts_of(server)
        check_same_server(record, facts)
        say(f"  serving {server.alias} (n_ctx {server.n_ctx}) on {server.base_url}; log {log}")
        report = token_check(prepared, server)
        say(f"  token check: {report.summary_line()}")
        timing = timed_timeout(prepared, server, report, timeout_s)
        longest = timing["longest_prompt"]
        say(
            f"  longest prompt ({longest['prompt_tokens']} tokens) took "
            f"{longest['seconds']:.1f} s: request timeout {timing['timeout_s']:g} s"
        )
        options = RunOptions(
            allow=planned_count(prepared),
            progress=progress,
            base_url=server.base_url + "/v1",
            model=server.alias,
            api_key_env=KEY_ENV,
            min_gap_s=0,
            override_reason=OVERRIDE_REASON,
            timeout_s=timing["timeout_s"],
            run_meta={"local_server": facts, "request_timeout": timing},
            declaration=None if declaration is None else str(declaration),
        )
        summary = run_protocol(prepared, run_dir, options)
    for line in summary.lines():
        say(f"  {line}")
    if summary.stop_reason != "complete":
        raise RunStopped(
            f"{run_dir}: stopped before every request was attempted ({summary.stop_reason}: "
            f"{summary.stop_detail}); run the command again to resume"
        )


def finish(
    layout: Layout,
    entrants: Sequence[Entrant],
    protocol_path: Path,
    notebooks_dir: Path,
    notebooks: bool,
    say: Say,
) -> None:
    """Audit every run, derive results, analyse each run alone, compare them; then README.md."""
    from needlepoint.run.audit import audit_run
    from needlepoint.run.results import summary_lines, write_results

    audits: dict[str, list[str]] = {}
    for entrant in entrants:
        # results.csv first, so that the audit also checks it against the journal.
        for line in summary_lines(write_results(layout.run(entrant))):
            say(f"  {entrant.key}: {line}")
        report = audit_run(layout.run(entrant))
        audits[entrant.key] = report.lines()
        if not report.ok:
            raise AuditFailed(f"{layout.run(entrant)}: audit-run failed: {report.lines()[-1]}")
        say(f"{entrant.key}: {report.lines()[-1]}")
    if notebooks:
        from needlepoint.local.compare_notebooks import execute_all

        execute_all(layout, entrants, protocol_path, notebooks_dir, say)
    else:
        from needlepoint.analysis.document import analyze_run
        from needlepoint.compare.document import compare_runs

        for entrant in entrants:
            analysis = analyze_run(layout.run(entrant), layout.analysis(entrant))
            say(f"{entrant.key}: decision {analysis.decision}: {analysis.reason}")
        runs = [layout.run(e) for e in entrants]
        for line in compare_runs(runs, layout.comparison).lines():
            say(line)
    from needlepoint.local.compare_effects import readme_sections

    write_readme(layout, entrants, audits, readme_sections(layout, entrants, layout.root.parent))
    say(f"wrote {layout.root / 'README.md'}")
