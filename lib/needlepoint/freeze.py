"""Prepare, load and verify a prepared folder: the frozen, fingerprinted materials.

``prepare`` writes the files; ``verify`` regenerates them from ``protocol.json`` with the current
source and compares every byte, naming the file, seq and field of any difference.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import needlepoint
from needlepoint import protocol as protocol_mod
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, file_sha256, iter_jsonl, read_json, sha256_hex
from needlepoint.materials import RequestBuilder, generate_cases
from needlepoint.order import execution_plan

PLAN_COLUMNS = (
    "seq",
    "block",
    "pair",
    "case",
    "length",
    "similarity",
    "condition",
    "order",
    "request_sha256",
)
DATA_FILES = ("protocol.json", "requests.jsonl", "plan.csv", "answer_key.jsonl")
MANIFEST_FORMAT = 1
# The modules whose code decides the bytes of a prepared folder; fingerprinted in the manifest.
SOURCE_MODULES = ("rand.py", "jsonio.py", "protocol.py", "materials.py", "order.py", "freeze.py")


@dataclass(frozen=True)
class PlanRow:
    """One row of plan.csv."""

    seq: int
    block: int
    pair: int
    case: str
    length: int
    similarity: str
    condition: str
    order: str
    request_sha256: str


@dataclass(frozen=True)
class Prepared:
    """A loaded prepared folder.

    ``fingerprint`` is the SHA-256 of the canonical ``files`` map of manifest.json: it names the
    frozen materials, and stays the same when only the generating source changes (verify warns
    about that separately), so runs and analyses of identical materials carry one fingerprint.
    """

    root: Path
    protocol: dict[str, Any]
    plan: tuple[PlanRow, ...]
    bodies: dict[int, bytes]
    answer_key: dict[int, dict[str, Any]]
    manifest: dict[str, Any]
    fingerprint: str


def protocol_bytes(protocol: dict[str, Any]) -> bytes:
    """protocol.json is indented for reading, but still sorted and UTF-8, so its bytes are fixed."""
    return (json.dumps(protocol, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode()


def generate(protocol: dict[str, Any]) -> dict[str, bytes]:
    """The bytes of every data file of a prepared folder, in memory."""
    cases = generate_cases(protocol)
    builder = RequestBuilder(protocol)
    length_index = {n: i for i, n in enumerate(protocol["lengths"])}
    requests, keys = [], []
    plan = io.StringIO()
    writer = csv.writer(plan, lineterminator="\n")
    writer.writerow(PLAN_COLUMNS)
    for slot in execution_plan(protocol):
        case = cases[slot.case_index]
        bg = case.backgrounds[length_index[slot.length]]
        req = builder.build(case, bg, slot.similarity, slot.condition)
        body = canonical_bytes(req.body)
        # Keys "body" < "seq" in sorted order, so this is the canonical encoding of the line.
        requests.append(b'{"body":' + body + b',"seq":' + str(slot.seq).encode() + b"}\n")
        writer.writerow(
            (
                slot.seq,
                slot.block,
                slot.pair,
                case.label,
                slot.length,
                slot.similarity,
                slot.condition,
                slot.order,
                sha256_hex(body),
            )
        )
        keys.append(
            {
                "seq": slot.seq,
                "expected": req.expected,
                "target_code": case.target_code,
                "target_name": case.target_name,
                "codes_present": list(req.codes_present),
                "near_codes": list(req.near_codes),
                "near_names": list(req.near_names),
                "near_kinds": list(case.near_kinds)
                if slot.similarity == "high"
                else ["unrelated"] * len(req.near_codes),
                "similarity": slot.similarity,
                "condition": slot.condition,
            }
        )
    return {
        "protocol.json": protocol_bytes(protocol),
        "requests.jsonl": b"".join(requests),
        "plan.csv": plan.getvalue().encode(),
        "answer_key.jsonl": b"".join(canonical_bytes(k) + b"\n" for k in keys),
    }


def source_fingerprints() -> dict[str, str]:
    """SHA-256 of each source module that decides the materials."""
    here = Path(needlepoint.__file__).parent
    return {f"needlepoint/{m}": file_sha256(here / m) for m in SOURCE_MODULES}


def manifest_bytes(files: dict[str, bytes]) -> bytes:
    """manifest.json for a set of data files."""
    manifest = {
        "format": MANIFEST_FORMAT,
        "package_version": needlepoint.__version__,
        "files": {name: sha256_hex(files[name]) for name in DATA_FILES},
        "sources": source_fingerprints(),
    }
    return protocol_bytes(manifest)


def prepare(out_dir: str | Path, protocol_path: str | Path | None = None) -> Path:
    """Write a prepared folder; refuses a non-empty folder so nothing is ever overwritten."""
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise NeedlepointError(f"{out}: exists and is not an empty folder; choose a fresh one")
    protocol = (
        protocol_mod.load_override(protocol_path)
        if protocol_path is not None
        else protocol_mod.reference_protocol()
    )
    files = generate(protocol)
    files["manifest.json"] = manifest_bytes(files)
    out.mkdir(parents=True, exist_ok=True)
    for name in (*DATA_FILES, "manifest.json"):
        (out / name).write_bytes(files[name])
    return out


def materials_fingerprint(manifest: Any) -> str:
    """SHA-256 of the canonical map of data-file hashes: the protocol fingerprint."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise NeedlepointError("manifest.json: no files map")
    return sha256_hex(canonical_bytes(files))


def _folder(path: str | Path) -> Path:
    root = Path(path)
    if not root.is_dir():
        raise NeedlepointError(f"{root}: no such prepared folder")
    return root


def load_protocol_file(root: Path) -> dict[str, Any]:
    """Read and validate a prepared folder's protocol.json."""
    protocol = read_json(root / "protocol.json")
    if not isinstance(protocol, dict):
        raise NeedlepointError(f"{root / 'protocol.json'}: not a JSON object")
    protocol_mod.validate(protocol, str(root / "protocol.json"))
    return protocol


def read_plan(path: Path) -> tuple[PlanRow, ...]:
    """Parse plan.csv; a malformed row is a one-line error naming the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NeedlepointError(f"{path}: file not found") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or tuple(rows[0]) != PLAN_COLUMNS:
        raise NeedlepointError(f"{path}:1: header must be {','.join(PLAN_COLUMNS)}")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            values = dict(zip(PLAN_COLUMNS, row, strict=True))
            out.append(
                PlanRow(
                    **{
                        **values,
                        **{k: int(values[k]) for k in ("seq", "block", "pair", "length")},
                    }
                )
            )
        except ValueError:
            raise NeedlepointError(f"{path}:{number}: malformed plan row") from None
    return tuple(out)


def load_prepared(path: str | Path) -> Prepared:
    """Load every file of a prepared folder (without verifying it: see verify_prepared)."""
    root = _folder(path)
    protocol = load_protocol_file(root)
    bodies: dict[int, bytes] = {}
    for number, line in iter_jsonl(root / "requests.jsonl"):
        if not isinstance(line, dict) or not isinstance(line.get("seq"), int):
            raise NeedlepointError(f"{root / 'requests.jsonl'}:{number}: no integer seq")
        bodies[line["seq"]] = canonical_bytes(line.get("body"))
    answer_key = {}
    for number, line in iter_jsonl(root / "answer_key.jsonl"):
        if not isinstance(line, dict) or not isinstance(line.get("seq"), int):
            raise NeedlepointError(f"{root / 'answer_key.jsonl'}:{number}: no integer seq")
        answer_key[line["seq"]] = line
    manifest = read_json(root / "manifest.json")
    return Prepared(
        root=root,
        protocol=protocol,
        plan=read_plan(root / "plan.csv"),
        bodies=bodies,
        answer_key=answer_key,
        manifest=manifest,
        fingerprint=materials_fingerprint(manifest),
    )


@dataclass
class VerifyReport:
    """What verify found: problems fail it, warnings do not."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files_compared: int = 0
    bytes_compared: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _first_difference(a: Any, b: Any, where: str) -> str:
    """Dotted path of the first field where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{where}.{key}".lstrip(".")
            if a[key] != b[key]:
                return _first_difference(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_difference(x, y, f"{where}[{i}]")
        return f"{where} (length {len(a)} vs {len(b)})"
    elif isinstance(a, str) and isinstance(b, str) and "\n" in a + b:
        la, lb = a.split("\n"), b.split("\n")
        line = next((i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y), None)
        line = min(len(la), len(lb)) if line is None else line
        return f"{where} line {line + 1}"
    return where.lstrip(".") or "value"


def _describe_file_difference(name: str, expected: bytes, actual: bytes) -> list[str]:
    exp_lines, act_lines = expected.split(b"\n"), actual.split(b"\n")
    out = []
    for i, (e, a) in enumerate(zip(exp_lines, act_lines, strict=False)):
        if e == a:
            continue
        if name.endswith(".jsonl"):
            try:
                ev, av = json.loads(e), json.loads(a)
            except ValueError:
                out.append(f"{name} line {i + 1}: not the expected JSON line")
            else:
                seq = ev.get("seq") if isinstance(ev, dict) else None
                out.append(f"{name} seq {seq}: {_first_difference(ev, av, '')} differs")
        elif name == "plan.csv":
            header = PLAN_COLUMNS
            ev, av = e.decode(errors="replace").split(","), a.decode(errors="replace").split(",")
            col = next((c for c, x, y in zip(header, ev, av, strict=False) if x != y), "row")
            out.append(f"plan.csv seq {ev[0]}: {col} differs")
        else:
            out.append(f"{name} line {i + 1} differs")
        if len(out) >= 5:
            break
    if not out:
        out.append(f"{name}: {len(act_lines) - 1} lines where {len(exp_lines) - 1} expected")
    return out


def verify_prepared(path: str | Path) -> VerifyReport:
    """Regenerate the set from protocol.json and compare every byte with the folder."""
    root = _folder(path)
    report = VerifyReport()
    protocol = load_protocol_file(root)
    files = generate(protocol)
    for name in DATA_FILES:
        target = root / name
        if not target.is_file():
            report.problems.append(f"{name}: missing")
            continue
        actual = target.read_bytes()
        report.files_compared += 1
        report.bytes_compared += len(actual)
        if actual != files[name]:
            report.problems += _describe_file_difference(name, files[name], actual)
    _check_manifest(root, files, report)
    return report


def _check_manifest(root: Path, files: dict[str, bytes], report: VerifyReport) -> None:
    if not (root / "manifest.json").is_file():
        report.problems.append("manifest.json: missing")
        return
    manifest = read_json(root / "manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        report.problems.append("manifest.json: unsupported format")
        return
    recorded = manifest.get("files", {})
    for name in DATA_FILES:
        if recorded.get(name) != sha256_hex(files[name]):
            report.problems.append(f"manifest.json: hash of {name} does not match")
    for module, digest in sorted(source_fingerprints().items()):
        if manifest.get("sources", {}).get(module) != digest:
            report.warnings.append(
                f"source {module} changed since preparation (materials still identical)"
                if not report.problems
                else f"source {module} changed since preparation"
            )
    if manifest.get("package_version") != needlepoint.__version__:
        report.warnings.append(
            f"prepared with needlepoint {manifest.get('package_version')}, "
            f"now {needlepoint.__version__}"
        )


def dry_run_lines(path: str | Path) -> list[str]:
    """The plan and a budget summary, computed from the folder alone with no network."""
    prepared = load_prepared(path)
    lines = ["seq  block pair case length sim  cond order    chars"]
    total_chars = total_bytes = 0
    for row in prepared.plan:
        body = json.loads(prepared.bodies[row.seq])
        chars = sum(len(m["content"]) for m in body["messages"])
        total_chars += chars
        total_bytes += len(prepared.bodies[row.seq])
        lines.append(
            f"{row.seq:<4} {row.block:<5} {row.pair:<4} {row.case:<4} {row.length:<6} "
            f"{row.similarity:<4} {row.condition:<4} {row.order:<8} {chars}"
        )
    gap = prepared.protocol["runner"]["min_gap_s"]
    n = len(prepared.plan)
    lines += [
        "",
        f"requests: {n} ({len({r.block for r in prepared.plan})} blocks, "
        f"{len({r.pair for r in prepared.plan})} pairs)",
        f"characters sent (message content): {total_chars}",
        f"request bytes sent: {total_bytes}",
        f"max_tokens per request: {prepared.protocol['max_tokens']} "
        f"(at most {n * prepared.protocol['max_tokens']} completion tokens)",
        f"minimum spacing: {gap} s after each completion, so at least {(n - 1) * gap} s of waiting",
        "network: none (dry run)",
    ]
    return lines


def _cmd_prepare(args: argparse.Namespace) -> int:
    out = prepare(args.out, args.protocol)
    print(f"prepared {out}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    report = verify_prepared(args.dir)
    for warning in report.warnings:
        print(f"warning: {warning}")
    for problem in report.problems:
        print(f"MISMATCH {problem}")
    status = "OK" if report.ok else "FAILED"
    print(
        f"verify {status}: {report.files_compared} files, {report.bytes_compared} bytes "
        f"regenerated and compared; {len(report.problems)} problems, "
        f"{len(report.warnings)} warnings"
    )
    return 0 if report.ok else 1


def _cmd_dry_run(args: argparse.Namespace) -> int:
    print("\n".join(dry_run_lines(args.dir)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add prepare, verify and dry-run."""
    p = sub.add_parser("prepare", help="write a prepared folder of frozen requests")
    p.add_argument("--out", required=True, help="a new or empty folder")
    p.add_argument("--protocol", help="JSON file overriding protocol parameters")
    p.set_defaults(func=_cmd_prepare)
    p = sub.add_parser("verify", help="regenerate a prepared folder and compare every byte")
    p.add_argument("dir")
    p.set_defaults(func=_cmd_verify)
    p = sub.add_parser("dry-run", help="print the plan and budget; no network")
    p.add_argument("dir")
    p.set_defaults(func=_cmd_dry_run)
