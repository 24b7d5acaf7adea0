"""`needlepoint pipeline` and `evidence-diff`; `local-pipeline`, `local-compare`, `local-pilot`,
`local-run` and `local-model ...` (the same notebooks and commands on a packaged model).

`needlepoint local-pilot` and `local-run`: a held-out pilot, or a prepared folder, run live
against a packaged model served on 127.0.0.1 (the commands `pilot` and `run` do elsewhere).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from needlepoint.cli.pilot import add_pilot_flags
from needlepoint.cli.run import add_declaration_flag, command, n_ctx, positive_int, seconds, whole
from needlepoint.local.model import MODELS, SMOLLM2, locate_lines, model_spec
from needlepoint.local.server import served_model, server_facts

if TYPE_CHECKING:
    from needlepoint.local.live import Serving


def _cmd_locate(args: argparse.Namespace) -> int:
    """show the server package and the packaged GGUF"""
    lines, matches = locate_lines(model_spec(args.model))
    for line in lines:
        print(line)
    return 0 if matches else 2


def _cmd_serve(args: argparse.Namespace) -> int:
    """serve on 127.0.0.1 until Ctrl-C"""
    with served_model(args.model, n_ctx=args.n_ctx, port=args.port, log_path=args.log) as server:
        facts = server_facts(server)
        if args.facts_out:
            from needlepoint.jsonio import canonical_bytes, write_bytes_atomic

            write_bytes_atomic(args.facts_out, canonical_bytes(facts) + b"\n")
        print(json.dumps(facts, ensure_ascii=False, indent=1))
        print(f"serving {server.alias} at {server.base_url}/v1 (pid {server.pid}, log "
              f"{server.log_path}); Ctrl-C stops it", flush=True)  # fmt: skip
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopping server", file=sys.stderr)
    return 0


def _cmd_tokenize_check(args: argparse.Namespace) -> int:
    """count every request's prompt tokens"""
    from needlepoint.design.prepared import load_prepared
    from needlepoint.local.server import check_token_counts

    load_prepared(args.prepared)  # a damaged prepared folder is refused before a server starts
    with served_model(args.model, n_ctx=args.n_ctx, log_path=args.log) as server:
        report = check_token_counts(args.prepared, server)
    print(report.summary_line())
    return 0


def _register_model(sub: argparse._SubParsersAction) -> None:
    """Add `needlepoint local-model locate|serve|tokenize-check`."""
    top = sub.add_parser("local-model", help="serve a packaged GGUF model offline (llama.cpp)")
    cmds = top.add_subparsers(dest="local_command", metavar="ACTION")
    cmds.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--model",
            default=SMOLLM2.key,
            choices=sorted(MODELS),
            help="packaged model key (default: %(default)s)",
        )

    def served(p: argparse.ArgumentParser) -> None:
        common(p)
        p.add_argument("--n-ctx", type=n_ctx, default=None, help="context size (default: window)")
        p.add_argument("--log", default=None, help="server log file (default: a temp file)")

    p = command(cmds, "locate", _cmd_locate)
    common(p)
    p = command(cmds, "serve", _cmd_serve)
    served(p)
    p.add_argument("--port", type=whole(1, 65535), default=None, help="default: a free port")
    p.add_argument("--facts-out", default=None, help="write the run-record facts as JSON")
    p = command(cmds, "tokenize-check", _cmd_tokenize_check)
    served(p)
    p.add_argument("prepared", help="prepared folder; token_counts.json is written into it")


def _cmd_local_pipeline(args: argparse.Namespace) -> int:
    """serve the packaged model and run every notebook live against it"""
    from needlepoint.local.live import run_local_pipeline
    from needlepoint.notebook.pipeline import PipelineFailed

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


def _register_pipeline(sub: argparse._SubParsersAction) -> None:
    """Add the local-pipeline command."""
    p = command(sub, "local-pipeline", _cmd_local_pipeline)
    _evidence_folder_flags(p, "local-smollm2", "protocol file to prepare and run", "today")
    p.add_argument("--model", default="smollm2", help="packaged model key or alias")
    p.add_argument("--n-ctx", type=n_ctx, help="server context size (default: the model's window)")
    p.add_argument("--timeout-s", type=seconds, default=300.0, help="per-request timeout")


def _evidence_folder_flags(p: argparse.ArgumentParser, label: str, what: str, date: str) -> None:
    """``--label``, ``--protocol``, ``--evidence-root`` and ``--date``: the evidence folder
    ``<date>-<label>/`` a local command writes, and the protocol (``protocols/LABEL.json``)."""
    p.add_argument("--label", required=True, help=f"evidence folder label, e.g. {label}")
    p.add_argument(
        "--protocol",
        default=f"protocols/{label}.json",
        metavar="FILE",
        help=f"{what} (default: %(default)s)",
    )
    p.add_argument(
        "--evidence-root",
        default="evidence",
        metavar="DIR",
        help="folder the evidence folder <date>-<label>/ is created in (default: %(default)s/)",
    )
    p.add_argument("--date", help=f"YYYYMMDD for the folder name (default: {date})")


def _cmd_local_compare(args: argparse.Namespace) -> int:
    """two packaged models on one design, run live one at a time and compared

    Prepare a model variant of one design for Gemma 3 270M (completion) and SmolLM2-135M-Instruct
    (chat), serve each on 127.0.0.1, check token counts, run each completely, audit, analyse and
    compare into one evidence folder. Running it again resumes.
    """
    from needlepoint.local.compare import (
        DEFAULT_ENTRANTS,
        AuditFailed,
        RunStopped,
        run_local_compare,
    )
    from needlepoint.notebook.pipeline import PipelineFailed

    models = "" if args.models is None else f" --models {args.models}"
    resume = f"needlepoint local-compare --label {args.label} --protocol {args.protocol}{models}"
    try:
        outcome = run_local_compare(
            args.label,
            args.protocol,
            entrants=DEFAULT_ENTRANTS if args.models is None else entrants_of(args.models),
            n_ctx=args.n_ctx,
            timeout_s=args.timeout_s,
            evidence_root=args.evidence_root,
            date=args.date,
            notebooks=not args.no_notebooks,
            progress="off" if args.no_progress else "auto",
            declaration=args.declaration,
        )
    except KeyboardInterrupt:
        # The runner journalled the request in flight as interrupted; the server was stopped.
        print(f"interrupted; every journal is consistent. Resume with: {resume}", file=sys.stderr)
        return 130
    except RunStopped as exc:
        print(f"needlepoint local-compare: {exc}", file=sys.stderr)
        return 3
    except (AuditFailed, PipelineFailed) as exc:
        print(f"needlepoint local-compare: {exc}", file=sys.stderr)
        return 1
    for key, spent in outcome.live_seconds.items():
        print(f"{key}: live part {spent / 60:.1f} min in this invocation")
    print(f"evidence written to {outcome.folder}/")
    return 0


def entrants_of(text: str) -> tuple[Any, ...]:
    """``KEY[:PROFILE],KEY[:PROFILE],...``: packaged models in run order, each with its body
    profile (default: completion for a base model, chat for an instruct one)."""
    from needlepoint.design.profiles import check_profile_name
    from needlepoint.local.compare import Entrant

    out = []
    for part in text.split(","):
        key, _, profile = part.strip().partition(":")
        spec = model_spec(key)
        profile = profile or ("completion" if spec.base else "chat")
        check_profile_name(profile, f"--models {part.strip()}")
        out.append(Entrant(spec.key, profile))
    return tuple(out)


def _register_compare(sub: argparse._SubParsersAction) -> None:
    """Add the local-compare command."""
    from needlepoint.local.compare import DEFAULT_N_CTX

    p = command(sub, "local-compare", _cmd_local_compare)
    _evidence_folder_flags(
        p,
        "local-compare",
        "protocol file of the design both models run",
        "the existing folder of this label, or today",
    )
    p.add_argument(
        "--models",
        metavar="KEY[:PROFILE],...",
        help="packaged models in run order, e.g. qwen-0.5b,qwen-1.5b (default: "
        "gemma3:completion,smollm2:chat); the profile defaults to chat for an instruct model",
    )
    p.add_argument(
        "--n-ctx",
        type=n_ctx,
        default=DEFAULT_N_CTX,
        help="every server's context size (%(default)s)",
    )
    p.add_argument(
        "--timeout-s",
        type=seconds,
        default=300.0,
        help="least per-request timeout; a run uses 4x its longest prompt's measured time "
        "when that is longer (recorded in run.json)",
    )
    p.add_argument(
        "--no-notebooks", action="store_true", help="analyse and compare without the notebooks"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar during runs")
    add_declaration_flag(p)


def register(sub: argparse._SubParsersAction) -> None:
    """Add pipeline and evidence-diff, then local-pipeline, local-compare, local-pilot and
    local-model."""
    _register_notebooks(sub)
    _register_pipeline(sub)
    _register_compare(sub)
    _register_live(sub)
    _register_model(sub)


def _serving(args: argparse.Namespace) -> Serving:
    """The serving and run options both commands pass on, from their shared flags."""
    from needlepoint.local.live import Serving

    return Serving(
        allow=args.allow,
        model=args.model,
        n_ctx=args.n_ctx,
        timeout_s=args.timeout_s,
        progress="off" if args.no_progress else "auto",
        declaration=args.declaration,
    )


def _serving_flags(p: argparse.ArgumentParser) -> None:
    """The flags both commands share: the allowance, the model and server, the declaration."""
    p.add_argument("--allow", type=positive_int, required=True, help="most attempts")
    p.add_argument("--model", default="smollm2", help="packaged model key or alias")
    p.add_argument("--n-ctx", type=n_ctx, help="server context size (default: window)")
    p.add_argument("--timeout-s", type=seconds, default=300.0, help="per-request timeout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_declaration_flag(p)


def _cmd_local_pilot(args: argparse.Namespace) -> int:
    """serve the packaged model and run a held-out pilot live against it

    `needlepoint pilot` against a packaged model on 127.0.0.1: the token check runs before the first
    request, and the server's facts go into run.json.
    """
    from needlepoint.cli.pilot import pilot_command
    from needlepoint.local.live import run_local_pilot

    return pilot_command(args, run_local_pilot, lambda: _serving(args))


def _cmd_local_run(args: argparse.Namespace) -> int:
    """serve the packaged model and run a prepared folder live against it

    `needlepoint run` against a packaged model on 127.0.0.1, with the token check before the first
    request and the server's facts in run.json; then results.csv.
    """
    from needlepoint.local.live import run_local
    from needlepoint.run.results import summary_lines

    summary, results = run_local(
        args.prepared,
        args.run_dir,
        _serving(args),
    )
    for line in [*summary.lines(), *summary_lines(results)]:
        print(line)
    return 0 if summary.stop_reason in ("complete", "allowance_spent") else 3


def _register_live(sub: argparse._SubParsersAction) -> None:
    """Add the local-pilot and local-run commands."""
    p = command(sub, "local-pilot", _cmd_local_pilot)
    p.add_argument("--protocol", required=True, help="the design's protocol file (its model)")
    add_pilot_flags(p)
    _serving_flags(p)

    r = command(sub, "local-run", _cmd_local_run)
    r.add_argument("prepared", metavar="DIR", help="prepared folder (its model is served)")
    r.add_argument("--run-dir", required=True, help="run folder: created, or resumed")
    _serving_flags(r)


# `needlepoint pipeline` (run the notebooks into an evidence folder) and `evidence-diff`.


def outcome_lines(out: Path) -> list[str]:
    """The decision and where the summary is, read back from the analysis the notebooks wrote.

    A simulated run's decision carries the simulation banner, so it is never read as a model's.
    Nothing when the analysis notebook did not run (or wrote no analysis).
    """
    from needlepoint.analysis.document import Analysis
    from needlepoint.analysis.primary import SIMULATION_BANNER
    from needlepoint.analysis.record import read_document

    folder = out / "analysis"
    if not (folder / "analysis.json").is_file():
        return []
    analysis = Analysis(read_document(folder / "analysis.json"), folder)
    label = f" ({SIMULATION_BANNER})" if analysis.simulation else ""
    return [
        f"decision{label}: {analysis.decision} ({analysis.reason.rstrip('.')})",
        f"summary: {folder / 'summary.md'}",
    ]


def _cmd_pipeline(args: argparse.Namespace) -> int:
    """run the notebooks in order into an evidence folder"""
    from needlepoint.notebook.pipeline import parse_value, run_pipeline

    overrides = {name: parse_value(value) for name, value in args.p or []}
    out = run_pipeline(
        args.label,
        overrides,
        evidence_root=args.evidence_root,
        notebooks_dir=args.notebooks,
        date=args.date,
    )
    print(f"evidence written to {out}/")
    for line in outcome_lines(out):
        print(line)
    return 0


def _cmd_evidence_diff(args: argparse.Namespace) -> int:
    """compare a regenerated evidence folder with the committed one, byte for byte"""
    from needlepoint.notebook.evidence import diff_evidence

    diff = diff_evidence(args.committed, args.regenerated)
    print("\n".join(diff.lines()))
    return 0 if diff.ok else 1


def _register_notebooks(sub: argparse._SubParsersAction) -> None:
    """Add the pipeline and evidence-diff commands."""
    from needlepoint.notebook.pipeline import DEFAULT_ROOT

    p = command(sub, "pipeline", _cmd_pipeline)
    p.add_argument("--label", required=True, help="evidence folder label, e.g. offline")
    p.add_argument(
        "-p",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="set a notebook parameter (JSON literal or string); repeatable",
    )
    p.add_argument(
        "--evidence-root",
        default=DEFAULT_ROOT,
        metavar="DIR",
        help="folder the evidence folder <date>-<label>/ is created in (default: %(default)s/, "
        "which git ignores; the committed evidence lives in evidence/)",
    )
    p.add_argument(
        "--notebooks",
        metavar="DIR",
        help="the notebooks to execute (default: ./notebooks, else the repository's notebooks "
        "beside the installed package)",
    )
    p.add_argument("--date", help="YYYYMMDD for the folder name (default: today)")

    p = command(sub, "evidence-diff", _cmd_evidence_diff)
    p.add_argument("committed", type=Path, help="the committed evidence folder")
    p.add_argument("regenerated", type=Path, help="the folder the notebooks re-wrote")
