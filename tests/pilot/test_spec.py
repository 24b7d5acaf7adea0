"""docs/pilot.md, *The pilot's files, exactly*: a pilot's design.json, prepared/protocol.json,
pilot.json and prepared/manifest.json rebuilt from the documented rules alone.

Nothing here calls the code that writes those files (``needlepoint.pilot``'s folder, record and
held-out modules, or ``design.prepared``'s manifest). The rule texts, the description template and
the generating modules are read from the page itself, so a change on either side fails here. The
materials come from ``generate_cases`` (PROTOCOL.md's generator, pinned by its own tests) and the
design is merged by ``load_override`` (PROTOCOL.md's override rules).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.pilots import simulated_pilot

import needlepoint
from needlepoint.design.generate import generate_cases
from needlepoint.design.protocol import load_override, reference_protocol

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "pilot.md").read_text(encoding="utf-8")
SPEC = DOC[DOC.index("## The pilot's files, exactly") : DOC.index("## The held-out seed")]
# PROTOCOL.md, "Design fingerprint": the thirteen design fields.
DESIGN_FIELDS = (
    "format", "protocol_id", "cases", "lengths", "similarities", "conditions", "orders",
    "seeds", "unknown", "code_pattern", "names", "templates", "analysis",
)  # fmt: skip
DATA_FILES = ("answer_key.jsonl", "plan.csv", "protocol.json", "requests.jsonl")
LAYOUT_BEFORE_ISSUE_33 = [
    f"needlepoint/{m}.py"
    for m in ("design/java_random", "jsonio", "design/protocol", "design/profiles",
              "design/identity", "design/materials", "design/order", "design/prepared",
              "design/freeze")
]  # fmt: skip


def dumps(value: Any) -> bytes:
    return (json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode()


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def documented_rules() -> list[str]:
    """The ```text blocks of the section: pilot rule, calibrated rule, the calibrated version's
    record addition, the pilot's record addition."""
    return re.findall(r"```text\n(.*?)\n```", SPEC, flags=re.S)


def documented_description() -> str:
    row = next(line for line in SPEC.splitlines() if line.startswith("| `description` |"))
    return row.split("`")[3]


def documented_sources() -> list[str]:
    para = SPEC[SPEC.index("for the\ngenerating modules") :]
    para = para[: para.index("(the sources")]
    return [f"needlepoint/{m}" for m in re.findall(r"`([a-z_/]+\.py)`", para)]


def candidate(design_seed: int, purpose: str, k: int) -> int:
    data = canonical({"attempt": k, "design_seed": design_seed, "purpose": purpose})
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") >> 1


def index(cases: Any, owner: str) -> tuple[dict[str, str], dict[str, str], list[tuple]]:
    asked: dict[str, str] = {}
    codes: dict[str, str] = {}
    for c in cases:
        asked.setdefault(c.target_name, f"{owner}'s target name of case {c.label}")
        for near in c.near_names:
            asked.setdefault(near, f"a near name of {owner}'s case {c.label}")
        codes.setdefault(c.target_code, f"the target code of case {c.label}")
        for bg in c.backgrounds:
            for j, code in enumerate(bg.codes):
                codes.setdefault(
                    code,
                    f"the code of background record {j} of case {c.label} at length {bg.length}",
                )
            codes.setdefault(
                bg.placeholder_code, f"the placeholder code of case {c.label} at length {bg.length}"
            )
    return asked, codes, [(c.label, c.target_name, c.target_code) for c in cases]


def overlap(a: tuple, a_owner: str, b: tuple, b_owner: str) -> str | None:
    _, a_codes, a_targets = a
    b_asked, b_codes, b_targets = b
    for label, name, _ in a_targets:
        if name in b_asked:
            return f"{name}, {a_owner}'s target name of case {label}, is {b_asked[name]}"
    for label, _, code in a_targets:
        if code in b_codes:
            return (
                f"{code}, {a_owner}'s target code of case {label}, is {b_codes[code]} in {b_owner}"
            )
    for label, _, code in b_targets:
        if code in a_codes:
            return (
                f"{code}, {b_owner}'s target code of case {label}, is {a_codes[code]} in {a_owner}"
            )
    return None


def rebuild(design: dict, lengths: list[int], cases: int, sources: dict | None) -> dict[str, bytes]:
    """The four files of a pilot of ``design``, from the documented rules."""
    pilot_rule = documented_rules()[0]
    s = design["seeds"]["materials"]
    design_index = index(generate_cases(design), "the design")

    def protocol_for(seed: int, rationale: Any = None) -> dict:
        p = json.loads(json.dumps(design))
        p.update(version=design["version"] + 1, lengths=lengths, cases=cases)
        p["seeds"] = dict(design["seeds"], materials=seed)
        p["description"] = documented_description().format(
            protocol_id=design["protocol_id"], **{"design version": design["version"]}, seed=seed
        )
        p.pop("materials_reuse", None)
        p["rationale"] = rationale
        return p

    rejected = []
    for k in range(100):
        seed = candidate(s, "needlepoint-pilot", k)
        pilot_index = index(generate_cases(protocol_for(seed)), "the pilot")
        found = overlap(pilot_index, "the pilot", design_index, "the design")
        if found is None:
            break
        rejected.append({"attempt": k, "overlap": found, "seed": seed})
    held = {"attempt": k, "rejected": rejected, "rule": pilot_rule, "seed": seed}
    ref = {
        "cases": design["cases"],
        "design_fingerprint": sha(canonical({f: design[f] for f in DESIGN_FIELDS})),
        "lengths": design["lengths"],
        "materials_seed": s,
        "protocol_id": design["protocol_id"],
        "protocol_sha256": sha(canonical(design)),
        "version": design["version"],
    }
    protocol = protocol_for(seed, {"design": ref, "kind": "pilot", "materials_seed": held})
    out = {"design.json": dumps(design), "protocol.json": dumps(protocol)}
    out["pilot.json"] = {  # completed once the manifest's files map is known
        "cases": cases,
        "design": ref,
        "format": "needlepoint-pilot",
        "lengths": lengths,
        "materials_seed": held,
        "package_version": needlepoint.__version__,
        "pilot": True,
        "prepared_dir": "prepared",
        "protocol_version": protocol["version"],
        "run_dir": "run",
        "version": 1,
    }
    out["design_fingerprint"] = sha(canonical({f: protocol[f] for f in DESIGN_FIELDS})).encode()
    out["sources"] = sources  # type: ignore[assignment]
    return out


def manifest_and_pilot(built: dict, folder: Path, package_version: str) -> tuple[bytes, bytes]:
    files = {n: sha((folder / "prepared" / n).read_bytes()) for n in DATA_FILES}
    files["protocol.json"] = sha(built["protocol.json"])
    manifest = {
        "design_fingerprint": built["design_fingerprint"].decode(),
        "files": files,
        "format": 1,
        "package_version": package_version,
        "sources": built["sources"],
    }
    pilot = dict(built["pilot.json"], prepared_fingerprint=sha(canonical(files)))
    return dumps(manifest), dumps(pilot)


def _small_pools_design(folder: Path) -> Path:
    """Small pools, so that the first three pilot candidates overlap the design (by name)."""
    names = reference_protocol()["names"]
    override = {
        "version": 2,
        "cases": 4,
        "lengths": [12],
        "seeds": {"materials": 1},
        "names": {
            "places": names["places"][:5],
            "sites": names["sites"][:4],
            "qualifiers": names["qualifiers"][:6],
        },
    }
    path = folder / "small.json"
    path.write_text(json.dumps(override, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_new_pilot_is_rebuilt_byte_for_byte(tmp_path: Path) -> None:
    design_path = _small_pools_design(tmp_path)
    folder = tmp_path / "pilot"
    simulated_pilot(folder, design_path, lengths=(12,), cases=4, simulate="perfect")
    here = Path(needlepoint.__file__).parent
    sources = {
        m: sha((here / m.removeprefix("needlepoint/")).read_bytes()) for m in documented_sources()
    }
    built = rebuild(load_override(design_path), [12], 4, sources)
    assert len(json.loads(built["protocol.json"])["rationale"]["materials_seed"]["rejected"]) == 3
    assert (folder / "design.json").read_bytes() == built["design.json"]
    assert (folder / "prepared" / "protocol.json").read_bytes() == built["protocol.json"]
    manifest, pilot = manifest_and_pilot(built, folder, needlepoint.__version__)
    assert (folder / "prepared" / "manifest.json").read_bytes() == manifest
    assert (folder / "pilot.json").read_bytes() == pilot


@pytest.mark.parametrize("name", ["c1", "c3"])
def test_the_committed_live_pilots_follow_the_documented_rules(name: str) -> None:
    folder = ROOT / "evidence" / "20261201-local-pilot-calibrate" / "pilots" / name
    design = json.loads((folder / "design.json").read_text(encoding="utf-8"))
    record = json.loads((folder / "pilot.json").read_text(encoding="utf-8"))
    committed = json.loads((folder / "prepared" / "manifest.json").read_text(encoding="utf-8"))
    # The sources are those of the code that ran then (documented so); the rest is rebuilt.
    built = rebuild(design, record["lengths"], record["cases"], committed["sources"])
    assert (folder / "design.json").read_bytes() == built["design.json"]
    assert (folder / "prepared" / "protocol.json").read_bytes() == built["protocol.json"]
    manifest, pilot = manifest_and_pilot(built, folder, record["package_version"])
    assert (folder / "prepared" / "manifest.json").read_bytes() == manifest
    assert (folder / "pilot.json").read_bytes() == pilot
    # Prepared under the module layout before issue 33 merged the generator's modules.
    assert sorted(committed["sources"]) == sorted(LAYOUT_BEFORE_ISSUE_33)


def test_the_documented_rules_are_the_ones_recorded() -> None:
    pilot_rule, calibrated_rule, record_rule, pilot_record_rule = documented_rules()
    assert pilot_record_rule.startswith("; and, for every design run under the evidence root")
    c1 = ROOT / "evidence" / "20261201-local-pilot-calibrate" / "pilots" / "c1" / "pilot.json"
    assert json.loads(c1.read_text(encoding="utf-8"))["materials_seed"]["rule"] == pilot_rule
    assert record_rule.startswith("; and, for every design run under the evidence root")
    assert calibrated_rule.startswith("attempt 0: the design's own seed S; attempt k >= 1:")
    simulated = ROOT / "evidence" / "20261130-simulated-reference" / "calibration"
    recorded = json.loads((simulated / "calibration.json").read_text(encoding="utf-8"))
    assert recorded["materials_seed"]["rule"] in (calibrated_rule, calibrated_rule + record_rule)
    assert candidate(20260930, "needlepoint-pilot", 0) == 8319860694796763036
