"""Readable text from HTML with the standard library's ``html.parser``.

Scripts, styles, templates, SVG and other non-content elements are dropped; block
elements start new lines; whitespace is collapsed; list items get a ``- `` bullet; the
page ``<title>`` comes first. Good enough for a model to read a page, with no extra
dependency.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["html_title", "html_to_text"]

_SKIP = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object", "select", "nav"}
)
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt", "fieldset",
        "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
        "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot", "thead",
        "tr", "ul", "body", "html", "caption", "option",
    }
)  # fmt: skip
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)
_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u200b]+")


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.current: list[str] = []
        self.skip_depth = 0
        self.skip_stack: list[str] = []
        self.in_title = False
        self.title_parts: list[str] = []
        self.pre_depth = 0

    def _break(self) -> None:
        line = "".join(self.current)
        if self.pre_depth == 0:
            line = _SPACES.sub(" ", line).strip()
        if line.strip():
            self.lines.append(line)
        self.current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
            return
        if tag in _SKIP:
            if tag not in _VOID:
                self.skip_stack.append(tag)
            return
        if self.skip_stack:
            return
        if tag in _BLOCK:
            self._break()
            if tag == "li":
                self.current.append("- ")
        if tag == "pre":
            self.pre_depth += 1
        elif tag in ("td", "th"):
            self.current.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self.skip_stack and tag in _BLOCK:
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
            return
        if self.skip_stack:
            if tag in self.skip_stack:
                while self.skip_stack and self.skip_stack.pop() != tag:
                    pass
            return
        if tag == "pre" and self.pre_depth:
            self._break()
            self.pre_depth -= 1
        elif tag in _BLOCK:
            self._break()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
            return
        if self.skip_stack:
            return
        if self.pre_depth:
            for i, part in enumerate(data.split("\n")):
                if i:
                    self._break()
                self.current.append(part)
            return
        self.current.append(data.replace("\n", " "))

    def result(self) -> tuple[str, str]:
        self._break()
        title = _SPACES.sub(" ", "".join(self.title_parts)).strip()
        return title, "\n".join(self.lines)


def _extract(html: str) -> tuple[str, str]:
    parser = _TextExtractor()
    try:
        parser.feed(html)
        parser.close()
    except (AssertionError, ValueError):  # malformed markup: keep what was read
        pass
    return parser.result()


def html_title(html: str) -> str:
    """The page's ``<title>`` text ('' when there is none)."""
    return _extract(html)[0]


def html_to_text(html: str, *, with_title: bool = True) -> str:
    """The readable text of an HTML page, one block per line.

    Args:
        html: The page source.
        with_title: Put the ``<title>`` on the first line.
    """
    title, body = _extract(html)
    if with_title and title and not body.startswith(title):
        return f"{title}\n{body}" if body else title
    return body
