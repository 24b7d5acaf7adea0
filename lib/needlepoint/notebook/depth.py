"""The depth notebook's steps: freeze a depth design, run it simulated, analyse it.

``09-depth`` walks the worked example of PROTOCOL.md's "Depth designs" (the design of
``protocols/depth-grid.json``): prepare, verify and audit it, show that the Williams orders put
each condition equally often in each serial position, run a seeded simulation, and analyse it
with the depth analysis. Each step returns what the notebook prints; nothing here is logic the
tests cannot reach.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from needlepoint.design.audit import audit_prepared
from needlepoint.design.prepared import load_prepared, prepare
from needlepoint.design.verify import verify_prepared
from needlepoint.safeio import write_bytes_atomic


def freeze(protocol: dict[str, Any], folder: Path) -> tuple[Path, list[str]]:
    """Write the override file, prepare it into ``folder/prepared``, verify and audit it."""
    folder.mkdir(parents=True, exist_ok=True)
    override = folder / "protocol-override.json"
    text = json.dumps(protocol, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
    write_bytes_atomic(override, text.encode("utf-8"))
    prepared = prepare(folder / "prepared", override)
    loaded = load_prepared(prepared)
    verify = verify_prepared(prepared)
    audit = audit_prepared(prepared)
    conditions = ", ".join(loaded.protocol["conditions"])
    lines = [
        f"prepared {len(loaded.plan)} requests: conditions {conditions}",
        f"verify {'OK' if verify.ok else 'FAILED'}: {verify.files_compared} files compared",
        audit.lines()[-1],
        *(
            f"  {c.name}: {c.count} items, {c.failed} failed"
            for c in audit.checks
            if c.name in ("williams_orders", "position_balance", "near_slots", "answer_key")
        ),
    ]
    return prepared, lines


def position_balance(prepared: Path) -> Any:
    """How often each condition sits in each serial position, per length × similarity stratum
    (a pandas table: one row per stratum and position, one column per condition)."""
    import pandas as pd

    p = load_prepared(prepared)
    width = len(p.protocol["conditions"])
    counts: Counter[tuple[int, str, int, str]] = Counter()
    for i in range(0, len(p.plan), width):
        for position, row in enumerate(p.plan[i : i + width], start=1):
            counts[(row.length, row.similarity, position, row.condition)] += 1
    rows = []
    for n in p.protocol["lengths"]:
        for sim in p.protocol["similarities"]:
            for position in range(1, width + 1):
                row = {"length": n, "similarity": sim, "position": position}
                row |= {c: counts[(n, sim, position, c)] for c in p.protocol["conditions"]}
                rows.append(row)
    return pd.DataFrame(rows).set_index(["length", "similarity", "position"])
