"""tool_api: types from hints and docstrings, docstring parsing, class descriptions."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional, Union

import pytest

from plait.actions import BaseAction, tool_api
from plait.actions._docstring import parse_docstring
from plait.actions._types import describe_type_string
from plait.exceptions import UserError


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def params(fn: Any) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in fn.api_description["parameters"]}


def test_hints_map_to_the_vocabulary() -> None:
    @tool_api
    def f(
        a: str,
        b: int,
        c: float,
        d: bool,
        e: list[str],
        f: list[int],
        g: Optional[int] = None,
        h: int | None = None,
        i: dict[str, int] | None = None,
        j: tuple[int, ...] = (),
        k: Union[int, float] = 1,
        m: Any = None,
    ) -> None:
        """Doc."""

    p = params(f)
    assert {name: p[name]["type"] for name in p} == {
        "a": "STRING",
        "b": "NUMBER",
        "c": "FLOAT",
        "d": "BOOLEAN",
        "e": "Array",
        "f": "Array",
        "g": "NUMBER",
        "h": "NUMBER",
        "i": "OBJECT",
        "j": "Array",
        "k": "FLOAT",
        "m": "STRING",
    }
    # Lagent typed List[str] as STRING; here the item type is kept for JSON Schema.
    assert p["e"]["items"] == {"type": "STRING"} and p["f"]["items"] == {"type": "NUMBER"}
    assert f.api_description["required"] == ["a", "b", "c", "d", "e", "f"]


def test_literal_enum_and_annotated() -> None:
    @tool_api
    def f(
        mode: Literal["fast", "slow"],
        color: Color,
        n: Annotated[int, "how many"],
        tags: Annotated[list[Literal[1, 2]], "which tags"] = (),  # type: ignore[assignment]
    ) -> None:
        """Pick.

        Args:
            mode: speed
            color: a color
            n (str): hint wins over this docstring type
        """

    p = params(f)
    assert p["mode"] == {"name": "mode", "type": "STRING", "description": "speed", "enum": ["fast", "slow"]}
    assert p["color"] == {"name": "color", "type": "STRING", "description": "a color", "enum": ["red", "green"]}
    assert p["n"] == {"name": "n", "type": "NUMBER", "description": "how many"}
    assert p["tags"]["type"] == "Array" and p["tags"]["items"] == {"type": "NUMBER", "enum": [1, 2]}
    assert p["tags"]["description"] == "which tags"


def test_docstring_types_when_there_are_no_hints() -> None:
    @tool_api
    def f(a, b, c, d, e, g=None):  # type: ignore[no-untyped-def]
        """Doc.

        Args:
            a (int): first
            b (list[str]): second
            c (bool, optional): third
            d (Optional[float]): fourth
            e (:class:`str`): fifth
            g: no type at all
        """

    p = params(f)
    assert [p[n]["type"] for n in "abcdeg"] == ["NUMBER", "Array", "BOOLEAN", "FLOAT", "STRING", "STRING"]
    assert p["b"]["items"] == {"type": "STRING"}
    assert p["e"]["description"] == "fifth"


def test_string_annotations_resolve() -> None:
    namespace: dict[str, Any] = {}
    exec(
        "from __future__ import annotations\n"
        "from plait.actions import tool_api\n"
        "@tool_api\n"
        "def f(a: list[str], b: 'Unknown | None' = None, c: 'int' = 0):\n"
        "    '''Doc.'''\n",
        namespace,
    )
    p = params(namespace["f"])
    assert p["a"]["type"] == "Array" and p["a"]["items"] == {"type": "STRING"}
    assert p["b"]["type"] == "STRING"  # unresolvable name: the default type
    assert p["c"]["type"] == "NUMBER"


def test_self_session_id_varargs_and_filters_are_hidden() -> None:
    class T(BaseAction, register=False):
        @tool_api(exclude_arguments=["secret"])
        def a(self, x: int, secret: str = "", session_id: int = 0, *args: Any, **kwargs: Any) -> None:
            """A."""

        @tool_api(include_arguments=["y"])
        def b(self, y: int, z: int = 0) -> None:
            """B."""

    apis = {api["name"]: api for api in T.__tool_description__["api_list"]}
    assert [p["name"] for p in apis["a"]["parameters"]] == ["x"]
    assert [p["name"] for p in apis["b"]["parameters"]] == ["y"]


def test_docstring_parser_details() -> None:
    doc = parse_docstring(
        """Line one.

        Line two with `code`.

        Args:
            query (:class:`str`): The city name
                to query.

        Returns:
            bold_text (str): bold text

        Raises:
            ValueError: never
        """,
        returns_named_value=True,
    )
    assert doc.description == "Line one.\n\nLine two with `code`."
    assert doc.args["query"].annotation == "str"
    assert doc.args["query"].description == "The city name\nto query."
    assert [(r.name, r.annotation, r.description) for r in doc.returns] == [("bold_text", "str", "bold text")]
    assert parse_docstring(None).description == "" and parse_docstring("").args == {}


def test_no_docstring_still_describes() -> None:
    @tool_api
    def f(x: int, y="a"):  # type: ignore[no-untyped-def]
        return x

    assert f.api_description == {
        "name": "f",
        "description": "",
        "parameters": [
            {"name": "x", "type": "NUMBER", "description": ""},
            {"name": "y", "type": "STRING", "description": ""},
        ],
        "required": ["x"],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("str", {"type": "STRING"}),
        ("List[int]", {"type": "Array", "items": {"type": "NUMBER"}}),
        ("typing.Optional[bool]", {"type": "BOOLEAN"}),
        ("int | None", {"type": "NUMBER"}),
        ("dict", {"type": "OBJECT"}),
        ("Literal['a', 'b']", {"type": "STRING", "enum": ["a", "b"]}),
        ("SomeClass", {}),
    ],
)
def test_type_strings(text: str, expected: dict[str, Any]) -> None:
    assert describe_type_string(text) == expected


def test_async_api_and_async_run_are_described() -> None:
    class AsyncTool(BaseAction, register=False):
        async def run(self, q: str) -> str:
            """Ask.

            Args:
                q: question
            """
            return q

    assert AsyncTool.__tool_description__ == {
        "name": "AsyncTool",
        "description": "Ask.",
        "parameters": [{"name": "q", "type": "STRING", "description": "question"}],
        "required": ["q"],
    }


def test_run_and_other_apis_conflict() -> None:
    with pytest.raises(UserError, match="both `run` and other tool APIs"):

        class Both(BaseAction, register=False):
            @tool_api
            def run(self, x: str) -> str:
                return x

            @tool_api
            def other(self, x: str) -> str:
                return x


def test_inheritance_keeps_and_overrides_apis() -> None:
    class Base(BaseAction, register=False):
        """Base kit."""

        @tool_api
        def a(self, x: int) -> int:
            """A."""
            return x

        @tool_api
        def b(self, x: int) -> int:
            """B."""
            return x

    class Child(Base, register=False):
        def a(self, x: int) -> int:  # override without decorator and docstring: inherits A's description
            return x + 1

        @tool_api
        def c(self) -> str:
            """C."""
            return "c"

    desc = Child.__tool_description__
    assert desc["description"] == "Base kit."  # inherited class docstring
    assert [api["name"] for api in desc["api_list"]] == ["a", "b", "c"]
    assert desc["api_list"][0]["description"] == "A."
    assert Child()({"x": 1}, "a").result == [{"type": "text", "content": "2"}]


def test_class_without_docstring_has_empty_description() -> None:
    class MagicMaker(BaseAction, register=False):
        @tool_api
        def generate_image(self, keywords: str) -> str:
            """Run magicmaker and get the generated image according to the keywords.

            Args:
                keywords (:class:`str`): the keywords to generate image
            """
            return keywords

    assert MagicMaker.__tool_description__["description"] == ""


def test_public_module_paths() -> None:
    import plait.exceptions
    from plait.actions import base_action, parser

    assert parser.ParseError is plait.exceptions.ParseError
    assert {"BaseAction", "tool_api", "AsyncActionMixin"} <= set(base_action.__all__)
    assert {"BaseParser", "JsonParser", "TupleParser", "ParseError"} <= set(parser.__all__)
    import plait.actions as actions

    for name in ("ActionExecutor", "AsyncActionExecutor", "InvalidAction", "NoAction", "FinishAction"):
        assert name in actions.__all__ and getattr(actions, name) is not None
