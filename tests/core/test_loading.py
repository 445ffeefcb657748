"""`plait.utils.loading`: the one way commands load ``MODULE`` and ``MODULE:NAME``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from plait.exceptions import UserError
from plait.utils.loading import import_source, load_object


def test_a_py_file_is_imported_once_and_may_import_its_neighbours(tmp_path: Path) -> None:
    (tmp_path / "helper_mod_qq.py").write_text("VALUE = 41\n")
    tool = tmp_path / "tool_file_qq.py"
    tool.write_text(
        "import helper_mod_qq\nCOUNT = [0]\nCOUNT[0] += 1\nclass Box:\n    answer = helper_mod_qq.VALUE + 1\n"
    )
    first = import_source(str(tool))
    assert import_source(str(tool)) is first and first.COUNT == [1]
    assert load_object(f"{tool}:Box.answer", "--agent") == 42


def test_a_dotted_module_is_found_in_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cwd_mod_qq.py").write_text("def make():\n    return 'made'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert load_object("cwd_mod_qq:make", "--agent")() == "made"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "--agent must be MODULE:NAME"),
        ("no_such_module_qq:make", "--agent: could not import 'no_such_module_qq': ModuleNotFoundError"),
        ("json:nothing_here", "--agent: 'json' has no 'nothing_here'"),
        ("missing_file_qq.py:x", "could not import 'missing_file_qq.py': ImportError: no Python file"),
    ],
)
def test_what_cannot_load_is_a_user_error_naming_it(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message.replace(".", r"\.")):
        load_object(spec, "--agent")


def test_a_module_that_raises_on_import_is_a_user_error_and_not_kept(tmp_path: Path) -> None:
    broken = tmp_path / "broken_mod_qq.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(UserError, match="RuntimeError: boom"):
        load_object(f"{broken}:x", "mcp-serve")
    assert "plait_user_broken_mod_qq" not in sys.modules
