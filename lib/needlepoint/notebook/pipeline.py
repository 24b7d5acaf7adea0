"""`needlepoint pipeline`: run the notebooks in order with papermill into one evidence folder.

Each notebook executes with the evidence folder as its working directory and receives only
relative paths, so no machine path or user name lands in the evidence. A failed cell stops the
chain; the partly executed notebook is kept and the failing cell is named.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.notebook.evidence import render_html

NOTEBOOKS = (
    "01-design",
    "02-freeze",
    "03-run",
    "04-analysis",
    "05-power",
    "06-contamination",
    "07-compare",
    "08-pilot",
    "09-depth",
)
PILOT_NOTEBOOK = "08-pilot"
DEPTH_NOTEBOOK = "09-depth"  # simulated only: a live route (local-pipeline) leaves it out


class PipelineFailed(NeedlepointError):
    """A notebook cell failed: the chain stopped and the partial notebook was kept."""


MAX_LABEL = 61
_LABEL = re.compile(rf"[a-z0-9][a-z0-9-]{{0,{MAX_LABEL - 1}}}")


def check_label(label: str) -> None:
    """An evidence folder label: lower-case letters, digits and dashes (it names a folder)."""
    if not _LABEL.fullmatch(label):
        size = f"; it has {len(label)}" if len(label) > MAX_LABEL else ""
        raise NeedlepointError(
            f"label {label[:80]!r}: use 1 to {MAX_LABEL} lower-case letters, digits and dashes, "
            f"starting with a letter or digit{size}"
        )


def check_date(date: str) -> None:
    """A ``--date``: a real ``YYYYMMDD`` calendar date (it becomes part of a folder name)."""
    if not re.fullmatch(r"[0-9]{8}", date):
        raise NeedlepointError(f"--date {date[:40]!r}: expected YYYYMMDD")
    try:
        dt.datetime.strptime(date, "%Y%m%d")
    except ValueError:
        raise NeedlepointError(f"--date {date!r}: not a calendar date") from None


# Where `needlepoint pipeline` (and `make run`) write by default: a folder git ignores, so that
# evidence/ holds only what is committed. Committed evidence is written with --evidence-root.
DEFAULT_ROOT = "runs"


def notebooks_folder(given: str | Path | None) -> Path:
    """The notebooks to execute: ``given``, else ``./notebooks``, else the repository's.

    From a checkout installed in development mode (``make setup``) the package knows the
    repository's ``notebooks/`` beside its ``lib/``, so the pipeline runs from any folder; a
    plain package install ships no notebooks, and then the message says what to give.
    """
    if given is not None:
        folder = Path(given)
        if not folder.is_dir():
            raise NeedlepointError(f"--notebooks {folder}: no such folder")
        return folder
    here = Path("notebooks")
    if (here / f"{NOTEBOOKS[0]}.ipynb").is_file():
        return here
    import needlepoint

    beside = Path(needlepoint.__file__).resolve().parents[2] / "notebooks"
    if (beside / f"{NOTEBOOKS[0]}.ipynb").is_file():
        return beside
    raise NeedlepointError(
        "no notebooks here (./notebooks) and none beside the installed package: run from the "
        "repository root, or give --notebooks DIR (the repository's notebooks/ folder)"
    )


def evidence_folder(evidence_root: str | Path, label: str, date: str | None) -> Path:
    """``evidence_root/<date>-<label>``, refusing any label or date that could leave the root.

    Both become one folder name, so only a lower-case label and a real ``YYYYMMDD`` date are
    accepted: ``--date ../../escaped`` is refused in one line, before anything runs.
    """
    check_label(label)
    if date is None:
        date = dt.date.today().strftime("%Y%m%d")
    check_date(date)
    return Path(evidence_root) / f"{date}-{label}"


def declared_parameters(notebook: Path) -> dict[str, Any]:
    """The names and defaults of a notebook's `parameters` cell."""
    import papermill

    return {k: v["default"] for k, v in papermill.inspect_notebook(str(notebook)).items()}


def parse_value(text: str) -> Any:
    """A -p value: a JSON literal when it parses as one (numbers, true, null), else a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def plan_parameters(
    notebooks: list[Path], overrides: dict[str, Any]
) -> list[tuple[Path, dict[str, Any]]]:
    """Route each -p override to the notebooks that declare it; an unknown name is an error."""
    declared = {nb: declared_parameters(nb) for nb in notebooks}
    known = set().union(*declared.values())
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise NeedlepointError(f"no notebook has a parameter named {unknown[0]!r}")
    for nb, params in declared.items():
        for name in sorted(set(overrides) & set(params)):
            check_override(nb.stem, name, overrides[name], params[name])
    return [(nb, {k: v for k, v in overrides.items() if k in declared[nb]}) for nb in notebooks]


_KINDS = ((bool, "true or false"), (int, "an integer"), (float, "a number"), (str, "a string"))
_KINDS += ((list, "a JSON list"), (dict, "a JSON object"))


def check_override(notebook: str, name: str, value: Any, default_text: str) -> None:
    """A -p value of the type its parameter's default has, checked before any notebook runs
    (``-p allow abc`` once ran two notebooks and left an evidence folder before failing)."""
    import ast

    try:
        default = ast.literal_eval(default_text)
    except (ValueError, SyntaxError):
        return  # not a literal: nothing to compare with
    if value is None:
        return  # null switches a parameter off, whatever its type
    for kind, words in _KINDS:
        if isinstance(default, kind):
            ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
            if kind is float:
                ok = ok or (isinstance(value, int) and not isinstance(value, bool))
            if not ok:
                raise NeedlepointError(
                    f"-p {name} {json.dumps(value)[:60]}: {notebook}'s parameter {name} takes "
                    f"{words} (default {default_text[:40]}); nothing was run"
                )
            return


def run_pipeline(
    label: str,
    overrides: dict[str, Any] | None = None,
    *,
    evidence_root: str | Path = DEFAULT_ROOT,
    notebooks_dir: str | Path | None = None,
    date: str | None = None,
    only: list[str] | None = None,
    timings: dict[str, float] | None = None,
    before: dict[str, Callable[[Path], None]] | None = None,
) -> Path:
    """Execute the notebooks into ``evidence_root/<date>-<label>/`` and return that folder.

    ``notebooks_dir`` defaults to ``notebooks_folder(None)``: the repository's notebooks, found
    from the working directory or from the installed package, so it works from anywhere.
    ``timings``, when given, receives each notebook's wall seconds (execution plus HTML).
    ``before`` maps a notebook name to a check run on the evidence folder just before it; a
    check that raises stops the chain there (e.g. a token-count check before a live run).
    """
    out = evidence_folder(evidence_root, label, date)
    if out.exists() and any(out.iterdir()):
        raise NeedlepointError(
            f"{out}: already exists; choose another label (nothing is overwritten)"
        )
    names = [n for n in NOTEBOOKS if only is None or n in only]
    folder = notebooks_folder(notebooks_dir)
    sources = [folder / f"{n}.ipynb" for n in names]
    for src in sources:
        if not src.is_file():
            raise NeedlepointError(f"{src}: notebook not found in --notebooks {folder}")
    routed = plan_parameters(sources, overrides or {})
    ensure_kernel()
    out.mkdir(parents=True, exist_ok=True)
    for i, (src, params) in enumerate(routed, start=1):
        target = out / src.name
        if before and src.stem in before:
            before[src.stem](out)
        step = f"[{i}/{len(routed)}] {src.stem}"
        why = live_skip(src.stem, overrides or {}, declared_parameters(src))
        if why is not None:
            print(f"{step} {why}")
            continue
        print(step, end="", flush=True)
        seconds = execute_notebook(src, target, params, out)
        if timings is not None:
            timings[src.stem] = seconds
        # A run's progress bar may have drawn over this line on the terminal (and cleared it):
        # on a terminal the line is written again whole.
        again = f"\r{step}" if sys.stdout.isatty() else ""
        print(f"{again} ok ({seconds:.1f} s)")
    return out


def execute_notebook(src: Path, target: Path, params: dict[str, Any], cwd: Path) -> float:
    """Execute one notebook with papermill in ``cwd``, render its HTML, return wall seconds.

    A failed cell raises ``PipelineFailed`` naming the cell; the partial notebook is kept.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(src),
            str(target),
            parameters=params,
            cwd=str(cwd),
            kernel_name=KERNEL,
            progress_bar=False,
            log_output=False,
            report_mode=False,
            config=kernel_config(),
            kernel_manager_class=quiet_manager_class(),
        )
    except PapermillExecutionError as exc:
        print(" FAILED")
        raise PipelineFailed(
            f"{src.name} failed in cell {exc.cell_index} (execution count {exc.exec_count}): "
            f"{exc.ename}: {exc.evalue.splitlines()[0] if exc.evalue else ''}; "
            f"the partly executed notebook is kept at {target}"
        ) from None
    render_html(target)
    return time.perf_counter() - start


# The `needlepoint` Jupyter kernel: installed once, started quietly, stopped without noise.
#
# Two messages reached a user's terminal that said nothing about their work: the kernel's warning
# that it runs over TCP without encryption (once per notebook), and ``KeyboardInterrupt caught in
# kernel``, because jupyter_client interrupts a kernel before every shutdown and a kernel still
# finishing a message logs the interrupt as an error. Kernels started here get CurveZMQ keys from
# their manager, and are shut down with a request, not a signal.

KERNEL = "needlepoint"
# Read by every Jupyter application of this environment (lab, nbconvert, server): kernels they
# start get manager-provisioned CurveZMQ keys where pyzmq supports Curve.
JUPYTER_CONFIG = Path("etc") / "jupyter" / "jupyter_config.json"


def ensure_kernel() -> None:
    """Install the pinned `needlepoint` kernelspec into this environment if it is missing."""
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL not in KernelSpecManager().find_kernel_specs():
        from ipykernel.kernelspec import install

        install(prefix=sys.prefix, kernel_name=KERNEL, display_name=KERNEL)


def _policy() -> str:
    import zmq

    return "auto" if zmq.has("curve") else "disabled"


def kernel_config() -> Any:
    """Kernel-manager settings for papermill: CurveZMQ-encrypted kernel channels.

    With keys provisioned by the manager the kernel no longer warns, once per notebook, that
    it runs over TCP without encryption. A pyzmq built without Curve keeps the default (and
    the kernel's warning, which is then true).
    """
    from traitlets.config import Config

    return Config({"KernelManager": {"transport_encryption": _policy()}})


def write_jupyter_config(prefix: str | Path = sys.prefix) -> Path:
    """Give this environment's Jupyter applications the same setting (``make setup`` calls it).

    Other settings already in the file are kept; only the kernel manager's encryption policy is
    set.
    """
    path = Path(prefix) / JUPYTER_CONFIG
    config: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            loaded = None
        config = loaded if isinstance(loaded, dict) else {}
    manager = config.get("KernelManager")
    config["KernelManager"] = (manager if isinstance(manager, dict) else {}) | {
        "transport_encryption": _policy()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def quiet_manager_class() -> type:
    """An asynchronous kernel manager that does not interrupt a kernel it is shutting down.

    The shutdown request alone stops an idle kernel (the notebook has finished when papermill
    shuts it down); the interrupt sent before it only made a kernel that was still finishing a
    message log ``KeyboardInterrupt caught in kernel`` to the terminal.
    """
    from jupyter_client.manager import AsyncKernelManager

    class QuietShutdownKernelManager(AsyncKernelManager):  # type: ignore[misc]
        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    return QuietShutdownKernelManager


# Which notebooks a live pipeline skips, and the one line that says why.
#
# `needlepoint pipeline -p transport live` sends the frozen requests to your model in 03-run.
# 07-compare, 08-pilot and 09-depth, left at their defaults, would then make *simulated* runs
# of their own beside that live one, in the same evidence folder, where a reader could take them
# for results about the model. The pipeline skips them instead, with one line naming the
# command that does the live version; given live inputs (existing run folders with
# ``-p simulated null``, a live pilot folder with ``-p simulate_pilot false``), 07 and 08 run
# on those.

LIVE = "live"

_COMPARE = (
    "skipped: this live pipeline made one run (run/), and a comparison needs two or more runs "
    "of one design; compare live runs with `needlepoint compare RUNDIR RUNDIR --out DIR`, or "
    'here with -p simulated null -p run_dirs \'["run", "OTHER/run"]\''
)
_PILOT = (
    "skipped: a live pipeline makes no simulated pilot, and a live pilot sends held-out "
    "requests of its own; make one with `needlepoint pilot --protocol prepared/protocol.json "
    "--out pilot --lengths 12,48,160 --cases 8 --allow 192 --base-url URL --model M "
    "--api-key-env VAR`, then calibrate it here with -p simulate_pilot false -p pilot_dir pilot"
)

_DEPTH = (
    "skipped: 09-depth runs a simulated depth grid only; run the grid live against your model "
    "with `needlepoint prepare --protocol protocols/depth-grid.json --out depth --model M`, "
    "then `needlepoint run depth --allow 432 --run-dir depth-run --base-url URL --model M "
    "--api-key-env VAR` and `needlepoint analyze depth-run`"
)


def _value(name: str, overrides: dict[str, Any], defaults: dict[str, str]) -> Any:
    """A parameter's value in this pipeline: its override, else its literal default."""
    if name in overrides:
        return overrides[name]
    try:
        return ast.literal_eval(defaults.get(name, "None"))
    except (ValueError, SyntaxError):
        return None


def live_skip(notebook: str, overrides: dict[str, Any], defaults: dict[str, str]) -> str | None:
    """Why a live pipeline skips ``notebook`` (``overrides``: every -p of the pipeline;
    ``defaults``: the notebook's declared parameters), or None when it runs."""
    if overrides.get("transport") != LIVE:
        return None
    if notebook == "07-compare" and _value("simulated", overrides, defaults) is not None:
        return _COMPARE
    if notebook == "08-pilot" and _value("simulate_pilot", overrides, defaults) is not False:
        return _PILOT
    if notebook == "09-depth":
        return _DEPTH
    return None


if __name__ == "__main__":  # `python -m needlepoint.notebook.pipeline`: what make setup runs
    ensure_kernel()
    print(f"kernel {KERNEL}; Jupyter settings in {write_jupyter_config()}")
