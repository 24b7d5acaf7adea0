"""The optional, free `rationale` field: carried into protocol.json, never part of the design."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from needlepoint.design.generate import generate
from needlepoint.design.prepared import prepare
from needlepoint.design.protocol import is_pilot, load_override, reference_protocol, validate
from needlepoint.design.verify import verify_prepared
from needlepoint.errors import NeedlepointError


def _file(tmp_path: Path, value: dict) -> Path:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_a_rationale_is_free_and_changes_no_request(tmp_path: Path) -> None:
    protocol = load_override(_file(tmp_path, {"rationale": {"kind": "note", "why": [1, 2]}}))
    assert protocol["version"] == 1 and protocol["rationale"] == {"kind": "note", "why": [1, 2]}
    with_it, without = generate(protocol), generate(reference_protocol())
    assert with_it["requests.jsonl"] == without["requests.jsonl"]
    assert with_it["protocol.json"] != without["protocol.json"]
    folder = prepare(tmp_path / "prep", _file(tmp_path, protocol))
    assert verify_prepared(folder).ok
    assert json.loads((folder / "protocol.json").read_text("utf-8"))["rationale"]["why"] == [1, 2]


def test_a_rationale_must_be_an_object(tmp_path: Path) -> None:
    with pytest.raises(NeedlepointError, match="rationale must be a JSON object"):
        load_override(_file(tmp_path, {"rationale": "because"}))
    with pytest.raises(NeedlepointError, match="unknown protocol field 'reasons'"):
        load_override(_file(tmp_path, {"reasons": {}}))


def test_only_a_pilot_rationale_marks_a_pilot() -> None:
    p = reference_protocol()
    assert not is_pilot(p)
    p["rationale"] = {"kind": "calibration"}
    assert not is_pilot(p)
    p["rationale"] = {"kind": "pilot"}
    assert is_pilot(p)
    validate(p)
