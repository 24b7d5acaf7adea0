"""HTML renderings of executed notebooks that a reader opens from disk, with no network.

nbconvert's `lab` template loads require.js and MathJax from a CDN and a module script that
fetches mermaid; opened from ``file://`` with no network those requests fail (and a browser
blocks a module script from ``file://`` as a cross-origin request). The template here drops all
three: the notebooks hold no widgets, equations or diagrams. What is left is one stylesheet,
shared by the pages of a folder and named by its SHA-256, plus the figures the notebooks wrote,
all beside the pages. Each page's title names the notebook and the folder it ran in.
"""

from __future__ import annotations

import ast
import html
import posixpath
import re
from pathlib import Path
from typing import Any

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
