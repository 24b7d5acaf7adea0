"""The independent audit of a prepared folder, judged from its files alone.

It deliberately imports nothing from the generator (protocol, profiles, generate, prepared): it
re-derives every rule from ``protocol.json`` and PROTOCOL.md (the body profiles, the design
fingerprint, the order, the records and their positions), so a bug in the generator cannot hide
itself by also being in the checker. Shared are only the Java-compatible generator (itself
checked against real Java output), the canonical-JSON helper and the documented file shapes
(``design.schema``), which are checked before any rule runs.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from needlepoint.design import schema
from needlepoint.design.audit.positions import around, drawn_slots, insertion, williams
from needlepoint.design.schema import (
    DATA_FILES,
    DESIGN_FIELDS,
    check_answer,
    check_file_sizes,
    check_manifest,
    check_plan,
    check_request,
    read_jsonl,
    read_text,
)
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, file_sha256, read_json, sha256_hex
from needlepoint.rand import JavaRandom, shuffle

KNOWN_FORMATS = (1,)
KNOWN_PROTOCOLS = ("context-position-similar",)
CODE_RE = re.compile(r"[A-Z]{2}-[0-9]{4}")
NEAR_KINDS = ("substitution", "swap", "qualifier")
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


# A design with depth or placement options (PROTOCOL.md, "Depth designs") is judged by the same
# checks, worded for it, plus two more; v1 and v2 keep exactly the checks above.
_OPTION_CHECKS = {
    "order_balance": "each condition order appears equally often in every stratum",
    "williams_orders": "the orders are the Williams square over the conditions (PROTOCOL.md)",
    "position_balance": "each condition equally often in each serial position of every stratum",
    "target_once": "target code once in each answer-present condition at its depth; never in A",
    "shared_background": "the conditions of a block share one background (near names aside)",
    "equal_length": "all requests of a pair have equal character length",
}
_NEAR_RULES = {
    "fixed": "high: two of each near kind at floor((2k+1)N/12), kinds as claimed",
    "per-case": "high: two of each near kind at the slots drawn from seeds.placement",
    "around-target": "high: near name k at offset k from the target where room allows, "
    "the others recorded as unplaced",
}
_PAIR_RULE = "low and high differ in exactly the placed slot names, codes unchanged"


def _checks(protocol: Any) -> dict[str, Check]:
    options = isinstance(protocol, dict) and any(k in protocol for k in schema.DESIGN_OPTIONS)
    if not options:
        return {name: Check(name, text) for name, text in _CHECKS.items()}
    texts = _CHECKS | _OPTION_CHECKS
    texts["near_slots"] = _NEAR_RULES.get(str(protocol.get("near_placement", "fixed")), "")
    texts["pair_difference"] = _PAIR_RULE
    order = [*_CHECKS]
    order[order.index("order_balance") + 1 : order.index("order_balance") + 1] = [
        "williams_orders",
        "position_balance",
    ]
    return {name: Check(name, texts[name]) for name in order}


class _Audit:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.protocol = read_json(root / "protocol.json")
        self.c = _checks(self.protocol)
        p = self.protocol
        if not isinstance(p, dict) or p.get("format") not in KNOWN_FORMATS:
            fmt = p.get("format") if isinstance(p, dict) else None
            raise NeedlepointError(f"{root / 'protocol.json'}: unsupported protocol format {fmt!r}")
        if p.get("protocol_id") not in KNOWN_PROTOCOLS:
            raise NeedlepointError(
                f"{root / 'protocol.json'}: unknown protocol_id {p.get('protocol_id')!r}"
            )
        # Every file is checked against its documented schema first (design.schema shares
        # no code with the generator): the rules below then meet only well-typed values.
        schema.check(p, str(root / "protocol.json"))
        check_file_sizes(root, p)
        self.options = any(k in p for k in schema.DESIGN_OPTIONS)
        self.placement = str(p.get("near_placement", "fixed"))
        self.drawn = drawn_slots(p) if self.placement == "per-case" else {}
        text = read_text(root / "requests.jsonl")
        self.raw_lines = text.encode("utf-8").split(b"\n")
        for number, line in read_jsonl(root / "requests.jsonl", text):
            check_request(line, f"{root / 'requests.jsonl'}:{number}")
        self.plan = check_plan(root / "plan.csv")
        self.keys = [
            check_answer(line, f"{root / 'answer_key.jsonl'}:{number}")
            for number, line in read_jsonl(root / "answer_key.jsonl")
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
        for name in DATA_FILES:
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
        if self.options:
            self.williams_and_positions(blocks)
        self.shuffle_check(blocks)

    def williams_and_positions(self, blocks: list[list[dict[str, str]]]) -> None:
        p = self.protocol
        c = self.c["williams_orders"]
        c.count += 1
        if p["orders"] != williams(p["conditions"]):
            c.fail(f"orders {p['orders']} are not the Williams square over {p['conditions']}")
        c = self.c["position_balance"]
        seen = Counter(
            (r["length"], r["similarity"], position, r["condition"])
            for rows in blocks
            for position, r in enumerate(rows)
        )
        width = len(p["conditions"])
        want = p["cases"] / width
        for n in p["lengths"]:
            for s in p["similarities"]:
                for position in range(width):
                    for cond in p["conditions"]:
                        c.count += 1
                        got = seen[(str(n), s, position, cond)]
                        if got != want:
                            c.fail(
                                f"stratum {n}/{s}: {cond} is at serial position {position + 1} "
                                f"{got} times, not {want:g}"
                            )

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


# --- body profiles and the design fingerprint, from PROTOCOL.md --------------------------------

# PROTOCOL.md, "Body profiles": the members each profile's body has besides its text, which are
# copied from protocol.json; a member in brackets is there exactly when protocol.json holds it.
_MEMBERS = {
    "chat": (("model", "temperature", "max_tokens"), ("stop",)),
    "reasoning": (("model", "max_completion_tokens"), ("reasoning_effort", "stop")),
    "completion": (("model", "temperature", "max_tokens", "stop"), ()),
}


def audited_design_fingerprint(protocol: dict[str, Any]) -> str | None:
    """SHA-256 of the canonical JSON of protocol.json's design fields; None when one is missing.

    Computed here, not by design.protocol: PROTOCOL.md, "Design fingerprint", is the rule."""
    if not all(key in protocol for key in DESIGN_FIELDS):
        return None
    keys = schema.design_fields(protocol)
    return sha256_hex(canonical_bytes({key: protocol[key] for key in keys}))


def profile_of(protocol: dict[str, Any]) -> str:
    """protocol.json's body profile (``chat`` when it names none); unknown names stay as read."""
    return str(protocol.get("body_profile", "chat"))


def expected_keys(protocol: dict[str, Any]) -> list[str] | None:
    """The sorted member names every body must have; None for an unknown profile."""
    profile = profile_of(protocol)
    if profile not in _MEMBERS:
        return None
    always, optional = _MEMBERS[profile]
    text = "prompt" if profile == "completion" else "messages"
    return sorted([*always, *(k for k in optional if k in protocol), text])


def body_problem(body: Any, protocol: dict[str, Any]) -> str | None:
    """Why a body does not have its profile's shape and protocol values; None when it does."""
    keys = expected_keys(protocol)
    if keys is None:
        return f"unknown body profile {profile_of(protocol)!r}"
    if not isinstance(body, dict) or sorted(body) != keys:
        return f"body keys {sorted(body) if isinstance(body, dict) else body}, expected {keys}"
    for key in keys:
        if key in ("messages", "prompt"):
            continue
        # Compared as canonical bytes: 0, 0.0 and false are different bodies.
        if key not in protocol or canonical_bytes(body[key]) != canonical_bytes(protocol[key]):
            return f"{key} {body[key]!r} is not the protocol's {protocol.get(key)!r}"
    if "messages" in body:
        msgs = body["messages"]
        roles = (
            [m.get("role") if isinstance(m, dict) else None for m in msgs]
            if isinstance(msgs, list)
            else None
        )
        if roles != ["system", "user"] or any(
            sorted(m) != ["content", "role"] or not isinstance(m["content"], str) for m in msgs
        ):
            return "messages must be exactly system then user, each with a string content"
    elif split_prompt(body["prompt"], protocol) is None:
        return "prompt is not system text, a blank line, user text and the answer cue"
    return None


def split_prompt(prompt: Any, protocol: dict[str, Any]) -> tuple[str, str] | None:
    """(system, user) of a completion prompt: system + "\\n\\n" + user + answer_cue."""
    system = protocol.get("templates", {}).get("system")
    cue = protocol.get("answer_cue")
    if not isinstance(prompt, str) or not isinstance(system, str) or not isinstance(cue, str):
        return None
    head = system + "\n\n"
    if not prompt.startswith(head) or not prompt.endswith(cue) or len(prompt) < len(head + cue):
        return None
    return system, prompt[len(head) : len(prompt) - len(cue)]


def texts(body: Any, protocol: dict[str, Any]) -> tuple[str, str] | None:
    """(system text, user text) of a body of either shape; None when it has neither."""
    if not isinstance(body, dict):
        return None
    if "prompt" in body:
        return split_prompt(body["prompt"], protocol)
    try:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    except (KeyError, IndexError, TypeError):
        return None
    return (system, user) if isinstance(system, str) and isinstance(user, str) else None


# --- content: records, positions, near names, lengths, the answer key ------------------------


def classify_near(name: str, target: str) -> str | None:
    """Which near kind ``name`` is relative to ``target``, from the definitions alone."""
    if len(name) != len(target) or name[6:] != target[6:]:
        return None
    tw, nw = (target[0:2], target[2:4], target[4:6]), (name[0:2], name[2:4], name[4:6])
    if sum(a != b for a, b in zip(name[:6], target[:6], strict=True)) == 1:
        return "substitution"
    if nw[:2] == tw[:2] and nw[2][0] != tw[2][0] and nw[2][1] != tw[2][1]:
        return "qualifier"
    moved = [i for i in range(3) if nw[i] != tw[i]]
    if len(moved) == 2 and nw[moved[0]] == tw[moved[1]] and nw[moved[1]] == tw[moved[0]]:
        return "swap"
    return None


def shares_word(name: str, target: str, suffix: str) -> bool:
    """True when two names share any 2-character substring other than the common suffix."""
    grams = {target[i : i + 2] for i in range(len(target) - 1)} - {suffix}
    return any(name[i : i + 2] in grams for i in range(len(name) - 1))


class _Request:
    """One request split into its parts, with the target read from its question."""

    def __init__(self, audit: Any, seq: int, body: Any, row: dict[str, str]) -> None:
        self.seq, self.row, self.ok = seq, row, False
        self.length = int(row["length"])
        self.condition = row["condition"]
        # Where the target record sits, by condition (PROTOCOL.md); a plan row naming another
        # condition is a finding of the design checks, and this request has no content to read.
        n = self.length
        self.inserted = insertion(audit.protocol, self.condition, n)
        if self.inserted < 0:
            known = ", ".join(audit.protocol["conditions"]) if audit.options else "B, M, A or E"
            audit.c["shared_background"].fail(
                f"seq {seq}: plan condition {self.condition[:20]!r} is not {known}"
            )
            return
        if audit.placement == "around-target":
            self.slots = around(audit.protocol["near_offsets"], self.inserted, n)
        elif audit.placement == "per-case":
            self.slots = list(audit.drawn.get((row["case"], n), []))
        else:
            self.slots = [(2 * k + 1) * n // 12 for k in range(6)]
        parts = texts(body, audit.protocol)
        if parts is None:
            return
        self.system, user = parts
        self.body_text = audit.body_bytes[seq - 1].decode()
        head = audit.user_head
        cut = user.rfind(audit.question_head)
        match = audit.question_re.fullmatch(user[cut:]) if cut >= len(head) else None
        if not user.startswith(head) or match is None:
            audit.c["question"].fail(f"seq {seq}: the question does not follow the records")
            return
        self.target = match.group(1)
        self.user_len = len(user)
        self.lines = user[len(head) : cut].split("\n")
        self.background = self.lines[: self.inserted] + self.lines[self.inserted + 1 :]
        self.ok = len(self.lines) == n + 1
        if not self.ok:
            audit.c["shared_background"].fail(
                f"seq {seq}: {len(self.lines)} records, plan says {n} + 1"
            )


def _parse(audit: Any, seq: int, line: str) -> tuple[str, str]:
    m = audit.record_re.fullmatch(line)
    if m is None:
        audit.c["record_format"].fail(f"seq {seq}: line {line!r} does not fit the template")
        return "", ""
    name, code = m.group(1), m.group(2)
    if len(name) != 8 or not CODE_RE.fullmatch(code):
        audit.c["record_format"].fail(f"seq {seq}: bad name or code in {line!r}")
    return name, code


def check_content(audit: Any, bodies: list[Any]) -> None:
    """Run the content checks block by block, parsing each shared background only once."""
    width = len(audit.protocol["conditions"])
    reqs = [
        _Request(audit, i + 1, b, r)
        for i, (b, r) in enumerate(zip(bodies, audit.plan, strict=False))
    ]
    blocks = [reqs[i : i + width] for i in range(0, len(reqs), width)]
    parsed = [_block(audit, block) for block in blocks]
    for i in range(0, len(blocks) - 1, 2):
        _pair(audit, blocks[i] + blocks[i + 1], parsed[i], parsed[i + 1])


def _block(audit: Any, block: list[_Request]) -> tuple[list[str], list[str]] | None:
    if not all(r.ok for r in block):
        return None
    p, c = audit.protocol, audit.c
    first = block[0]
    target, n, suffix = first.target, first.length, p["names"]["suffix"]
    c["shared_background"].count += len(block)
    if (
        len({audit.keys[r.seq - 1].get("target_code") for r in block if r.seq <= len(audit.keys)})
        != 1
    ):
        c["answer_key"].fail(f"answer_key seqs {first.seq}-{block[-1].seq}: target_code differs")
    high = first.row["similarity"] == "high"
    if high and audit.placement == "around-target":
        return _block_around(audit, block)
    for r in block[1:]:
        if r.background != first.background or r.target != target:
            c["shared_background"].fail(f"seq {r.seq}: background differs from seq {first.seq}")
            return None
    c["record_format"].count += n * len(block)
    names, codes = _rows(audit, first)
    # Under around-target (a low block here) the slots follow each request's target.
    slots = [s for s in first.slots if s is not None]
    kinds = [classify_near(names[s], target) for s in slots]
    c["near_slots"].count += 6
    if high and (Counter(kinds) != Counter({k: 2 for k in NEAR_KINDS})):
        c["near_slots"].fail(f"seq {first.seq}: slot names are {kinds}, not two of each kind")
    for s, kind in zip(slots, kinds, strict=True):
        if not high and kind is not None:
            c["near_slots"].fail(f"seq {first.seq}: low slot {s} holds a near name ({kind})")
    # A name sharing no 2-character word with the target cannot be a near name of any kind
    # (each kind keeps at least one word), so one search over the block settles the rule.
    others = [name for i, name in enumerate(names) if not (high and i in slots)]
    c["unrelated_names"].count += len(others)
    grams = sorted({target[i : i + 2] for i in range(len(target) - 1)} - {suffix})
    if re.search("|".join(map(re.escape, grams)), "\n".join(others)):
        for i, name in enumerate(names):
            if not (high and i in slots) and shares_word(name, target, suffix):
                c["unrelated_names"].fail(f"seq {first.seq}: {name} at index {i} shares a word")
    for r in block:
        own = r.slots if audit.placement == "around-target" else slots
        _request(audit, r, names, codes, own, kinds if high else ["unrelated"] * 6)
    _placeholder(audit, block, names, codes, target)
    return first.background, names


def _rows(audit: Any, r: _Request) -> tuple[list[str], list[str]]:
    """The names and codes of a request's background records."""
    rows = audit.records_re.findall("\n".join(r.background))
    if len(rows) != len(r.background):  # slow path only to name the offending line
        rows = [_parse(audit, r.seq, line) for line in r.background]
    return [x[0] for x in rows], [x[1] for x in rows]


def _placeholder(
    audit: Any, block: list[_Request], names: list[str], codes: list[str], target: str
) -> None:
    """A's placeholder: as long as the target record, unrelated to the target, a new code."""
    c, suffix = audit.c, audit.protocol["names"]["suffix"]
    target_record = audit.protocol["templates"]["record"]
    for r in block:
        if r.condition != "A":
            target_record = r.lines[r.inserted]
            break
    for r in block:
        if r.condition == "A":
            c["placeholder"].count += 1
            pname, pcode = _parse(audit, r.seq, r.lines[r.inserted])
            if len(r.lines[r.inserted]) != len(target_record):
                c["placeholder"].fail(f"seq {r.seq}: placeholder length differs from the target's")
            if pname == target or shares_word(pname, target, suffix) or pcode in codes:
                c["placeholder"].fail(f"seq {r.seq}: placeholder is not unrelated and new")


def _block_around(audit: Any, block: list[_Request]) -> tuple[list[str], list[str]] | None:
    """A high block under around-target: each request's near names follow its own target, so
    the backgrounds agree everywhere except at the two requests' slots, where only the names
    differ; every request is then checked with its own slots."""
    c, first = audit.c, block[0]
    target, suffix = first.target, audit.protocol["names"]["suffix"]
    parsed = {}
    for r in block:
        c["record_format"].count += r.length
        parsed[r.seq] = _rows(audit, r)
    names0, codes0 = parsed[first.seq]
    for r in block:
        names, codes = parsed[r.seq]
        allowed = {s for s in (*r.slots, *first.slots) if s is not None}
        differ = {i for i, (a, b) in enumerate(zip(names, names0, strict=False)) if a != b}
        if r.target != target or codes != codes0 or not differ <= allowed:
            c["shared_background"].fail(f"seq {r.seq}: background differs from seq {first.seq}")
            return None
    grams = sorted({target[i : i + 2] for i in range(len(target) - 1)} - {suffix})
    search = re.compile("|".join(map(re.escape, grams))).search
    for r in block:
        names, codes = parsed[r.seq]
        placed = [s for s in r.slots if s is not None]
        kinds = [classify_near(names[s], target) for s in placed]
        c["near_slots"].count += 6
        counts = Counter(kinds)
        if None in counts or any(counts[k] > 2 for k in NEAR_KINDS):
            c["near_slots"].fail(f"seq {r.seq}: placed slot names are {kinds}")
        others = [name for i, name in enumerate(names) if i not in placed]
        c["unrelated_names"].count += len(others)
        if search("\n".join(others)):
            c["unrelated_names"].fail(f"seq {r.seq}: a background name shares a word")
        _request(audit, r, names, codes, r.slots, kinds)
    _placeholder(audit, block, names0, codes0, target)
    return first.background, names0


def _request(
    audit: Any,
    r: _Request,
    names: list[str],
    codes: list[str],
    all_slots: list[int | None],
    kinds: list[str | None],
) -> None:
    p, c = audit.protocol, audit.c
    key = audit.keys[r.seq - 1] if r.seq <= len(audit.keys) else {}
    ins_name, ins_code = _parse(audit, r.seq, r.lines[r.inserted])
    all_codes, all_names = [*codes, ins_code], [*names, ins_name]
    c["question"].count += 1
    c["system_message"].count += 1
    if r.system != p["templates"]["system"] or CODE_RE.search(r.system) or r.target in r.system:
        c["system_message"].fail(f"seq {r.seq}: system message differs or leaks")
    c["target_once"].count += 1
    target_code = key.get("target_code", "")
    if r.condition == "A":
        if r.body_text.count(target_code) or r.target in all_names:
            c["target_once"].fail(f"seq {r.seq}: the target appears in an absent request")
    elif ins_name != r.target or r.body_text.count(ins_code) != 1 or ins_code != target_code:
        c["target_once"].fail(f"seq {r.seq}: target record not exactly once at {r.inserted}")
    elif names.count(r.target):
        c["target_once"].fail(f"seq {r.seq}: target name repeated in the background")
    c["unique_codes"].count += 1
    if len(set(all_codes)) != len(all_codes) or len(set(all_names)) != len(all_names):
        c["unique_codes"].fail(f"seq {r.seq}: a code or name repeats within the request")
    c["answer_key"].count += 1
    slots = [s for s in all_slots if s is not None]
    expected = {
        "seq": r.seq,
        "expected": p["unknown"] if r.condition == "A" else ins_code,
        "target_name": r.target,
        "codes_present": sorted(all_codes),
        "near_codes": [codes[s] for s in slots],
        "near_names": [names[s] for s in slots],
        "near_kinds": kinds[: len(slots)],
        "similarity": r.row["similarity"],
        "condition": r.condition,
    }
    if audit.options:
        offsets = audit.protocol.get("near_offsets", [None] * len(all_slots))
        pairs = zip(offsets, all_slots, strict=False)
        expected["near_before"] = sum(1 for s in slots if s < r.inserted)
        expected["near_unplaced"] = [o for o, s in pairs if s is None]
    for field_name, value in expected.items():
        if key.get(field_name) != value:
            c["answer_key"].fail(f"answer_key seq {r.seq}: {field_name} disagrees with request")
            break


def _pair(audit: Any, reqs: list[_Request], low: Any, high: Any) -> None:
    c = audit.c
    if low is None or high is None:
        return
    c["equal_length"].count += len(reqs)
    lengths = {(r.user_len, len(r.body_text)) for r in reqs}
    if len(lengths) != 1:
        c["equal_length"].fail(f"seqs {reqs[0].seq}-{reqs[-1].seq}: lengths differ {lengths}")
    c["pair_difference"].count += 1
    if audit.placement == "around-target":
        _pair_around(audit, reqs)
        return
    (bg_a, names_a), (bg_b, names_b) = low, high
    slots = set(reqs[0].slots)
    differ = {i for i, (x, y) in enumerate(zip(bg_a, bg_b, strict=False)) if x != y}
    same_codes = all(
        x.replace(na, "") == y.replace(nb, "")
        for x, y, na, nb in zip(bg_a, bg_b, names_a, names_b, strict=False)
    )
    if differ != slots or len(bg_a) != len(bg_b) or not same_codes:
        c["pair_difference"].fail(
            f"seqs {reqs[0].seq}-{reqs[-1].seq}: low/high differ at {sorted(differ)}, "
            f"expected exactly the slots {sorted(slots)} with unchanged codes"
        )


def _pair_around(audit: Any, reqs: list[_Request]) -> None:
    """Under around-target each condition's low and high requests differ exactly at its placed
    slots, with unchanged codes."""
    by_condition: dict[str, list[_Request]] = {}
    for r in reqs:
        by_condition.setdefault(r.condition, []).append(r)
    for cond, pair in sorted(by_condition.items()):
        if len(pair) != 2:
            audit.c["pair_difference"].fail(f"seq {reqs[0].seq}: condition {cond} not in both arms")
            continue
        a, b = pair
        names_a, codes_a = _rows(audit, a)
        names_b, codes_b = _rows(audit, b)
        differ = {i for i, (x, y) in enumerate(zip(names_a, names_b, strict=False)) if x != y}
        if differ != {s for s in a.slots if s is not None} or codes_a != codes_b:
            audit.c["pair_difference"].fail(
                f"seqs {a.seq}/{b.seq}: low/high differ at {sorted(differ)}, expected the "
                f"placed slots {sorted(s for s in a.slots if s is not None)} with unchanged codes"
            )
