"""The independent audit of a prepared folder, judged from its files alone.

It deliberately imports nothing from the generator (materials, order, freeze, protocol): it
re-derives every rule from ``protocol.json`` and PROTOCOL.md, so a bug in the generator cannot
hide itself by also being in the checker. Only the Java-compatible generator (itself checked
against real Java output) and the canonical-JSON helper are shared.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.design import protocol_schema
from needlepoint.design.audit_bodies import audited_design_fingerprint, body_problem
from needlepoint.design.audit_rules import check_content
from needlepoint.design.java_random import JavaRandom, shuffle
from needlepoint.design.prepared_schema import (
    check_answer,
    check_file_sizes,
    check_manifest,
    check_plan,
    check_request,
    jsonl_values,
    read_text,
)
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, file_sha256, read_json, sha256_hex

KNOWN_FORMATS = (1,)
KNOWN_PROTOCOLS = ("context-position-similar",)
FILES = ("protocol.json", "requests.jsonl", "plan.csv", "answer_key.jsonl")
CODE_RE = re.compile(r"[A-Z]{2}-[0-9]{4}")
_MAX_LISTED = 20


@dataclass
class Check:
    """One audit rule: how many items it examined and which of them failed."""

    name: str
    description: str
    count: int = 0
    failures: list[str] = field(default_factory=list)
    failed: int = 0

    def fail(self, message: str) -> None:
        self.failed += 1
        if len(self.failures) < _MAX_LISTED:
            self.failures.append(message)

    @property
    def ok(self) -> bool:
        return self.failed == 0


@dataclass
class AuditReport:
    """Every check with its count; the audit passes only when every check does."""

    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def lines(self) -> list[str]:
        out = [f"{'check':<22} {'count':>7} {'failed':>6}  rule"]
        for c in self.checks:
            out.append(f"{c.name:<22} {c.count:>7} {c.failed:>6}  {c.description}")
            out += [f"    FAIL {f}" for f in c.failures]
        n_fail = sum(not c.ok for c in self.checks)
        total = sum(c.count for c in self.checks)
        out.append(
            f"audit {'OK' if self.ok else 'FAILED'}: {len(self.checks)} checks, "
            f"{total} items examined, {n_fail} checks failed"
        )
        return out


_CHECKS = {
    "manifest_hashes": "manifest.json records the SHA-256 of every data file",
    "design_fingerprint": "manifest.json's design fingerprint is that of protocol.json's design",
    "canonical_lines": "requests.jsonl lines are canonical JSON with seq 1..n in order",
    "body_keys": "bodies have their profile's members, with the protocol's values",
    "plan_hashes": "plan.csv request_sha256 equals the SHA-256 of each canonical body",
    "plan_design": "every case × length × similarity × condition exactly once, in blocks/pairs",
    "order_balance": "each condition order appears equally often in every stratum",
    "case_shuffle": "the plan equals the order reconstructed from seeds.order (PROTOCOL.md)",
    "record_format": "one templated record per line; 8-character names; valid codes",
    "question": "the question follows the records and names the target",
    "system_message": "the system message holds no code and not the target name",
    "target_once": "target code once in B/M/E at its position; never in A",
    "shared_background": "the four conditions of a block share one unchanged background",
    "placeholder": "A holds an unrelated placeholder of exactly the target record's length",
    "near_slots": "high: two of each near kind at floor((2k+1)N/12), kinds as claimed",
    "unrelated_names": "every other name shares no 2-character word with the target",
    "unique_codes": "no code or name repeats within a request",
    "pair_difference": "low and high differ in exactly the six slot names, codes unchanged",
    "equal_length": "all 8 requests of a pair have equal character length",
    "answer_key": "answer key agrees with the requests (expected, codes, near codes)",
}


class _Audit:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.c = {name: Check(name, text) for name, text in _CHECKS.items()}
        self.protocol = read_json(root / "protocol.json")
        p = self.protocol
        if not isinstance(p, dict) or p.get("format") not in KNOWN_FORMATS:
            fmt = p.get("format") if isinstance(p, dict) else None
            raise NeedlepointError(f"{root / 'protocol.json'}: unsupported protocol format {fmt!r}")
        if p.get("protocol_id") not in KNOWN_PROTOCOLS:
            raise NeedlepointError(
                f"{root / 'protocol.json'}: unknown protocol_id {p.get('protocol_id')!r}"
            )
        # Every file is checked against its documented schema first (prepared_schema shares
        # no code with the generator): the rules below then meet only well-typed values.
        protocol_schema.check(p, str(root / "protocol.json"))
        check_file_sizes(root, p)
        text = read_text(root / "requests.jsonl")
        self.raw_lines = text.encode("utf-8").split(b"\n")
        for number, line in jsonl_values(root / "requests.jsonl", text):
            check_request(line, f"{root / 'requests.jsonl'}:{number}")
        self.plan = check_plan(root / "plan.csv")
        self.keys = [
            check_answer(line, f"{root / 'answer_key.jsonl'}:{number}")
            for number, line in jsonl_values(root / "answer_key.jsonl")
        ]
        self.manifest = check_manifest(
            read_json(root / "manifest.json"), str(root / "manifest.json")
        )
        t = p["templates"]
        head, tail = t["record"].split("{name}")
        mid, end = tail.split("{code}")
        self.record_re = re.compile(f"{re.escape(head)}(.*){re.escape(mid)}(.*){re.escape(end)}")
        # The same rule for a whole block at once: 8-character name, well-formed code.
        self.records_re = re.compile(
            f"^{re.escape(head)}([^\\n]{{8}}){re.escape(mid)}([A-Z]{{2}}-[0-9]{{4}}){re.escape(end)}$",
            re.M,
        )
        self.user_head, self.user_tail = t["user"].split("{records}")
        q_head, q_tail = self.user_tail.split("{name}")
        self.question_head = q_head
        self.question_re = re.compile(f"{re.escape(q_head)}(.*){re.escape(q_tail)}", re.S)

    # -- file-level checks -------------------------------------------------------------
    def files(self) -> list[dict[str, Any]]:
        c = self.c["manifest_hashes"]
        recorded = self.manifest.get("files", {}) if isinstance(self.manifest, dict) else {}
        for name in FILES:
            c.count += 1
            if recorded.get(name) != file_sha256(self.root / name):
                c.fail(f"{name}: SHA-256 differs from manifest.json")
        self.design_fingerprint()
        c = self.c["canonical_lines"]
        if self.raw_lines and self.raw_lines[-1] == b"":
            self.raw_lines.pop()
        bodies: list[Any] = []
        self.body_bytes: list[bytes] = []
        for i, raw in enumerate(self.raw_lines, start=1):
            c.count += 1
            line = json.loads(raw)  # each line was parsed and checked in __init__
            body_bytes = canonical_bytes(line.get("body")) if isinstance(line, dict) else b""
            if b'{"body":' + body_bytes + b',"seq":' + str(i).encode() + b"}" != raw:
                c.fail(f"requests.jsonl line {i}: not canonical JSON with keys body, seq")
            self.body_bytes.append(body_bytes)
            if not isinstance(line, dict) or line.get("seq") != i or set(line) != {"body", "seq"}:
                c.fail(f"requests.jsonl line {i}: expected keys body, seq with seq {i}")
            bodies.append(line.get("body") if isinstance(line, dict) else None)
        return bodies

    def design_fingerprint(self) -> None:
        # A manifest written before design fingerprints existed has none: nothing to examine.
        c = self.c["design_fingerprint"]
        recorded = (
            self.manifest.get("design_fingerprint") if isinstance(self.manifest, dict) else None
        )
        if recorded is None:
            return
        c.count += 1
        if recorded != audited_design_fingerprint(self.protocol):
            c.fail("manifest.json: design_fingerprint is not that of protocol.json's design fields")

    def bodies_and_plan(self, bodies: list[Any]) -> None:
        p, c = self.protocol, self.c["body_keys"]
        for seq, body in enumerate(bodies, start=1):
            c.count += 1
            problem = body_problem(body, p)
            if problem is not None:
                c.fail(f"seq {seq}: {problem}")
        c = self.c["plan_hashes"]
        if len(self.plan) != len(bodies):
            c.fail(f"plan.csv has {len(self.plan)} rows for {len(bodies)} requests")
        for i, (row, _body) in enumerate(zip(self.plan, bodies, strict=False), start=1):
            c.count += 1
            if row.get("seq") != str(i):
                c.fail(f"plan.csv row {i}: seq {row.get('seq')}")
            if row.get("request_sha256") != sha256_hex(self.body_bytes[i - 1]):
                c.fail(f"plan.csv seq {i}: request_sha256 does not match the body")

    def design(self) -> None:
        p, c = self.protocol, self.c["plan_design"]
        cells = Counter(
            (r["case"], r["length"], r["similarity"], r["condition"]) for r in self.plan
        )
        expected = {
            (f"S{i + 1}", str(n), s, cond)
            for i in range(p["cases"])
            for n in p["lengths"]
            for s in p["similarities"]
            for cond in p["conditions"]
        }
        c.count += len(expected)
        for cell in sorted(expected - set(cells)):
            c.fail(f"missing cell {'/'.join(cell)}")
        for cell, n in sorted(cells.items()):
            if cell not in expected or n != 1:
                c.fail(f"cell {'/'.join(cell)} appears {n} times or is not in the design")
        blocks = self.blocks()
        for number, rows in enumerate(blocks, start=1):
            first = rows[0]
            same = {(r["block"], r["case"], r["length"], r["similarity"], r["order"]) for r in rows}
            if len(same) != 1 or first["block"] != str(number):
                c.fail(f"block {number}: rows disagree on block, case, length or similarity")
            if [r["condition"] for r in rows] != first["order"].split("-"):
                c.fail(f"block {number}: conditions do not follow order {first['order']}")
        for i in range(0, len(blocks) - 1, 2):
            a, b = blocks[i][0], blocks[i + 1][0]
            ok = (a["case"], a["length"], a["pair"]) == (b["case"], b["length"], b["pair"])
            if not ok or {a["similarity"], b["similarity"]} != {"low", "high"}:
                c.fail(f"blocks {i + 1}-{i + 2} do not form a low/high pair")
        c = self.c["order_balance"]
        strata = Counter((r[0]["length"], r[0]["similarity"], r[0]["order"]) for r in blocks)
        want = p["cases"] // len(p["orders"])
        for n in p["lengths"]:
            for s in p["similarities"]:
                for order in p["orders"]:
                    c.count += 1
                    if strata[(str(n), s, order)] != want:
                        c.fail(
                            f"stratum {n}/{s}: order {order} appears "
                            f"{strata[(str(n), s, order)]} times, not {want}"
                        )
        self.shuffle_check(blocks)

    def blocks(self) -> list[list[dict[str, str]]]:
        width = len(self.protocol["conditions"])
        return [self.plan[i : i + width] for i in range(0, len(self.plan), width)]

    def shuffle_check(self, blocks: list[list[dict[str, str]]]) -> None:
        # Re-implemented from PROTOCOL.md, not imported from the order module.
        p, c = self.protocol, self.c["case_shuffle"]
        cases = list(range(p["cases"]))
        shuffle(cases, JavaRandom(p["seeds"]["order"]))
        orders, sims = p["orders"], p["similarities"]
        expected = []
        for i, case in enumerate(cases):
            for li, n in enumerate(p["lengths"]):
                for s in sims if i % 2 == 0 else list(reversed(sims)):
                    order = orders[(i + li + sims.index(s) * (len(orders) // 2)) % len(orders)]
                    expected.append((f"S{case + 1}", str(n), s, order, str(len(expected) // 2 + 1)))
        got = [
            (b[0]["case"], b[0]["length"], b[0]["similarity"], b[0]["order"], b[0]["pair"])
            for b in blocks
        ]
        c.count = len(expected)
        for number, (e, g) in enumerate(zip(expected, got, strict=False), start=1):
            if e != g:
                c.fail(f"block {number}: plan has {'/'.join(g)}, seed gives {'/'.join(e)}")
        if len(expected) != len(got):
            c.fail(f"plan has {len(got)} blocks, seed gives {len(expected)}")


def audit_prepared(path: str | Path) -> AuditReport:
    """Run every check on a prepared folder and return the report (never raises on findings)."""
    root = Path(path)
    if not root.is_dir():
        raise NeedlepointError(f"{root}: no such prepared folder")
    audit = _Audit(root)
    bodies = audit.files()
    audit.bodies_and_plan(bodies)
    audit.design()
    check_content(audit, bodies)
    return AuditReport(list(audit.c.values()))
