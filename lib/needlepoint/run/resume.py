"""What a resume changes: every setting that differs from run.json, said before anything is sent.

A resumed session may run under other settings than the first one (a larger ``--allow``, another
timeout, new rates); each session record keeps its own. What run.json fixes (the prepared
fingerprint, simulation, model, base URL) is refused by ``folder.check_resume``. Nothing else
changes silently: each difference is one phrase of the resume line.

The gap override is carried: a run whose run.json records a lowered ``--min-gap-s`` with its
``--override-reason``, resumed with neither flag, keeps both, and says so. Falling back to the
protocol's gap unannounced would turn a 4-minute remainder into a 27-minute one; giving
``--min-gap-s`` again (with a reason when it is below the protocol's) sets another gap, also
stated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from needlepoint.run.options import RunOptions
from needlepoint.run.records import RunRecord

# run.json field -> how a user names it. Fields that cannot differ on a resume (refused, or
# derived from the fixed prepared folder) and the creation time are not listed.
FLAGS = {
    "allow": "--allow",
    "min_gap_s": "--min-gap-s",
    "override_reason": "--override-reason",
    "timeout_s": "--timeout-s",
    "deadline_s": "the request deadline (twice --timeout-s)",
    "api_key_env": "--api-key-env",
    "allow_insecure_http": "--allow-insecure-http",
    "prepared_dir": "the prepared folder",
    "package_version": "the needlepoint version",
}
COST_FLAGS = {"input_rate": "--input-rate", "output_rate": "--output-rate", "cap": "--cost-cap"}


def carry_recorded_gap(options: RunOptions, saved: RunRecord | None) -> tuple[RunOptions, bool]:
    """``options`` with run.json's gap override when the resume gives neither gap flag."""
    if (
        saved is None
        or saved.override_reason is None
        or options.min_gap_s is not None
        or (options.override_reason or "").strip()
    ):
        return options, False
    carried = dataclasses.replace(
        options, min_gap_s=saved.min_gap_s, override_reason=saved.override_reason
    )
    return carried, True


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value) if isinstance(value, str) else str(value)


def resume_changes(saved: RunRecord, wanted: RunRecord) -> list[str]:
    """One phrase per setting of this session that differs from run.json."""
    pairs = [(FLAGS[name], getattr(saved, name), getattr(wanted, name)) for name in FLAGS]
    pairs += [
        (flag, getattr(saved.cost, name), getattr(wanted.cost, name))
        for name, flag in COST_FLAGS.items()
    ]
    out = [f"{flag} {_show(b)} (run.json: {_show(a)})" for flag, a, b in pairs if a != b]
    keys = saved.extra.keys() | wanted.extra.keys()
    extra = sorted(k for k in keys if saved.extra.get(k) != wanted.extra.get(k))
    if extra:
        out.append(f"run metadata {', '.join(extra)} (differs from run.json's extra)")
    return out


def resume_line(run_dir: str, saved: RunRecord, wanted: RunRecord, carried: bool) -> str:
    """The line printed before a resumed session starts."""
    head = f"resuming {run_dir}"
    if carried:
        head += (
            f"; the recorded gap override is carried: --min-gap-s {_show(saved.min_gap_s)} "
            f"(protocol {_show(saved.protocol_min_gap_s)} s), reason {saved.override_reason!r}"
        )
    changes = resume_changes(saved, wanted)
    if changes:
        return f"{head}; settings that differ from run.json: {'; '.join(changes)}"
    return f"{head}; every setting as recorded in run.json"
