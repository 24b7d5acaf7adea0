"""The one helper per sink for untrusted text (issue 39): each value stays one inert line on a
terminal, renders as itself in Markdown, and never closes its code span."""

from __future__ import annotations

import markdown_it
import pytest

from needlepoint.safetext import md_code, md_text, terminal

MD = markdown_it.MarkdownIt("commonmark").enable("table")


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain name-1.md", "plain name-1.md"),
        ("a\nb", "a\\x0ab"),
        ("\x1b[2J", "\\x1b[2J"),
        ("x\ry", "x\\x0dy"),
        ("tab\there", "tab\\x09here"),
        ("del\x7f", "del\\x7f"),
        ("c1\x9b", "c1\\x9b"),
        ("nel\x85", "nel\\x85"),
        ("rtl\u202egpj", "rtl\\u202egpj"),
        ("iso\u2066x\u2069", "iso\\u2066x\\u2069"),
        ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
        ("bad\udcff", "bad\\udcff"),
        ("中文 ok", "中文 ok"),
    ],
)
def test_terminal_escapes_what_a_terminal_acts_on(raw: str, shown: str) -> None:
    assert terminal(raw) == shown
    assert len(terminal(raw).splitlines()) == 1


@pytest.mark.parametrize(
    "raw",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "![p](https://evil.example/p.png)",
        "[link](http://e) and <http://e>",
        "`code` and ``two``",
        "*em* _em_ ~~s~~ $x$ a | b",
        "&lt; already &amp;",
        "back\\slash\\",
    ],
)
def test_md_text_renders_as_itself(raw: str) -> None:
    html = MD.render(f"before {md_text(raw)} after")
    for live in ("<script", "<img", "<a ", "<code", "<em", "<del"):
        assert live not in html, (raw, html)
    # what the reader sees is the value itself
    import html as h

    text = h.unescape(html.removeprefix("<p>").removesuffix("</p>\n"))
    assert text == f"before {raw} after"


@pytest.mark.parametrize("raw", ["run", "odd`name", "``x``", "`", " spaced ", "a|b", "x\ny"])
def test_md_code_cannot_be_closed_from_inside(raw: str) -> None:
    span = md_code(raw)
    html = MD.render(f"see {span} here")
    assert html.count("<code>") == 1 and "here</p>" in html, (span, html)
    assert "\n" not in span
    assert md_code("run") == "`run`"  # an ordinary name keeps its bytes
