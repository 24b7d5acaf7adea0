"""`needlepoint contamination <check>`: the four checks and the combined CI gate.

Exit status: 0 clean, 1 a finding (leak, poisoned rerun, dead canary, results without
tool_calls), 2 bad input (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import sys

from needlepoint.cli.run import command
from needlepoint.contamination.report import EXIT_FINDING, EXIT_PASSED
from needlepoint.safetext import say

_CONTEXT_HELP = "workspace folder, a single file, or a manifest .json written by `manifest`"
_INCLUDE_HELP = "glob relative to the root (repeatable); replaces the default agent context files"


def _manifest(args: argparse.Namespace) -> int:
    """freeze the automatic context: paths, sizes, mtimes, SHA-256"""
    from needlepoint.contamination.context import (
        DEFAULT_INCLUDES,
        build_manifest,
        manifest_bytes,
        write_manifest,
    )

    manifest = build_manifest(args.root, args.include or DEFAULT_INCLUDES)
    for p in manifest.problems:
        say(f"problem: {p.path}: {p.kind} ({p.detail})", file=sys.stderr)
    if args.out is None:
        sys.stdout.write(manifest_bytes(manifest).decode("utf-8"))
    else:
        write_manifest(manifest, args.out)
        say(
            f"{len(manifest.files)} file(s), {len(manifest.problems)} problem(s), "
            f"manifest sha256 {manifest.sha256} -> {args.out}"
        )
    return EXIT_PASSED


def _print_context_notes(result: object) -> bool:
    """Print what the context loading met; True when part of the context was not read (the
    check then fails closed: exit 1, whatever it found in the rest)."""
    from needlepoint.contamination.context import unread_parts

    verification = getattr(result, "verification", None)
    problems = getattr(result, "problems", ())
    if verification is not None:
        say("manifest: " + verification.sentence())
        for c in verification.changes:
            say(f"  {c.kind}: {c.path} ({c.detail})")
    for p in problems:
        say(f"problem: {p.path}: {p.kind} ({p.detail})")
    unread = unread_parts(problems, verification)
    for part in unread:
        say(f"not read: {part}", file=sys.stderr)
    if unread:
        say(
            f"fails closed: {len(unread)} part(s) of the context could not be read, so no clean "
            "pass can be given",
            file=sys.stderr,
        )
    return bool(unread)


def _overlap(args: argparse.Namespace) -> int:
    """reference answers present verbatim in the context"""
    from needlepoint.contamination.context import load_context
    from needlepoint.contamination.inputs import read_discards, read_reference
    from needlepoint.contamination.overlap import check_overlap

    reference = read_reference(args.reference)
    discards = read_discards(args.discard) if args.discard else ()
    result = check_overlap(reference, load_context(args.context, args.include), discards)
    say(result.sentence())
    for m in result.kept:
        say(f"  {m.reference_id}", m.answer, m.where, sep="\t")
    for m in result.discarded:
        say(f"  discarded {m.reference_id}", m.answer, m.where, m.discard_reason, sep="\t")
    for d in result.unused_discards:
        where = f"{d.source}:{d.source_line}"
        say(f"  unused discard {where} ({d.reference_id} at {d.file}:{d.line})")
    unread = _print_context_notes(result)
    return EXIT_FINDING if result.leaked or unread else EXIT_PASSED


def _timeline(args: argparse.Namespace) -> int:
    """files newer than a run holding its results; poisoned reruns"""
    from needlepoint.contamination.context import load_context
    from needlepoint.contamination.inputs import iso_from_ns, read_runs
    from needlepoint.contamination.overlap import check_timeline

    result = check_timeline(read_runs(args.runs), load_context(args.context, args.include))
    say(result.sentence())
    for h in result.holdings:
        when = "written after" if h.after_run else "already there at"
        say(
            f"  {h.file} ({iso_from_ns(h.mtime_ns)}) holds values of run {h.run_id}: "
            f"{when} its start ({h.minutes_after_start:+.0f} min)"
        )
    for p in result.poisoned:
        say(f"  poisoned rerun {p.run_id} ({iso_from_ns(p.started_ns)}) by {p.file}")
    unread = _print_context_notes(result)
    return EXIT_FINDING if result.has_poisoned_rerun or unread else EXIT_PASSED


def _transcripts(specs: list[str] | None) -> tuple:
    """Each --transcripts argument read; inspect logs by inspect's own reader (interop)."""
    from needlepoint.contamination.canary import read_transcript

    if not specs:
        return ()

    def inspect_turns(path):
        from needlepoint.interop.inspect_log import read_agent_turns

        return read_agent_turns(path)

    return tuple(read_transcript(spec, inspect_turns) for spec in specs)


def _canary(args: argparse.Namespace) -> int:
    """clean-room canary, zero-tool-call leaks, tool_calls present"""
    from needlepoint.contamination.canary import apply_transcripts, check_canary
    from needlepoint.contamination.inputs import read_results

    rows = read_results(args.results)
    transcripts = _transcripts(args.transcripts)
    problems: tuple[str, ...] = ()
    if transcripts:
        rows, problems = apply_transcripts(rows, transcripts)
    result = check_canary(
        rows,
        tool_calls_source="transcript" if transcripts else "results",
        transcript_problems=problems,
    )
    say(result.sentence())
    for problem in result.transcript_problems:
        say(f"  transcript: {problem}")
    labelled = [("dead canary", r) for r in result.dead_canary]
    labelled += [("leak", r) for r in result.leaks]
    labelled += [("no tool_calls", r) for r in result.missing_tool_calls]
    for label, r in labelled:
        say(f"  {label}: {args.results}:{r.line} {r.run_id}/{r.question_id}")
    bad = bool(result.dead_canary) or result.leaked or not result.has_detector
    bad = bad or bool(result.transcript_problems)
    return EXIT_FINDING if bad else EXIT_PASSED


def _report(args: argparse.Namespace) -> int:
    """all checks -> contamination.json/.md; exit 1 on findings"""
    from needlepoint.contamination.report import build_report, write_report

    report = build_report(
        args.reference,
        args.runs,
        args.results,
        args.context,
        args.discard,
        args.include,
        transcripts=_transcripts(args.transcripts),
    )
    json_path, md_path = write_report(report, args.out)
    say(f"gate: {'PASSED' if report.gate.passed else 'FAILED'} -> {json_path}, {md_path}")
    for f in report.gate.findings:
        say(f"  {f.kind} ({f.check}): {f.message}")
    return report.gate.exit_code


REF_HELP = "reference answers: format,id,question,answer (docs/contamination.md)"
RUNS_HELP = "what each run recorded: format,run_id,battery,started_at,value"
RESULTS_HELP = "one answer per line, with its condition and tool_calls (docs/contamination.md)"
TRANSCRIPTS_HELP = (
    "count tool calls from an agent transcript instead of the tool_calls column (repeatable): "
    "[RUN_ID=]claude-code:PATH, codex:PATH or inspect:LOG"
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `contamination` and its checks to the `needlepoint` command."""
    parser = sub.add_parser(
        "contamination",
        help="check an agent's automatic context for answers it could read instead of know",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    checks = parser.add_subparsers(dest="check", metavar="CHECK")
    checks.required = True

    p = command(checks, "manifest", _manifest)
    p.add_argument("--root", required=True, help="workspace root")
    p.add_argument("--include", action="append", metavar="GLOB", help=_INCLUDE_HELP)
    p.add_argument("--out", help="write the manifest JSON here (default: standard output)")

    p = command(checks, "overlap", _overlap)
    p.add_argument("--reference", required=True, metavar="REF.csv", help=REF_HELP)
    p.add_argument("--context", required=True, metavar="PATH", help=_CONTEXT_HELP)
    p.add_argument(
        "--discard", metavar="FILE", help="discard CSV: chance matches, each with a reason"
    )
    p.add_argument("--include", action="append", metavar="GLOB", help=_INCLUDE_HELP)

    p = command(checks, "timeline", _timeline)
    p.add_argument("--runs", required=True, metavar="RUNS.csv", help=RUNS_HELP)
    p.add_argument("--context", required=True, metavar="PATH", help=_CONTEXT_HELP)
    p.add_argument("--include", action="append", metavar="GLOB", help=_INCLUDE_HELP)

    p = command(checks, "canary", _canary)
    p.add_argument("--results", required=True, metavar="RESULTS.jsonl", help=RESULTS_HELP)
    p.add_argument(
        "--transcripts", action="append", metavar="[RUN_ID=]KIND:PATH", help=TRANSCRIPTS_HELP
    )

    p = command(checks, "report", _report)
    p.add_argument("--reference", required=True, metavar="REF.csv", help=REF_HELP)
    p.add_argument("--runs", required=True, metavar="RUNS.csv", help=RUNS_HELP)
    p.add_argument("--results", required=True, metavar="RESULTS.jsonl", help=RESULTS_HELP)
    p.add_argument(
        "--transcripts", action="append", metavar="[RUN_ID=]KIND:PATH", help=TRANSCRIPTS_HELP
    )
    p.add_argument("--context", required=True, metavar="PATH", help=_CONTEXT_HELP)
    p.add_argument("--discard", metavar="FILE", help="discard CSV for the overlap check")
    p.add_argument("--include", action="append", metavar="GLOB", help=_INCLUDE_HELP)
    p.add_argument("--out", required=True, metavar="DIR", help="folder for contamination.json/.md")
