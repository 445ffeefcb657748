"""`PPT` / `AsyncPPT`: build a PowerPoint deck slide by slide (python-pptx, extra ``ppt``).

Each session (``session_id``) edits its own presentation: `create_file`, then any number
of `add_first_page` / `add_text_page` / `add_text_image_page`, then `submit_file` writes
the ``.pptx``. Bullet items are a list (one string per bullet), not a separator-joined text.

Install with ``pip install 'plait[ppt]'``.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..exceptions import MissingDependencyError, ToolArgumentError, ToolExecutionError
from .base_action import ActionCore, AsyncActionMixin, BaseAction, tool_api
from .parser import BaseParser, JsonParser

if TYPE_CHECKING:
    from pptx.presentation import Presentation
    from pptx.slide import SlideLayout

__all__ = ["PPT", "THEME_MAPPING", "AsyncPPT"]

THEME_MAPPING: dict[str, dict[str, str | None]] = {
    "Default": {
        "template": None,
        "title": "Title Slide",
        "single": "Title and Content",
        "two": "Two Content",
    }
}
_DOC = "ppt.document"


class _Document(TypedDict):
    """A session's presentation (in its `session_state`)."""

    pointer: Presentation
    theme: str
    location: Path


def _presentation(template: str | None) -> Presentation:
    try:
        from pptx import Presentation
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError("python-pptx", extra="ppt", feature="the PPT tool") from exc
    return Presentation(template)


def _bullets(bullet_items: object) -> list[str]:
    if isinstance(bullet_items, str):
        items = bullet_items.splitlines()
    elif isinstance(bullet_items, Iterable):
        items = [str(item) for item in bullet_items]
    else:
        raise ToolArgumentError(f"bullet_items must be a list of strings, not {type(bullet_items).__name__}")
    return [item.strip() for item in items if item.strip()]


def _check_image(path: str) -> None:
    if not Path(path).is_file():
        raise ToolArgumentError(f"no image file at {path!r}")
    from PIL import Image  # a dependency of python-pptx

    try:
        with Image.open(path) as picture:
            picture.verify()
    except (OSError, SyntaxError, ValueError) as exc:  # what Pillow raises for unreadable images
        raise ToolArgumentError(f"cannot read {path!r} as an image: {exc}") from None


def _fill(text_frame: Any, items: list[str]) -> None:  # python-pptx leaves add_paragraph untyped
    for i, item in enumerate(items or [""]):
        paragraph = text_frame.paragraphs[0] if i == 0 else text_frame.add_paragraph()
        paragraph.text = item
        paragraph.level = 0


class _PPTCore(ActionCore, register=False):
    """`PPT`'s document work, shared by `PPT` and `AsyncPPT` (the arguments are `PPT`'s)."""

    requires = (("pptx", "ppt"),)

    def __init__(
        self,
        theme_mapping: Mapping[str, Mapping[str, str | None]] | None = None,
        description: Mapping[str, object] | None = None,
        parser: type[BaseParser] = JsonParser,
        enable: bool = True,
        *,
        root_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(description, parser, enable)
        self.theme_mapping = dict(theme_mapping or THEME_MAPPING)
        self.root_dir = Path(root_dir).resolve() if root_dir is not None else None

    # -- per-session document --------------------------------------------------------------------
    def _document(self, session_id: Hashable) -> _Document:
        doc: _Document | None = self.session_state(session_id).get(_DOC)
        if doc is None:
            raise ToolExecutionError("there is no presentation in this session yet; call create_file first")
        return doc

    def _layout(self, doc: _Document, kind: str) -> SlideLayout:
        name = self.theme_mapping[doc["theme"]][kind]
        for layout in doc["pointer"].slide_layouts:
            if layout.name == name:
                return layout
        raise ToolExecutionError(f"the theme {doc['theme']!r} has no slide layout named {name!r}")

    def _location(self, abs_location: str) -> Path:
        path = Path(abs_location).expanduser()
        if not path.is_absolute():
            raise ToolArgumentError(f"abs_location must be an absolute path, got {abs_location!r}")
        if path.suffix.lower() != ".pptx":
            path = path.with_suffix(path.suffix + ".pptx") if path.suffix else path.with_suffix(".pptx")
        resolved = path.resolve()
        if self.root_dir is not None and not resolved.is_relative_to(self.root_dir):
            raise ToolArgumentError(f"the file must be inside {self.root_dir}, got {abs_location!r}")
        return resolved

    def document(self, session_id: Hashable = 0) -> Presentation | None:
        """The python-pptx ``Presentation`` of `session_id` (None before `create_file`)."""
        doc: _Document | None = self.session_state(session_id).get(_DOC)
        return doc["pointer"] if doc else None

    # -- tool APIs --------------------------------------------------------------------------------
    @tool_api(explode_return=True)
    def create_file(self, theme: str, abs_location: str, session_id: Hashable = 0) -> dict[str, str]:
        """Start a new presentation, to be saved at abs_location by submit_file.

        Args:
            theme (str): the look of the slides (a theme name such as "Default")
            abs_location (str): absolute path of the .pptx file to write
            session_id: Filled in by the executor: each session edits its own presentation.

        Returns:
            dict: outcome
                * status: what was done
        """
        if theme not in self.theme_mapping:
            raise ToolArgumentError(f"unknown theme {theme!r}; available themes: {', '.join(self.theme_mapping)}")
        location = self._location(abs_location)
        pointer = _presentation(self.theme_mapping[theme].get("template"))
        document: _Document = {"pointer": pointer, "theme": theme, "location": location}
        self.session_state(session_id)[_DOC] = document
        return {"status": "created a ppt file."}

    @tool_api(explode_return=True)
    def add_first_page(self, title: str, subtitle: str, session_id: Hashable = 0) -> dict[str, str]:
        """Add the title slide.

        Args:
            title (str): the presentation's title
            subtitle (str): the line under the title
            session_id: Filled in by the executor.

        Returns:
            dict: outcome
                * status: what was done
        """
        doc = self._document(session_id)
        slide = doc["pointer"].slides.add_slide(self._layout(doc, "title"))
        placeholders = list(slide.placeholders)
        placeholders[0].text = title
        if subtitle and len(placeholders) > 1:
            placeholders[1].text = subtitle
        return {"status": "added page"}

    @tool_api(explode_return=True)
    def add_text_page(self, title: str, bullet_items: list[str], session_id: Hashable = 0) -> dict[str, str]:
        """Add a slide with a title and bullet points.

        Args:
            title (str): the slide's title
            bullet_items (List[str]): the bullet points, one string each
            session_id: Filled in by the executor.

        Returns:
            dict: outcome
                * status: what was done
        """
        doc = self._document(session_id)
        items = _bullets(bullet_items)
        slide = doc["pointer"].slides.add_slide(self._layout(doc, "single"))
        placeholders = list(slide.placeholders)
        placeholders[0].text = title
        _fill(placeholders[1].text_frame, items)
        return {"status": "added page"}

    @tool_api(explode_return=True)
    def add_text_image_page(
        self, title: str, bullet_items: list[str], image: str, session_id: Hashable = 0
    ) -> dict[str, str]:
        """Add a slide with a title, bullet points on the left and a picture on the right.

        Args:
            title (str): the slide's title
            bullet_items (List[str]): the bullet points, one string each
            image (str): path of an image file (PNG, JPEG, ...)
            session_id: Filled in by the executor.

        Returns:
            dict: outcome
                * status: what was done
        """
        doc = self._document(session_id)
        items = _bullets(bullet_items)
        _check_image(image)
        slide = doc["pointer"].slides.add_slide(self._layout(doc, "two"))
        placeholders = list(slide.placeholders)
        placeholders[0].text = title
        _fill(placeholders[1].text_frame, items)
        frame = placeholders[2]
        picture = slide.shapes.add_picture(image, frame.left, frame.top, width=frame.width)
        if picture.height > frame.height:  # too tall: fit the height instead
            ratio = frame.height / picture.height
            picture.height, picture.width = frame.height, int(picture.width * ratio)
        picture.top = frame.top + (frame.height - picture.height) // 2
        frame.element.getparent().remove(frame.element)  # the picture replaces the empty placeholder
        return {"status": "added page"}

    @tool_api(explode_return=True)
    def submit_file(self, session_id: Hashable = 0) -> dict[str, str]:
        """Save the presentation to its file. Call it once every slide has been added.

        Args:
            session_id: Filled in by the executor.

        Returns:
            dict: outcome
                * status: what was done, with the file's path
        """
        doc = self._document(session_id)
        location: Path = doc["location"]
        location.parent.mkdir(parents=True, exist_ok=True)
        doc["pointer"].save(str(location))
        return {"status": f"submitted. view ppt at {location}"}


class PPT(_PPTCore, BaseAction):
    """Build a PowerPoint presentation slide by slide: create the file, add pages, then submit it.

    Args:
        theme_mapping: Themes by name: ``{'template': path or None, 'title': layout name,
            'single': layout name, 'two': layout name}``.
        description: Overrides the tool description.
        parser: The argument parser class.
        enable: Whether executors offer this tool.
        root_dir: When given, files may only be written inside this directory.
    """


class AsyncPPT(AsyncActionMixin, _PPTCore, sibling_of=PPT):
    """Build a PowerPoint presentation slide by slide: create the file, add pages, then submit it.

    The document work is CPU and file bound: the async ``__call__`` runs it in a worker thread.
    """
