"""The audit's content rules: records, positions, near names, lengths and the answer key.

Part of the independent audit (see audit.py): it reads only what the folder's files say and
the definitions in PROTOCOL.md, never the generator.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from needlepoint.design.audit_bodies import texts

CODE_RE = re.compile(r"[A-Z]{2}-[0-9]{4}")
NEAR_KINDS = ("substitution", "swap", "qualifier")


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
        self.inserted = {"B": 0, "M": n // 2, "E": n, "A": n // 2}.get(self.condition, -1)
        if self.inserted < 0:
            audit.c["shared_background"].fail(
                f"seq {seq}: plan condition {self.condition[:20]!r} is not B, M, A or E"
            )
            return
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
    for r in block[1:]:
        if r.background != first.background or r.target != target:
            c["shared_background"].fail(f"seq {r.seq}: background differs from seq {first.seq}")
            return None
    c["record_format"].count += n * len(block)
    rows = audit.records_re.findall("\n".join(first.background))
    if len(rows) != len(first.background):  # slow path only to name the offending line
        rows = [_parse(audit, first.seq, line) for line in first.background]
    names, codes = [x[0] for x in rows], [x[1] for x in rows]
    slots = [(2 * k + 1) * n // 12 for k in range(6)]
    high = first.row["similarity"] == "high"
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
    target_record = p["templates"]["record"]
    for r in block:
        _request(audit, r, names, codes, slots, kinds if high else ["unrelated"] * 6)
        if r.condition == "B":
            target_record = r.lines[0]
    for r in block:
        if r.condition == "A":
            c["placeholder"].count += 1
            pname, pcode = _parse(audit, r.seq, r.lines[r.inserted])
            if len(r.lines[r.inserted]) != len(target_record):
                c["placeholder"].fail(f"seq {r.seq}: placeholder length differs from the target's")
            if pname == target or shares_word(pname, target, suffix) or pcode in codes:
                c["placeholder"].fail(f"seq {r.seq}: placeholder is not unrelated and new")
    return first.background, names


def _request(
    audit: Any,
    r: _Request,
    names: list[str],
    codes: list[str],
    slots: list[int],
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
    expected = {
        "seq": r.seq,
        "expected": p["unknown"] if r.condition == "A" else ins_code,
        "target_name": r.target,
        "codes_present": sorted(all_codes),
        "near_codes": [codes[s] for s in slots],
        "near_names": [names[s] for s in slots],
        "near_kinds": kinds,
        "similarity": r.row["similarity"],
        "condition": r.condition,
    }
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
    (bg_a, names_a), (bg_b, names_b) = low, high
    n = reqs[0].length
    slots = {(2 * k + 1) * n // 12 for k in range(6)}
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
