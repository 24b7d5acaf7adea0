"""The protocol: every parameter of a design, frozen into ``protocol.json`` with the materials.

Version 1 of ``context-position-similar`` is the reference design of the brief. Its parameters
are fixed here; any other parameters must carry a different version, so that two different
designs can never share a name. The design fingerprint is the SHA-256 over the design fields
alone (``schema.DESIGN_FIELDS``): two prepared folders that share it hold the same records,
codes, order and answer key, and differ at most in the model they ask and how the bodies are
shaped (a *model variant*).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from needlepoint.design import positions, profiles, schema
from needlepoint.design.schema import CODE_PATTERN
from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import canonical_bytes, read_json, sha256_hex

FORMAT = 1
PROTOCOL_ID = "context-position-similar"

_REFERENCE: dict[str, Any] = {
    "format": FORMAT,
    "protocol_id": PROTOCOL_ID,
    "version": 1,
    "description": "Middle-position loss under near-duplicate distractors (seeds 000/001).",
    "model": "agnes-3.0-flash",
    "temperature": 0,
    "max_tokens": 1024,
    "cases": 8,
    "lengths": [60, 240],
    "similarities": ["low", "high"],
    "conditions": ["B", "M", "E", "A"],
    "orders": ["B-M-A-E", "M-E-B-A", "E-A-M-B", "A-B-E-M"],
    "seeds": {"materials": 20260930, "order": 20260930},
    "unknown": "UNKNOWN",
    "code_pattern": CODE_PATTERN,
    "names": {
        "suffix": "项目",
        "places": (
            "松塔 松林 青石 青山 柳湾 柳岸 梅岭 梅园 枫桥 枫林 竹溪 竹园 云台 云山 金沙 金湾 "
            "白鹭 白沙 黄岩 黄沙 紫荆 紫竹 翠屏 翠湖 玉泉 玉山 石门 石湾 桃源 桃园 杏花 杏林"
        ).split(),
        "sites": (
            "北站 南站 东站 西站 东港 西港 南港 北港 码头 渡头 桥头 新区 园区 港区 校区 山庄 "
            "农庄 广场 中心 大道 水厂 电厂 仓库 基地 车场 货场 湿地 隧道 泵站 枢纽"
        ).split(),
        "qualifiers": (
            "试验 改造 扩建 维修 监测 养护 升级 示范 配套 绿化 照明 排水 加固 整治 规划 勘察 "
            "调度 巡检 清淤 扩容"
        ).split(),
    },
    "templates": {
        "system": (
            "你是一个严谨的检索助手。只依据用户消息中的记录作答，"
            "只输出答案本身，不要解释，也不要添加任何其他文字。"
        ),
        "record": "名称：{name}，交接编码：{code}",
        "user": (
            "以下是项目交接记录，每行一条：\n{records}\n\n"
            "问题：{name}的交接编码是什么？只回答编码本身（两个大写字母、连字符和四位数字）。"
            "如果以上记录中没有这个项目，只回答 UNKNOWN。"
        ),
    },
    "runner": {"min_gap_s": 20, "stop_statuses": [401, 403, 429], "max_consecutive_failures": 2},
    "analysis": {
        "threshold": 0.10,
        "confidence": 0.95,
        "min_complete_cases": 2,
        "exact_bootstrap_max_cases": 12,
        "bootstrap_resamples": 10000,
        "bootstrap_seed": 20260930,
    },
}


# Free label fields a protocol may leave out (the reference has none). ``rationale`` records why
# a version exists: a pilot's design (``kind: "pilot"``) or a calibration from a pilot
# (``kind: "calibration"``); see docs/pilot.md. It is never part of the design.
OPTIONAL_FIELDS = schema.OPTIONAL_FIELDS


def reference_protocol() -> dict[str, Any]:
    """A fresh copy of protocol context-position-similar v1."""
    return copy.deepcopy(_REFERENCE)


def design_part(protocol: dict[str, Any]) -> dict[str, Any]:
    """The design fields of a protocol, whole, with the options it declares (missing ones are an
    error upstream)."""
    return {key: protocol[key] for key in schema.design_fields(protocol)}


def design_fingerprint(protocol: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of the protocol's design fields."""
    return sha256_hex(canonical_bytes(design_part(protocol)))


def protocol_bytes(protocol: dict[str, Any]) -> bytes:
    """protocol.json is indented for reading, but still sorted and UTF-8, so its bytes are fixed."""
    return (json.dumps(protocol, sort_keys=True, ensure_ascii=False, indent=2) + "\n").encode()


def _merge(base: dict[str, Any], override: dict[str, Any], where: str) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if key not in base:
            raise NeedlepointError(f"{where}: unknown protocol field {key!r}")
        if isinstance(base[key], dict) and isinstance(value, dict):
            out[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            out[key] = copy.deepcopy(value)
    return out


def _changed_fields(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    changed = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            changed += _changed_fields(va, vb, f"{prefix}{key}.")
        elif _canonical(va) != _canonical(vb):
            # Compared as the bytes they become: 0, 0.0 and false are different requests.
            changed.append(prefix + key)
    return changed


def _canonical(value: Any) -> bytes | None:
    return None if value is None else canonical_bytes(value)


def load_override(path: str | Path) -> dict[str, Any]:
    """Reference parameters overridden by a JSON file; a changed design needs a new version."""
    override = read_json(path, pipes=True)
    if not isinstance(override, dict):
        raise NeedlepointError(f"{path}: a protocol override must be a JSON object")
    body = {k: override[k] for k in profiles.OPTIONAL_FIELDS if k in override}
    free = {k: override[k] for k in OPTIONAL_FIELDS if k in override}
    options = {k: override[k] for k in schema.DESIGN_OPTIONS if k in override}
    rest = {
        k: v for k, v in override.items() if k not in body and k not in free and k not in options
    }
    # Nested option fields the reference lacks: seeds.placement and analysis.contrast.
    nested = {}
    for group, key in (("seeds", "placement"), ("analysis", "contrast")):
        if isinstance(rest.get(group), dict) and key in rest[group]:
            rest[group] = {k: v for k, v in rest[group].items() if k != key}
            nested[(group, key)] = override[group][key]
    merged = _merge(_REFERENCE, rest, str(path))
    for (group, key), value in nested.items():
        merged[group][key] = copy.deepcopy(value)
    merged |= copy.deepcopy(options)
    if isinstance(options.get("depths"), list):
        # A depth design names its conditions and orders by rule unless the file spells them.
        try:
            if "conditions" not in override:
                merged["conditions"] = positions.depth_conditions(options["depths"])
            if "orders" not in override and isinstance(merged["conditions"], list):
                merged["orders"] = positions.williams_orders([str(c) for c in merged["conditions"]])
        except TypeError:
            pass  # a mistyped depth: the schema names it below
    protocol = _with_body_fields(merged, override, body, str(path)) | copy.deepcopy(free)
    validate(protocol, str(path))
    return protocol


def is_pilot(protocol: dict[str, Any]) -> bool:
    """Whether a protocol is a pilot's design: held-out materials, never a main run."""
    rationale = protocol.get("rationale")
    return isinstance(rationale, dict) and rationale.get("kind") == "pilot"


def _with_body_fields(
    merged: dict[str, Any], override: dict[str, Any], body: dict[str, Any], where: str
) -> dict[str, Any]:
    """Apply an override's body profile and optional body fields (absent from the reference).

    Reference body fields that the declared profile does not send are converted as
    ``--body-profile`` converts them; a field the file itself sets must belong to the profile.
    """
    profile = body.get("body_profile", profiles.DEFAULT_PROFILE)
    profiles.check_profile_name(profile, f"{where}: body_profile")
    protocol = profiles.convert(merged, profile)
    for key in schema.BODY_FIELDS[1:]:
        if key in override and key not in profiles.allowed_fields(profile):
            raise NeedlepointError(f"{where}: field {key!r} is not sent by body profile {profile}")
    protocol.update({k: v for k, v in body.items() if k != "body_profile"})
    return protocol


def _check_reuse(value: Any, where: str) -> None:
    """``materials_reuse``: ``{"reason": non-empty text, "overlaps": [text, ...]}``."""
    ok = (
        isinstance(value, dict)
        and set(value) == {"reason", "overlaps"}
        and isinstance(value["reason"], str)
        and value["reason"].strip() != ""
        and isinstance(value["overlaps"], list)
        and all(isinstance(o, str) for o in value["overlaps"])
    )
    if not ok:
        raise NeedlepointError(
            f"{where}: materials_reuse must be an object with a non-empty reason and a list of "
            "overlaps (text)"
        )


def validate(p: dict[str, Any], where: str = "protocol.json") -> None:
    """Refuse parameters the generator cannot honour, with one line naming the field."""
    if p.get("format") != FORMAT:
        raise NeedlepointError(f"{where}: unsupported protocol format {p.get('format')!r}")
    if p.get("protocol_id") != PROTOCOL_ID:
        raise NeedlepointError(f"{where}: unknown protocol_id {p.get('protocol_id')!r}")
    missing = sorted(set(_REFERENCE) - set(schema.BODY_FIELDS) - set(p))
    if missing:
        raise NeedlepointError(f"{where}: missing field {missing[0]!r}")
    # Every field typed and ranged, the names pools and templates usable, the size bounded.
    schema.check(p, where, known=(*_REFERENCE, *profiles.OPTIONAL_FIELDS, *OPTIONAL_FIELDS))
    if "rationale" in p and not isinstance(p["rationale"], dict):
        raise NeedlepointError(f"{where}: rationale must be a JSON object")
    if "materials_reuse" in p:
        _check_reuse(p["materials_reuse"], where)
    if "depths" in p:
        labels = positions.depth_conditions(p["depths"])
        if p["conditions"] != labels:
            raise NeedlepointError(f"{where}: conditions must be {labels} for these depths")
        if p["orders"] != positions.williams_orders(labels):
            raise NeedlepointError(
                f"{where}: orders must be the Williams square over the conditions "
                '(PROTOCOL.md, "Condition orders"); leave them out to have them filled in'
            )
    # A model variant of v1 (another model, body profile or runner) is still v1; only a change
    # of a design field needs a new version.
    changed = _changed_fields(design_part(_REFERENCE), design_part(p))
    if p["version"] == 1 and changed:
        raise NeedlepointError(
            f"{where}: {PROTOCOL_ID} v1 is frozen; {changed[0]} differs, so set a new version"
        )
    profiles.validate_body_fields(p, where)
