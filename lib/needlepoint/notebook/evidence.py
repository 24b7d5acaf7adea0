"""Byte-for-byte comparison of a regenerated evidence folder with its committed copy.

`make test` re-executes the reference notebooks in a scratch folder (nbval checks what they
print); this module then checks what they *wrote*. Every file under the committed folder is a
data file that must come back with the same bytes, except the few listed in ``NOT_COMPARED``,
each with the reason it may differ. A committed file that was not regenerated, or a regenerated
file that is not committed, fails like a changed byte: nothing goes unchecked silently.
"""

from __future__ import annotations

import ast
import fnmatch
import html
import os
import posixpath
import re
import stat
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from needlepoint.errors import NeedlepointError
from needlepoint.jsonio import file_sha256
from needlepoint.safeio import open_read

CHUNK = 1 << 20  # bytes compared at a time

# Pattern (relative POSIX path; without "/" it matches top-level files only) -> why it may vary.
NOT_COMPARED: dict[str, str] = {
    # papermill records each cell's start and end time in the executed notebook; nbval
    # re-executes it and compares every printed output, which is what the notebook proves
    "*.ipynb": "executed notebooks: nbval compares their outputs; their metadata holds times",
    # written by `needlepoint pipeline` from the executed notebook after execution, not by a
    # notebook; what they show is the notebook's outputs, which nbval compares
    "*.html": "HTML renderings of the executed notebooks, made by the pipeline, not by them",
    # the nbconvert template's stylesheet, shared by the renderings above and named by its
    # own SHA-256
    "notebook-*.css": "the renderings' shared stylesheet, named by its SHA-256",
    # provenance is the one run file that must differ: the wall-clock start and git commit
    "run/provenance.jsonl": "the run's wall-clock time and git commit",
    "compare/runs/*/provenance.jsonl": "each compared run's wall-clock time and git commit",
    "pilot/run/provenance.jsonl": "the pilot run's wall-clock time and git commit",
    "depth/run/provenance.jsonl": "the depth run's wall-clock time and git commit",
}


def _excluded(rel: str) -> str | None:
    """The NOT_COMPARED pattern covering ``rel``, if any."""
    for pattern in NOT_COMPARED:
        if rel.count("/") == pattern.count("/") and fnmatch.fnmatchcase(rel, pattern):
            return pattern
    return None


def _files(folder: Path) -> dict[str, str]:
    """Every entry under ``folder`` that is not a folder: sorted relative POSIX path -> kind.

    Symbolic links are listed as links and never followed (a link to a folder is not walked),
    and so are FIFOs and other special files: an extra link is an extra file like any other.
    """
    found: dict[str, str] = {}
    for top, dirs, names in os.walk(folder, followlinks=False):
        here = Path(top)
        for name in [*names, *(d for d in dirs if (here / d).is_symlink())]:
            mode = os.lstat(here / name).st_mode
            kind = "file" if stat.S_ISREG(mode) else "special file"
            found[(here / name).relative_to(folder).as_posix()] = (
                "symbolic link" if stat.S_ISLNK(mode) else kind
            )
    return dict(sorted(found.items()))


def _first_difference(a: Path, b: Path) -> int | None:
    """The offset of the first differing byte (None when equal; the shorter length when one is
    a prefix), read a chunk at a time: a file of gigabytes costs two chunks of memory."""
    offset = 0
    with open_read(a) as fa, open_read(b) as fb:
        while True:
            x, y = fa.read(CHUNK), fb.read(CHUNK)
            if x != y:
                pairs = enumerate(zip(x, y, strict=False))
                return offset + next((i for i, (p, q) in pairs if p != q), min(len(x), len(y)))
            if not x:
                return None
            offset += len(x)


@dataclass(frozen=True)
class EvidenceDiff:
    """What a comparison found: compared files, and each kind of mismatch by relative path."""

    compared: tuple[str, ...]
    not_compared: tuple[str, ...]
    differing: tuple[str, ...]
    details: dict[str, str]
    not_regenerated: tuple[str, ...]
    not_committed: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.differing or self.not_regenerated or self.not_committed)

    def lines(self) -> list[str]:
        """Human-readable result: one line per problem, then what was compared and skipped."""
        out = [f"differs: {rel} ({self.details[rel]})" for rel in self.differing]
        out += [f"committed but not regenerated: {rel}" for rel in self.not_regenerated]
        out += [f"regenerated but not committed: {rel}" for rel in self.not_committed]
        folders = Counter(rel.split("/")[0] if "/" in rel else "." for rel in self.compared)
        counts = ", ".join(f"{name} {n}" for name, n in sorted(folders.items()))
        out.append(f"compared byte for byte: {len(self.compared)} data files ({counts})")
        skipped = Counter(_excluded(rel) for rel in self.not_compared)
        for pattern, reason in NOT_COMPARED.items():
            if skipped[pattern]:
                out.append(f"not compared: {skipped[pattern]} x {pattern} ({reason})")
        bad = len(self.differing) + len(self.not_regenerated) + len(self.not_committed)
        out.append(
            f"evidence-diff {'OK' if self.ok else 'FAILED'}: "
            + (f"all {len(self.compared)} files identical" if self.ok else f"{bad} file(s) differ")
        )
        return out


def diff_evidence(committed: str | Path, regenerated: str | Path) -> EvidenceDiff:
    """Compare every data file of ``committed`` with the same path under ``regenerated``."""
    base, new = Path(committed), Path(regenerated)
    for folder in (base, new):
        if not folder.is_dir():
            raise NeedlepointError(f"{folder}: not a folder")
    old_kinds, new_kinds = _files(base), _files(new)
    old_files, new_files = list(old_kinds), set(new_kinds)
    expected = [rel for rel in old_files if not _excluded(rel)]
    compared = [rel for rel in expected if rel in new_files]
    differing, details = [], {}
    for rel in compared:
        kinds = (old_kinds[rel], new_kinds[rel])
        if kinds != ("file", "file"):
            differing.append(rel)
            details[rel] = f"a {kinds[0]} committed, a {kinds[1]} now; only files compare equal"
            continue
        at = _first_difference(base / rel, new / rel)
        if at is not None:
            differing.append(rel)
            details[rel] = (
                f"first difference at byte {at}; sha256 "
                f"{file_sha256(base / rel)[:16]} committed, {file_sha256(new / rel)[:16]} now"
            )
    return EvidenceDiff(
        compared=tuple(compared),
        not_compared=tuple(rel for rel in old_files if _excluded(rel)),
        differing=tuple(differing),
        details=details,
        not_regenerated=tuple(rel for rel in expected if rel not in new_files),
        not_committed=tuple(
            sorted(rel for rel in new_files - set(old_files) if not _excluded(rel))
        ),
    )


# HTML renderings of executed notebooks that a reader opens from disk, with no network.
#
# nbconvert's `lab` template loads require.js and MathJax from a CDN and a module script that
# fetches mermaid; opened from ``file://`` with no network those requests fail (and a browser
# blocks a module script from ``file://`` as a cross-origin request). The template here drops all
# three: the notebooks hold no widgets, equations or diagrams. What is left is one stylesheet,
# shared by the pages of a folder and named by its SHA-256, plus the figures the notebooks wrote,
# all beside the pages. Each page's title names the notebook and the folder it ran in.

TEMPLATE_NAME = "needlepoint_offline.html.j2"
# Blocks of nbconvert's lab template that load scripts from the network, emptied; and a few
# rules so that wide tables and long lines scroll inside their cell instead of off the page.
TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
<style type="text/css">
main { max-width: 100%; overflow-x: hidden; }
.jp-OutputArea-output { overflow-x: auto; }
.jp-RenderedHTMLCommon table { display: block; max-width: 100%; overflow-x: auto; }
.jp-RenderedText pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.jp-RenderedImage img, .jp-RenderedMarkdown img { max-width: 100%; height: auto; }
</style>
{%- endblock html_head_css -%}
"""

# What a page may load: its stylesheet and images from beside it (or inline), nothing else. No
# script runs (an ``<img onerror=…>`` or a ``<script>`` copied from a memo line stays inert) and
# nothing is fetched from the network (a Markdown image from an ``https://`` host is not loaded).
# ``file:`` is named because some browsers give a page opened from disk no origin for 'self'.
CSP = (
    "default-src 'none'; script-src 'none'; object-src 'none'; connect-src 'none'; "
    "frame-src 'none'; font-src 'self' file: data:; img-src 'self' file: data:; "
    "style-src 'self' file: 'unsafe-inline'; form-action 'none'; base-uri 'none'"
)
CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CSP}"/>'

# The head's inline styles: identical on every page, so written once per folder.
_STYLE = re.compile(r"<style[^>]*>\n?(.*?)</style>\n?", re.S)
_IMG = re.compile(r'(<img\b[^>]*?\bsrc=")([^"]+)(")')


def _externalise(head: str, folder: Path) -> str:
    """Move the head's inline styles to one file named by its SHA-256, linked in their place."""
    from needlepoint.jsonio import sha256_hex, write_bytes_atomic

    parts = _STYLE.split(head)
    content = "".join(parts[1::2])
    if not content:
        return head
    asset = folder / f"notebook-{sha256_hex(content.encode('utf-8'))[:16]}.css"
    if not asset.exists():
        write_bytes_atomic(asset, content.encode("utf-8"))  # never through a planted link
    # split() alternates text and captured content: keep the text, one link in place of all
    link = f'<link rel="stylesheet" href="{asset.name}">\n'
    return parts[0] + link + "".join(parts[2::2])


def page_title(nb: Any, folder: Path, stem: str) -> str:
    """The notebook's first heading (or its file name) and the folder it ran in."""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("# "):
                return f"{line[2:].strip()} — {folder.resolve().name}"
    return f"{stem} — {folder.resolve().name}"


def _parameter_folders(nb: Any) -> list[str]:
    """String values of the parameters cells (injected ones first): where the notebook wrote."""
    cells = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    cells += [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    found: list[str] = []
    for cell in cells:
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                value = node.value.value
                if isinstance(value, str) and value not in found:
                    found.append(value)
    return found


def rebase_images(page: str, nb: Any, folder: Path) -> str:
    """Point a relative image that does not resolve beside the page at the folder it is in.

    A Markdown output such as ``summary.md`` names its figures relative to its own folder, the
    notebook's ``analysis_dir``; shown in the notebook they resolve against the page instead.
    Such a link is rewritten to the first folder parameter of the notebook under which the file
    exists. Links that resolve, absolute links and data URLs are left alone.
    """
    bases = [b for b in _parameter_folders(nb) if not Path(b).is_absolute()]

    def fix(match: re.Match[str]) -> str:
        src = html.unescape(match.group(2))
        if ":" in src or src.startswith("/") or (folder / src).exists():
            return match.group(0)
        for base in bases:
            candidate = posixpath.normpath(posixpath.join(base, src))
            if not candidate.startswith("..") and (folder / candidate).is_file():
                return match.group(1) + html.escape(candidate) + match.group(3)
        return match.group(0)

    return _IMG.sub(fix, page)


def without_redraws(nb: Any) -> Any:
    """The notebook as a reader should see it: no progress-bar redraws.

    A progress bar redraws its line with ``\r``; a terminal (and Jupyter) shows only the last
    state, but nbconvert renders each stream output as its own block, so one run's bar became
    129 lines of the page. Every stream line that holds a ``\r`` is a redraw and is dropped
    (the run's own summary follows it in plain lines), and a stream output left with nothing
    but white space goes with it. The notebook file itself is not changed.
    """
    for cell in nb.cells:
        outputs = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text = out.get("text", "")
                text = text if isinstance(text, str) else "".join(text)
                if "\r" in text:
                    kept = [line for line in text.split("\n") if "\r" not in line]
                    text = "\n".join(kept)
                    if not text.strip():
                        continue
                    out = type(out)({**out, "text": text})  # a NotebookNode again
            outputs.append(out)
        if "outputs" in cell:
            cell["outputs"] = outputs
    return nb


def render_html(notebook: Path) -> Path:
    """An HTML rendering beside the executed notebook, for readers without Jupyter.

    Nothing on the page loads from the network, and its content security policy (``CSP``)
    forbids scripts and network loads, whatever a Markdown output holds; the template's
    stylesheet (about 260 KB) is written once per folder, named by its SHA-256, and linked
    instead of copied into each page.
    """
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    nb = without_redraws(nbformat.read(notebook, as_version=4))
    exporter = HTMLExporter(
        template_name="lab",
        template_file=TEMPLATE_NAME,
        extra_loaders=[jinja2.DictLoader({TEMPLATE_NAME: TEMPLATE})],
    )
    resources = {"metadata": {"name": page_title(nb, notebook.parent, notebook.stem)}}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    charset = '<meta charset="utf-8"/>'
    head = body.find("<head>")
    if head >= 0:  # first in the head after the charset, so that it governs everything after
        cut = head + len("<head>")
        if body.startswith(charset, cut):
            cut += len(charset)
        body = body[:cut] + "\n" + CSP_META + body[cut:]
    cut = body.find("</head>")
    if cut >= 0:
        body = _externalise(body[:cut], notebook.parent) + body[cut:]
    body = rebase_images(body, nb, notebook.parent)
    out = notebook.with_suffix(".html")
    from needlepoint.jsonio import write_bytes_atomic

    write_bytes_atomic(out, body.encode("utf-8"))  # never through a planted link
    return out
