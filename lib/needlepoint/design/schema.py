"""The documented shape of every file of a design: ``protocol.json``'s fields, groups and size
limits, and the prepared folder's data files; each is checked before anything uses it.

The generator (``protocol.validate``, ``load_prepared``) and the independent audit both run
these checks first, so neither ever meets a mistyped field, a design too large to build or a
truncated, re-encoded or hand-edited data file: each is one line,
``FILE[:LINE]: field NAME: problem`` (exit 2), never a traceback. Whether the *content* is the
protocol's is for verify and audit to judge. This module imports nothing from the generator,
so the audit stays independent of it. The limits are documented in PROTOCOL.md.
"""

from __future__ import annotations

import csv
import io
import itertools
import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import decode_utf8, jsonl_values
from needlepoint.safeio import read_limited
from needlepoint.safetext import SURROGATE
from needlepoint.schema import Fields, is_int, is_number

# Size limits, checked before anything is generated (PROTOCOL.md, "Limits").
MAX_CASES = 10_000
MAX_LENGTH = 100_000  # background records per request
MAX_LENGTHS = 16
MAX_REQUESTS = 100_000
# Estimated requests.jsonl + answer_key.jsonl. verify, audit and run hold a prepared folder
# whole and peak at about 7.5 times its size (53 MB prepared: audit 389 MB, run 390 MB); at
# 512 MiB a design that passed prepare needed 2.95 GB to audit and died running. At 128 MiB
# every command on a prepared folder stays within MEMORY_PROMISE.
MAX_PREPARED_BYTES = 128 * 1024**2
MEMORY_PROMISE = 1024**3  # the most a command reading a prepared folder may peak at
MAX_NAME_SPACE = 2_000_000  # places × sites × qualifiers: every name is indexed in memory
MAX_POOL = 1_000
MAX_TEMPLATE_CHARS = 10_000
MAX_ORDERS = 24
MAX_TOKENS = 2**31 - 1
# Analysis: the exact bootstrap enumerates every multiset of cases (analysis.bootstrap), and
# the Monte Carlo one holds resamples × cases indices and values (12 bytes each).
MAX_EXACT_BOOTSTRAP = 13
MAX_RESAMPLES = 1_000_000
MAX_BOOTSTRAP_BYTES = 2 * 1024**3
# Power and the pilot's calibration: simulated studies per design (analysis.power, pilot.record),
# here so that `--help` can name the bound without loading numpy.
MAX_SIMULATIONS = 1_000_000
CODE_PATTERN = r"[A-Z]{2}-[0-9]{4}"
SIMILARITIES = ("low", "high")
CONDITIONS = ("B", "M", "E", "A")
# The depth and near-name options a newer version may declare (PROTOCOL.md, "Depth designs").
# They are design fields when present; v1 and v2 have none, so their fingerprints are unchanged.
DESIGN_OPTIONS = ("depths", "near_placement", "near_offsets")
PLACEMENTS = ("fixed", "per-case", "around-target")
# The preregistered contrasts of a depth design over its depths (analysis.depth).
CONTRASTS = ("ends-minus-interior", "ends-minus-centre", "first-minus-last")
MAX_DEPTHS = 11  # with A at most 12 conditions: a Williams square of at most 22 rows
NEAR_OFFSETS = 6
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


# Every top-level field that shapes a request body (besides `model`); none is part of the
# design. Which are present depends on the body profile, so they are typed here when present
# and required by the profile's rules (profiles.validate_body_fields).
BODY_FIELDS = (
    "body_profile",
    "temperature",
    "max_tokens",
    "max_completion_tokens",
    "reasoning_effort",
    "stop",
    "answer_cue",
)
# Free label fields a protocol may leave out: `rationale` (a JSON object) records why a version
# exists (a pilot's or a calibration's record; PROTOCOL.md, "Parameters"); `materials_reuse`
# records why a new version may reuse materials of a design already run (`prepare
# --reuse-materials`).
OPTIONAL_FIELDS = ("rationale", "materials_reuse")
# The documented top-level fields besides the body fields (PROTOCOL.md, "Parameters").
FIELDS = (
    "format",
    "protocol_id",
    "version",
    "description",
    "model",
    "cases",
    "lengths",
    "similarities",
    "conditions",
    "orders",
    "seeds",
    "unknown",
    "code_pattern",
    "names",
    "templates",
    "runner",
    "analysis",
)

# PROTOCOL.md, "Design fingerprint": every top-level field is exactly one of these. Two prepared
# folders with one design fingerprint (over the design fields, whole) hold the same records,
# codes, order and answer key, are scored and analysed by the same rules, and differ at most in
# the model they ask and how the bodies are shaped. The audit hashes the same fields.
DESIGN_FIELDS = (
    "analysis",
    "cases",
    "code_pattern",
    "conditions",
    "format",
    "lengths",
    "names",
    "orders",
    "protocol_id",
    "seeds",
    "similarities",
    "templates",
    "unknown",
)


# The design fields a protocol holds: DESIGN_FIELDS plus the options it declares.
def design_fields(protocol: dict[str, Any]) -> tuple[str, ...]:
    """The design fields of this protocol, sorted: the fixed ones and its declared options."""
    return tuple(sorted((*DESIGN_FIELDS, *(k for k in DESIGN_OPTIONS if k in protocol))))


LABEL_FIELDS = ("description", "version", *OPTIONAL_FIELDS)
EXECUTION_FIELDS = ("runner",)
VARIANT_FIELDS = ("model", *BODY_FIELDS)


def check(p: Any, where: str, known: Collection[str] | None = None) -> None:
    """Refuse a protocol whose fields are missing, unknown, mistyped, out of range or too big.

    ``known`` is every field the caller's protocol defines (the generator passes its reference,
    so fields it adds are allowed); without it, fields beyond the documented ones are left to
    the caller, as the audit does.
    """
    f = Fields(p, where)
    # Body fields depend on the body profile: profiles.validate_body_fields requires them.
    required = set(FIELDS if known is None else known) - set(BODY_FIELDS) - set(OPTIONAL_FIELDS)
    required -= set(DESIGN_OPTIONS)
    missing = sorted(required - set(p))
    if missing:
        raise f.fail(missing[0], "missing")
    if known is not None:
        f.only(sorted({*known, *DESIGN_OPTIONS}))
    _no_surrogates(p, f)
    f.integer("format")
    f.text("protocol_id")
    f.integer("version", low=1)
    f.text("description")
    f.text("model", nonempty=True)
    # body_profile, reasoning_effort, stop and answer_cue: profiles.validate_body_fields.
    f.number("temperature", low=0, optional=True)
    for budget in ("max_tokens", "max_completion_tokens"):
        f.integer(budget, high=MAX_TOKENS, optional=True)  # >= 1: the profile's rule
    f.integer("cases", low=1, high=MAX_CASES)
    lengths = f.array("lengths", is_int, "an integer", nonempty=True)
    if len(lengths) > MAX_LENGTHS:
        raise f.fail("lengths", f"at most {MAX_LENGTHS} lengths")
    for i, n in enumerate(lengths):
        if n < 12:
            raise f.fail(f"lengths[{i}]", f"{n}: a background needs at least 12 records")
        if n > MAX_LENGTH:
            raise f.fail(f"lengths[{i}]", f"{n} records exceed the limit of {MAX_LENGTH}")
    if len(set(lengths)) != len(lengths):
        raise f.fail("lengths", "must not repeat")
    if f.get("similarities", False) != list(SIMILARITIES):
        raise f.fail("similarities", f"fixed by the design at {list(SIMILARITIES)}")
    conditions = _depths(f)
    orders = f.array("orders", lambda v: isinstance(v, str), "a string", nonempty=True)
    if len(orders) > MAX_ORDERS:
        raise f.fail("orders", f"at most {MAX_ORDERS} orders")
    for i, order in enumerate(orders):
        if sorted(order.split("-")) != sorted(conditions):
            raise f.fail(
                f"orders[{i}]", f"{order[:40]!r} is not a permutation of {', '.join(conditions)}"
            )
    if p["cases"] % len(orders):
        raise f.fail("cases", f"must be a multiple of the {len(orders)} orders")
    seeds = _nested(f, "seeds")
    placement = _placement(f, lengths)
    names = ("materials", "order", *(("placement",) if placement == "per-case" else ()))
    seeds.only(names)
    for name in names:
        if name == "placement" and name not in seeds.obj:
            raise seeds.fail(name, "missing (per-case placement draws its slots from it)")
        seeds.integer(name, low=-(2**63) + 1, high=2**63 - 1)
    unknown = f.text("unknown", nonempty=True)
    if unknown.strip(_JAVA_TRIM) != unknown:
        raise f.fail("unknown", "must not start or end with characters that Java trim removes")
    if re.fullmatch(CODE_PATTERN, unknown):
        raise f.fail("unknown", "must not be a code")
    f.choice("code_pattern", (CODE_PATTERN,))
    _names(_nested(f, "names"))
    _templates(_nested(f, "templates"))
    _runner(_nested(f, "runner"))
    _analysis(_nested(f, "analysis"), p["cases"], "depths" in p)
    if "depths" in p and p["analysis"]["contrast"] != "first-minus-last" and len(p["depths"]) < 3:
        raise f.fail("analysis.contrast", f"{p['analysis']['contrast']} needs at least 3 depths")
    check_sizes(p, f)


def _depths(f: Fields) -> list[str]:
    """Type ``depths`` and check ``conditions`` against it; return the conditions.

    Without depths the conditions are v1's B, M, E, A. With them, one condition per depth in
    order (the generator checks the exact ``D<depth>`` labels) and A last.
    """
    if "depths" not in f.obj:
        if f.get("conditions", False) != list(CONDITIONS):
            raise f.fail("conditions", f"fixed by the design at {list(CONDITIONS)}")
        return list(CONDITIONS)
    depths = f.array("depths", is_number, "a number", nonempty=True)
    if not 2 <= len(depths) <= MAX_DEPTHS:
        raise f.fail("depths", f"needs 2 to {MAX_DEPTHS} depths, has {len(depths)}")
    for i, d in enumerate(depths):
        if not 0 <= d <= 1:
            raise f.fail(f"depths[{i}]", f"{d!r} is not a fraction from 0 to 1")
        if abs(d * 1000 - round(d * 1000)) > 1e-9:
            raise f.fail(f"depths[{i}]", f"{d!r} has more than three decimals")
    permille = [round(d * 1000) for d in depths]
    if any(b <= a for a, b in itertools.pairwise(permille)):
        raise f.fail("depths", "must increase strictly")
    conditions = f.array("conditions", lambda v: isinstance(v, str), "a string", nonempty=True)
    ok = (
        len(conditions) == len(depths) + 1
        and conditions[-1] == "A"
        and len(set(conditions)) == len(conditions)
        and all(c.startswith("D") and "-" not in c for c in conditions[:-1])
    )
    if not ok:
        raise f.fail("conditions", "must be one D<depth> label per depth, in order, then A")
    return conditions


def _placement(f: Fields, lengths: list[int]) -> str:
    """Type ``near_placement`` and ``near_offsets`` (only with around-target)."""
    placement = f.choice("near_placement", PLACEMENTS, optional=True) or "fixed"
    if placement != "around-target":
        if "near_offsets" in f.obj:
            raise f.fail("near_offsets", "only with near_placement around-target")
        return placement
    if "near_offsets" not in f.obj:
        raise f.fail("near_offsets", "missing (around-target places the near names there)")
    offsets = f.array("near_offsets", is_int, "an integer")
    if len(offsets) != NEAR_OFFSETS:
        raise f.fail("near_offsets", f"needs {NEAR_OFFSETS} offsets, has {len(offsets)}")
    if 0 in offsets or any(b <= a for a, b in itertools.pairwise(offsets)):
        raise f.fail("near_offsets", "must be non-zero and increase strictly")
    if max(abs(o) for o in offsets) > min(lengths):
        raise f.fail("near_offsets", f"an offset exceeds the shortest length {min(lengths)}")
    return placement


def _nested(f: Fields, name: str) -> Fields:
    nested = f.nested(name)
    assert nested is not None  # not optional: missing raised
    return nested


def _no_surrogates(value: Any, f: Fields, path: str = "") -> None:
    if isinstance(value, str):
        if SURROGATE.search(value):
            raise f.fail(path or "value", "holds a lone surrogate, which is not Unicode text")
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_surrogates(key, f, path or "key")
            _no_surrogates(item, f, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _no_surrogates(item, f, f"{path}[{i}]")


def _word(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) == 2
        and value.isprintable()
        and not any(c.isspace() or c in "{}" for c in value)
    )


def _names(n: Fields) -> None:
    n.only(("suffix", "places", "sites", "qualifiers"))
    if not _word(n.get("suffix", False)):
        raise n.fail("suffix", "must be two printable characters, no space or brace")
    sizes = []
    for pool in ("places", "sites", "qualifiers"):
        words = n.array(pool, _word, "two printable characters (no space or brace)")
        if not 3 <= len(words) <= MAX_POOL:
            raise n.fail(pool, f"needs 3 to {MAX_POOL} words, has {len(words)}")
        sizes.append(len(words))
    if sizes[0] * sizes[1] * sizes[2] > MAX_NAME_SPACE:
        raise n.fail("places", f"places × sites × qualifiers exceeds {MAX_NAME_SPACE} names")
    words = [w for pool in ("places", "sites", "qualifiers") for w in n.obj[pool]]
    if len(set(words)) != len(words):
        raise n.fail("places", "a word repeats, within a pool or across pools")
    quals = n.obj["qualifiers"]
    for q in quals:
        # The qualifier change of a near name needs two others that differ in both characters.
        other = [o for o in set(quals) if o[0] != q[0] and o[1] != q[1]]
        if len(other) < 2:
            raise n.fail(
                "qualifiers",
                f"{q!r} needs at least two other qualifiers that differ from it in both "
                "characters (the near-name qualifier change draws until it has two)",
            )


def _templates(t: Fields) -> None:
    t.only(("system", "record", "user"))
    for name in ("system", "record", "user"):
        text = t.text(name)
        if len(text) > MAX_TEMPLATE_CHARS:
            raise t.fail(name, f"longer than {MAX_TEMPLATE_CHARS} characters")
    record, user = t.obj["record"], t.obj["user"]
    if record.count("{name}") != 1 or record.count("{code}") != 1 or "\n" in record:
        raise t.fail("record", "needs one {name}, one {code} and no line feed")
    if record.index("{name}") > record.index("{code}"):
        raise t.fail("record", "{name} must come before {code}")
    if user.count("{records}") != 1 or user.count("{name}") != 1:
        raise t.fail("user", "needs one {records} and one {name}")
    if user.index("{name}") < user.index("{records}"):
        raise t.fail("user", "{name} must come after {records} (only the text after is filled)")
    if "{" in t.obj["system"] or re.search(CODE_PATTERN, t.obj["system"]):
        raise t.fail("system", "must be plain text: no { and no code")


def _runner(r: Fields) -> None:
    r.only(("min_gap_s", "stop_statuses", "max_consecutive_failures"))
    r.number("min_gap_s", low=0, high=86_400)
    statuses = r.array("stop_statuses", is_int, "an integer")
    if any(not 100 <= s <= 599 for s in statuses) or len(statuses) > 500:
        raise r.fail("stop_statuses", "HTTP statuses 100..599, each at most once")
    r.integer("max_consecutive_failures", low=1, high=1_000_000)


def _analysis(a: Fields, cases: int, depths: bool) -> None:
    names = (
        "threshold",
        "confidence",
        "min_complete_cases",
        "exact_bootstrap_max_cases",
        "bootstrap_resamples",
        "bootstrap_seed",
    )
    a.only((*names, "contrast") if depths else names)
    if depths:
        if "contrast" not in a.obj:
            raise a.fail("contrast", f"missing: a depth design declares one of {list(CONTRASTS)}")
        a.choice("contrast", CONTRASTS)
    a.number("threshold", low=-1, high=1)
    confidence = a.number("confidence")
    if not 0 < confidence < 1:
        raise a.fail("confidence", f"{confidence!r} must lie strictly between 0 and 1")
    a.integer("min_complete_cases", low=1, high=cases)
    a.integer("exact_bootstrap_max_cases", low=0, high=MAX_EXACT_BOOTSTRAP)
    resamples = a.integer("bootstrap_resamples", low=1, high=MAX_RESAMPLES)
    a.integer("bootstrap_seed", low=0, high=2**63 - 1)
    need = resamples * cases * 12
    if need > MAX_BOOTSTRAP_BYTES:
        raise a.fail(
            "bootstrap_resamples",
            f"{resamples} resamples of {cases} cases need about {need / 2**30:.1f} GiB "
            f"(limit {MAX_BOOTSTRAP_BYTES / 2**30:g} GiB)",
        )


def estimated_bytes(p: dict[str, Any]) -> int:
    """An upper estimate of requests.jsonl plus answer_key.jsonl, from the parameters alone."""
    names = p["names"]
    char = max(len(c.encode()) for w in (*names["places"], *names["sites"]) for c in w)
    name_bytes = 6 * char + len(names["suffix"].encode())
    t = p["templates"]
    record = len(t["record"].encode()) + name_bytes + 7 + 2  # plus the code and the "\n"
    per_block = len(p["conditions"]) * len(p["similarities"]) * p["cases"]
    total = 0
    for n in p["lengths"]:
        body = (n + 1) * record + len(t["user"].encode()) + len(t["system"].encode()) + 400
        key = (n + 1) * 10 + 400  # codes_present, near codes and names
        total += per_block * (body + key)
    return total


def check_sizes(p: dict[str, Any], f: Fields) -> None:
    """Refuse a design too large to generate, before generating anything."""
    requests = p["cases"] * len(p["lengths"]) * len(p["similarities"]) * len(p["conditions"])
    if requests > MAX_REQUESTS:
        raise f.fail("cases", f"the design has {requests} requests (limit {MAX_REQUESTS})")
    size = estimated_bytes(p)
    if size > MAX_PREPARED_BYTES:
        raise f.fail(
            "lengths",
            f"the prepared files would hold about {size / 2**20:.0f} MiB "
            f"(limit {MAX_PREPARED_BYTES // 2**20} MiB)",
        )


# --- the prepared folder's data files --------------------------------------------------------

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
_INT_COLUMNS = ("seq", "block", "pair", "length")
_DIGITS = re.compile(r"[0-9]{1,9}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def read_text(path: Path, limit: int = MAX_PREPARED_BYTES) -> str:
    """A data file as UTF-8 text; every failure is one line naming the file (and line).

    A FIFO is refused without blocking, and a file larger than ``limit`` without being read.
    """
    return decode_utf8(read_limited(path, limit), str(path), by_line=True)


def size_limits(protocol: dict[str, Any]) -> dict[str, int]:
    """The most bytes each data file of this protocol's prepared folder can hold: more, and it
    is not the file prepare wrote (so it is refused before it is read, whatever its size)."""
    requests = protocol["cases"] * len(protocol["lengths"]) * len(protocol["similarities"])
    requests *= len(protocol["conditions"])
    materials = estimated_bytes(protocol) + (1 << 20)  # an upper estimate, with room
    return {
        "requests.jsonl": materials,
        "answer_key.jsonl": materials,
        "plan.csv": 1024 + 512 * requests,  # nine short fields and a SHA-256 per request
    }


def check_file_sizes(root: Path, protocol: dict[str, Any]) -> None:
    """Refuse a data file larger than the protocol allows, before reading any of it."""
    for name, limit in size_limits(protocol).items():
        try:
            size = os.stat(root / name).st_size
        except OSError:
            continue  # missing or unreadable: the reader says so
        if size > limit:
            raise NeedlepointError(
                f"{root / name}: {size} bytes, more than this protocol's prepared file can hold "
                f"(at most {limit}); not read"
            )


def check_plan(path: Path, text: str | None = None) -> list[dict[str, str]]:
    """plan.csv's rows as dicts of strings: the documented header, nine fields per row,
    decimal integers where the columns are numbers, a hex SHA-256."""
    text = read_text(path) if text is None else text
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise NeedlepointError(f"{path}: malformed CSV ({exc})") from None
    if not rows or tuple(rows[0]) != PLAN_COLUMNS:
        raise NeedlepointError(f"{path}:1: header must be {','.join(PLAN_COLUMNS)}")
    out = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(PLAN_COLUMNS):
            raise NeedlepointError(
                f"{path}:{number}: {len(row)} fields, the header has {len(PLAN_COLUMNS)}"
            )
        values = dict(zip(PLAN_COLUMNS, row, strict=True))
        for name in _INT_COLUMNS:
            if not _DIGITS.fullmatch(values[name]):
                raise NeedlepointError(
                    f"{path}:{number}: field {name}: expected a decimal integer, found "
                    f"{values[name][:20]!r}"
                )
        if not _HEX64.fullmatch(values["request_sha256"]):
            raise NeedlepointError(
                f"{path}:{number}: field request_sha256: expected a lower-case hex SHA-256"
            )
        out.append(values)
    return out


def check_request(value: Any, where: str) -> dict[str, Any]:
    """One requests.jsonl line: ``{"body": {...}, "seq": N}``, the body's fields typed.

    Which fields a body holds depends on its body profile (chat and reasoning send
    ``messages``, completion a ``prompt``); which belong is for verify and audit to judge.
    """
    f = Fields(value, where)
    _no_surrogates(value, f)
    f.integer("seq", low=1)
    body = f.nested("body")
    assert body is not None
    body.text("model")
    body.number("temperature", optional=True)
    for name in ("max_tokens", "max_completion_tokens"):
        body.integer(name, optional=True)
    body.text("reasoning_effort", optional=True)
    body.array("stop", lambda v: isinstance(v, str), "a string", optional=True)
    if "prompt" in body.obj or "messages" not in body.obj:
        body.text("prompt")
    if "messages" in body.obj:
        body.array("messages", lambda m: isinstance(m, dict), "an object")
        for i, message in enumerate(body.obj["messages"]):
            m = Fields(message, where, f"body.messages[{i}].")
            m.text("role")
            m.text("content")
    return value


def check_answer(value: Any, where: str) -> dict[str, Any]:
    """One answer_key.jsonl line with every documented field typed."""
    f = Fields(value, where)
    _no_surrogates(value, f)
    f.integer("seq", low=1)
    for name in ("expected", "target_code", "target_name", "similarity", "condition"):
        f.text(name)
    for name in ("codes_present", "near_codes", "near_names", "near_kinds"):
        f.array(name, lambda v: isinstance(v, str), "a string")
    return value


def check_manifest(value: Any, where: str) -> dict[str, Any]:
    """manifest.json: format, package_version, a SHA-256 per data file, source hashes."""
    f = Fields(value, where)
    f.integer("format")
    f.text("package_version")
    files = f.nested("files")
    assert files is not None
    for name in DATA_FILES:
        files.sha256(name)
    f.sha256("design_fingerprint", optional=True)  # absent from manifests older than it
    sources = f.nested("sources", optional=True)
    if sources is not None:
        for name, digest in sources.obj.items():
            if not isinstance(digest, str):
                raise sources.fail(name, "expected a string")
    return value


def read_jsonl(path: Path, text: str | None = None) -> list[tuple[int, Any]]:
    """``(line, value)`` for each line of a JSONL data file (``text``, if already read)."""
    return jsonl_values(read_text(path) if text is None else text, str(path))
