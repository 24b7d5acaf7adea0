"""One-off: rewrite the version 1 results files under docs/mutation/ (keyed by module) as version 2
(each function or rule constant by name and source hash), losing no recorded number or reason.

Each file's module source is the one it was measured on (its recorded SHA-256; from git at the
recorded commit if the file changed since). mutmut's generator (and tools/constant_mutants.py)
make that source's mutants again, without running a test, to count each function's mutants; the
survivors and excused mutants the file lists are put under their function. The file's totals are
kept as they are, and the run refuses any file whose totals are not the sum over its functions.

    python tools/mutation_convert.py
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from constant_mutants import constant_mutants
from constant_results import FORMAT as CONSTANTS_FORMAT
from constant_results import RESULTS as CONSTANTS
from constant_results import check_constants
from mutation_keys import constant_keys, function_keys, generated_changes
from mutation_records import VERSION, write_json
from mutation_report import MutateError
from mutation_run import ROOT
from mutation_shards import FORMAT as SHARD_FORMAT
from mutation_shards import RESULTS as SHARDS
from mutation_shards import check_shard


def measured_source(record: dict) -> bytes:
    """The module's source as measured: the file now if its hash is the recorded one, else git's."""
    data = (ROOT / record["file"]).read_bytes() if (ROOT / record["file"]).is_file() else b""
    if hashlib.sha256(data).hexdigest() != record["source_sha256"]:
        spec = f"{record['commit']}:{record['file']}"
        data = subprocess.run(["git", "show", spec], cwd=ROOT, capture_output=True).stdout
    if hashlib.sha256(data).hexdigest() != record["source_sha256"]:
        raise MutateError(f"{record['file']}: no source with the recorded hash")
    return data


def shard(record: dict) -> dict:
    module, source = record["module"], measured_source(record).decode("utf-8")
    keys = function_keys(source)
    counts = {
        full.removeprefix(module + "."): len(changes)
        for full, changes in generated_changes(source, module, record["file"]).items()
        if changes
    }
    if sum(counts.values()) != record["mutants"]:
        raise MutateError(f"{module}: {sum(counts.values())} mutants now, {record['mutants']} then")
    functions = {
        name: {"sha256": keys[name], "mutants": n, "survivors": [], "excused": []}
        for name, n in counts.items()
    }
    for kind in ("survivors", "excused"):
        for m in record[kind]:
            name = m["function"].removeprefix(module + ".")
            if not 1 <= m["number"] <= functions[name]["mutants"]:
                raise MutateError(f"{module}.{name}: no mutant #{m['number']}")
            functions[name][kind].append({k: v for k, v in m.items() if k != "function"})
    out = {k: v for k, v in record.items() if k not in ("survivors", "excused")}
    out |= {"version": VERSION, "functions": dict(sorted(functions.items()))}
    if problem := check_shard(out):
        raise MutateError(f"{module}: {problem}")
    back = {
        kind: [
            {"function": f"{module}.{n}", **m} for n, f in out["functions"].items() for m in f[kind]
        ]
        for kind in ("survivors", "excused")
    }
    for kind in back:  # every listed mutant kept, with every field
        key = lambda m: (m["function"], m["number"])  # noqa: E731
        assert sorted(back[kind], key=key) == sorted(record[kind], key=key), (module, kind)
    return out


def constants(record: dict) -> dict:
    module, source = record["module"], measured_source(record)
    keys = constant_keys(source)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "module.py"
        path.write_bytes(source)
        counts = Counter(m.constant for m in constant_mutants(path, module))
    if sum(counts.values()) != record["counts"]["mutants"]:
        raise MutateError(f"{module}: constant mutants differ from the record")
    entries = {
        full.removeprefix(module + "."): {
            "sha256": keys[full.removeprefix(module + ".")],
            "mutants": n,
            "survivors": [],
            "excused": [],
        }
        for full, n in counts.items()
    }
    for kind in ("survivors", "excused"):
        for m in record[kind]:
            name = m["constant"].removeprefix(module + ".")
            entries[name][kind].append({k: v for k, v in m.items() if k != "constant"})
    out = {k: v for k, v in record.items() if k not in ("survivors", "excused")}
    out |= {"version": VERSION, "constants": dict(sorted(entries.items()))}
    if problem := check_constants(out):
        raise MutateError(f"{module}: {problem}")
    for kind in ("survivors", "excused"):  # every listed mutant kept, with every field
        back = [{"constant": f"{module}.{n}", **m} for n, e in entries.items() for m in e[kind]]
        key = lambda m: (m["constant"], m["change"])  # noqa: E731
        assert sorted(back, key=key) == sorted(record[kind], key=key), (module, kind)
    return out


def main() -> int:
    jobs = ((SHARDS, SHARD_FORMAT, shard), (CONSTANTS, CONSTANTS_FORMAT, constants))
    for folder, fmt, convert in jobs:
        for path in sorted((ROOT / folder).glob("*.json")):
            record = json.loads(path.read_text("utf-8"))
            if record.get("format") != fmt or record.get("version") != 1:
                continue
            write_json(path, convert(record))
            print(f"{path.relative_to(ROOT)}: version {VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
