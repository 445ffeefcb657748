from __future__ import annotations

import sys
import threading

import pytest

from plait.exceptions import MissingDependencyError, UserError
from plait.prompts import PromptTemplate


def test_str_format_mode_renders_and_lists_placeholders() -> None:
    tpl = PromptTemplate('Tools:\n{tools}\nAnswer in {language}. Example: {{"a": 1}} {tools}')
    assert tpl.placeholders == ["tools", "language"]
    assert (
        tpl.format(tools="search", language="English") == 'Tools:\nsearch\nAnswer in English. Example: {"a": 1} search'
    )


def test_attribute_index_and_nested_spec_placeholders_count_by_root_name() -> None:
    tpl = PromptTemplate("{user.name} {items[0]} {value:>{width}}")
    assert tpl.placeholders == ["user", "items", "value", "width"]

    class User:
        name = "ada"

    assert tpl.format(user=User(), items=["x"], value="v", width=3) == "ada x   v"


def test_unknown_keys_are_named() -> None:
    tpl = PromptTemplate("Hello {name}")
    with pytest.raises(UserError, match=r"unknown variable\(s\) \['nmae', 'zzz'\]"):
        tpl.format(name="a", nmae="b", zzz=1)


def test_missing_placeholders_are_named() -> None:
    tpl = PromptTemplate("{greeting} {name}, {question}")
    with pytest.raises(UserError, match=r"missing value\(s\) for placeholder\(s\) \['name', 'question'\]"):
        tpl.format(greeting="hi")


def test_unknown_and_missing_reported_together() -> None:
    with pytest.raises(UserError) as info:
        PromptTemplate("{a}").format(b=1)
    assert "['b']" in str(info.value)
    assert "['a']" in str(info.value)


def test_render_failures_become_user_errors() -> None:
    tpl = PromptTemplate("{user.name}")
    with pytest.raises(UserError, match="AttributeError"):
        tpl.format(user=object())


@pytest.mark.parametrize("template", ["{", "a } b", "{0}", "{}", "{:>3}"])
def test_bad_or_positional_templates_are_rejected(template: str) -> None:
    with pytest.raises(UserError):
        PromptTemplate(template)


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(UserError, match="format_type"):
        PromptTemplate("x", format_type="mustache")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="must be a str"):
        PromptTemplate(42)  # type: ignore[arg-type]


def test_template_without_placeholders() -> None:
    assert PromptTemplate("plain").format() == "plain"
    assert PromptTemplate("plain").placeholders == []


def test_jinja_mode() -> None:
    tpl = PromptTemplate("{% for t in tools %}- {{ t }}\n{% endfor %}{{ footer }}", format_type="jinja")
    assert tpl.placeholders == ["footer", "tools"]
    assert tpl.format(tools=["search", "calc"], footer="Bye") == "- search\n- calc\nBye"
    with pytest.raises(UserError, match=r"\['footer'\]"):
        tpl.format(tools=[])
    with pytest.raises(UserError, match=r"\['extra'\]"):
        tpl.format(tools=[], footer="", extra=1)


def test_jinja_json_braces_are_literal_and_strict_undefined() -> None:
    tpl = PromptTemplate('{"name": "{{ name }}"} {{ user.missing }}', format_type="jinja")
    with pytest.raises(UserError, match="cannot render"):
        tpl.format(name="x", user={})
    assert PromptTemplate('{"name": "{{ name }}"}', format_type="jinja").format(name="x") == '{"name": "x"}'


def test_jinja_syntax_error_is_user_error() -> None:
    with pytest.raises(UserError, match="invalid Jinja template"):
        PromptTemplate("{% for x in %}", format_type="jinja")


def test_jinja_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)
    monkeypatch.setitem(sys.modules, "jinja2.meta", None)
    with pytest.raises(MissingDependencyError) as info:
        PromptTemplate("{{ x }}", format_type="jinja")
    assert info.value.package == "jinja2"
    assert info.value.extra == "jinja"
    assert "plait[jinja]" in str(info.value)
    # str.format mode never needs jinja2.
    assert PromptTemplate("{x}").format(x=1) == "1"


def test_format_is_reentrant() -> None:
    tpl = PromptTemplate("{who} says {what}")
    before = dict(vars(tpl))
    results: dict[int, str] = {}

    def render(i: int) -> None:
        for _ in range(200):
            results[i] = tpl.format(who=f"agent{i}", what=str(i))

    threads = [threading.Thread(target=render, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {i: f"agent{i} says {i}" for i in range(8)}
    assert vars(tpl) == before


def test_repr() -> None:
    assert repr(PromptTemplate("{a}")) == "PromptTemplate('{a}', format_type='json')"
