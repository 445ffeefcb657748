"""PPT writes a .pptx that python-pptx reopens with the expected slides; documents are per session."""

from __future__ import annotations

import asyncio
import struct
import zlib
from pathlib import Path

import pytest

pptx = pytest.importorskip("pptx", reason="python-pptx is the 'ppt' extra")

from _web_support import call, content, make  # noqa: E402

from plait.actions.ppt import PPT, AsyncPPT  # noqa: E402
from plait.schema import ActionStatusCode  # noqa: E402


def png(width: int = 4, height: int = 2) -> bytes:
    """A small solid-colour RGB PNG, written with the standard library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xc0\x30\x30" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def slide_texts(path: Path) -> list[list[str]]:
    deck = pptx.Presentation(str(path))
    return [[shape.text_frame.text for shape in slide.shapes if shape.has_text_frame] for slide in deck.slides]


def test_build_a_deck(mode: str, tmp_path: Path) -> None:
    image = tmp_path / "chart.png"
    image.write_bytes(png())
    target = tmp_path / "out" / "deck.pptx"
    tool = make(mode, PPT, AsyncPPT)
    steps = [
        ({"theme": "Default", "abs_location": str(target)}, "create_file"),
        ({"title": "Agents", "subtitle": "built with plait"}, "add_first_page"),
        ({"title": "Why", "bullet_items": ["Layers", "Messages", "Memory [SPAN] stays one bullet"]}, "add_text_page"),
        ({"title": "Chart", "bullet_items": ["GDP grew"], "image": str(image)}, "add_text_image_page"),
    ]
    for inputs, api in steps:
        ret = call(tool, inputs, api, session_id="deck")
        assert ret.state == ActionStatusCode.SUCCESS, ret.errmsg
    ret = call(tool, {}, "submit_file", session_id="deck")
    assert content(ret) == {"status": f"submitted. view ppt at {target}"}
    assert slide_texts(target) == [
        ["Agents", "built with plait"],
        ["Why", "Layers\nMessages\nMemory [SPAN] stays one bullet"],
        ["Chart", "GDP grew"],
    ]
    deck = pptx.Presentation(str(target))
    pictures = [s for s in deck.slides[2].shapes if s.shape_type == pptx.enum.shapes.MSO_SHAPE_TYPE.PICTURE]
    assert len(pictures) == 1


def test_sessions_have_their_own_documents(mode: str, tmp_path: Path) -> None:
    tool = make(mode, PPT, AsyncPPT)

    def build(session: str) -> None:
        call(tool, {"theme": "Default", "abs_location": str(tmp_path / f"{session}.pptx")}, "create_file", session)
        call(tool, {"title": f"Deck {session}", "subtitle": ""}, "add_first_page", session)
        call(tool, {"title": "Only here", "bullet_items": [session]}, "add_text_page", session)
        call(tool, {}, "submit_file", session)

    if mode == "async":

        async def both() -> None:
            async def one(session: str) -> None:
                await asyncio.to_thread(build, session)

            await asyncio.gather(one("a"), one("b"))

        asyncio.run(both())
    else:
        build("a")
        build("b")
    assert slide_texts(tmp_path / "a.pptx") == [["Deck a", ""], ["Only here", "a"]]
    assert slide_texts(tmp_path / "b.pptx") == [["Deck b", ""], ["Only here", "b"]]


def test_mistakes_are_reported(mode: str, tmp_path: Path) -> None:
    tool = make(mode, PPT, AsyncPPT, root_dir=tmp_path)
    ret = call(tool, {"title": "x", "bullet_items": ["y"]}, "add_text_page", session_id=1)
    assert ret.state == ActionStatusCode.API_ERROR and "call create_file first" in ret.errmsg
    ret = call(tool, {"theme": "Neon", "abs_location": str(tmp_path / "a.pptx")}, "create_file", session_id=1)
    assert ret.state == ActionStatusCode.ARGS_ERROR and "available themes: Default" in ret.errmsg
    ret = call(tool, {"theme": "Default", "abs_location": "relative.pptx"}, "create_file", session_id=1)
    assert ret.state == ActionStatusCode.ARGS_ERROR and "absolute path" in ret.errmsg
    ret = call(tool, {"theme": "Default", "abs_location": "/etc/evil.pptx"}, "create_file", session_id=1)
    assert ret.state == ActionStatusCode.ARGS_ERROR and "must be inside" in ret.errmsg
    call(tool, {"theme": "Default", "abs_location": str(tmp_path / "noext")}, "create_file", session_id=1)
    ret = call(tool, {"title": "t", "bullet_items": ["b"], "image": str(tmp_path / "missing.png")},
               "add_text_image_page", session_id=1)  # fmt: skip
    assert ret.state == ActionStatusCode.ARGS_ERROR and "no image file" in ret.errmsg
    (tmp_path / "fake.png").write_text("not an image")
    ret = call(tool, {"title": "t", "bullet_items": ["b"], "image": str(tmp_path / "fake.png")},
               "add_text_image_page", session_id=1)  # fmt: skip
    assert ret.state == ActionStatusCode.ARGS_ERROR and "cannot read" in ret.errmsg
    ret = call(tool, {}, "submit_file", session_id=1)
    assert (tmp_path / "noext.pptx").is_file(), ret
    assert slide_texts(tmp_path / "noext.pptx") == []  # the failed slide was not kept


def test_bullet_items_are_a_list_in_the_description() -> None:
    api = next(a for a in PPT().description["api_list"] if a["name"] == "add_text_page")
    assert api["parameters"][1] == {
        "name": "bullet_items", "type": "Array", "description": "the bullet points, one string each",
        "items": {"type": "STRING"},
    }  # fmt: skip
    assert all(p["name"] != "session_id" for a in PPT().description["api_list"] for p in a["parameters"])
