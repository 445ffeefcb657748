"""Seed 003 (the Action docs) as tests: every printed dict must match exactly, key order included.

The seed's code and printed dicts are kept as the seed writes them (hence no formatting).
"""
# fmt: off

from __future__ import annotations

from _action_support import call_action, call_executor, make_executor, same

from plait.actions import ActionExecutor, JsonParser, TupleParser
from plait.actions.base_action import BaseAction, tool_api
from plait.schema import ActionReturn, ActionStatusCode

# The seed prints the Chinese hint of Lagent's code before 0.5; every Lagent 0.5.x (the code the
# seed documents today, and what reaches prompts) adds this English one (issue 38).
JSON_HINT = (
    "If you call this tool, you must pass arguments in the JSON format {key: value}, "
    "where the key is the parameter name."
)


# ---- "Make Functions Tools" ---------------------------------------------------------------------
def test_tool_api_on_bold() -> None:
    @tool_api
    def bold(text: str) -> str:
        """make text bold

        Args:
            text (str): input text

        Returns:
            str: bold text
        """
        return '**' + text + '**'

    assert same(
        bold.api_description,
        {'name': 'bold',
         'description': 'make text bold',
         'parameters': [{'name': 'text',
                         'type': 'STRING',
                         'description': 'input text'}],
         'required': ['text']},
    )
    assert bold("x") == "**x**"  # still a plain function


def test_returns_named_value() -> None:
    @tool_api(returns_named_value=True)
    def bold(text: str) -> str:
        """make text bold

        Args:
            text (str): input text

        Returns:
            bold_text (str): bold text
        """
        return '**' + text + '**'

    assert same(
        bold.api_description,
        {'name': 'bold',
         'description': 'make text bold',
         'parameters': [{'name': 'text',
                         'type': 'STRING',
                         'description': 'input text'}],
         'required': ['text'],
         'return_data': [{'name': 'bold_text',
                          'description': 'bold text',
                          'type': 'STRING'}]},
    )


def test_explode_return() -> None:
    @tool_api(explode_return=True)
    def list_args(a: str, b: int, c: float = 0.0) -> dict:
        """Return arguments in dict format

        Args:
            a (str): a
            b (int): b
            c (float): c

        Returns:
            dict: input arguments

                - a (str): a
                - b (int): b
                - c: c
        """
        return {'a': a, 'b': b, 'c': c}

    assert same(
        list_args.api_description,
        {'name': 'list_args',
         'description': 'Return arguments in dict format',
         'parameters': [{'name': 'a', 'type': 'STRING', 'description': 'a'},
                        {'name': 'b', 'type': 'NUMBER', 'description': 'b'},
                        {'name': 'c', 'type': 'FLOAT', 'description': 'c'}],
         'required': ['a', 'b'],
         'return_data': [{'name': 'a', 'description': 'a', 'type': 'STRING'},
                         {'name': 'b', 'description': 'b', 'type': 'NUMBER'},
                         {'name': 'c', 'description': 'c'}]},
    )


# ---- "Interface Design" ---------------------------------------------------------------------------
def test_base_action_with_a_description_dict() -> None:
    action = BaseAction(
        {
            'name': 'bold',
            'description': 'a function used to make text bold',
            'parameters': [
                {
                    'name': 'text', 'type': 'STRING', 'description': 'input content'
                }
            ],
            'required': ['text']
        }
    )
    assert same(
        action.description,
        {'name': 'bold',
         'description': 'a function used to make text bold',
         'parameters': [{'name': 'text',
                         'type': 'STRING',
                         'description': 'input content'}],
         'required': ['text'],
         'parameter_description': JSON_HINT},
    )
    assert action.name == 'bold' and not action.is_toolkit and action.enable
    # A description without an implementation is an error return, not an exception.
    ret = action({'text': 'x'})
    assert ret.state == ActionStatusCode.API_ERROR and "no implementation" in ret.errmsg


# ---- "Custom Action" (verbatim) -----------------------------------------------------------------------
class Bold(BaseAction):
    def run(self, text: str):
        """make text bold

        Args:
            text (str): input text

        Returns:
            str: bold text
        """
        return '**' + text + '**'


class PhraseEmphasis(BaseAction):
    """a toolkit which provides different styles of text emphasis"""

    @tool_api
    def bold(self, text):
        """make text bold

        Args:
            text (str): input text

        Returns:
            str: bold text
        """
        return '**' + text + '**'

    @tool_api
    def italic(self, text):
        """make text italic

        Args:
            text (str): input text

        Returns:
            str: italic text
        """
        return '*' + text + '*'


def test_class_descriptions() -> None:
    assert same(
        Bold.__tool_description__,
        {'name': 'Bold',
         'description': 'make text bold',
         'parameters': [{'name': 'text', 'type': 'STRING', 'description': 'input text'}],
         'required': ['text']},
    )
    assert same(
        PhraseEmphasis.__tool_description__,
        {'name': 'PhraseEmphasis',
         'description': 'a toolkit which provides different styles of text emphasis',
         'api_list': [{'name': 'bold',
                       'description': 'make text bold',
                       'parameters': [{'name': 'text', 'type': 'STRING', 'description': 'input text'}],
                       'required': ['text']},
                      {'name': 'italic',
                       'description': 'make text italic',
                       'parameters': [{'name': 'text', 'type': 'STRING', 'description': 'input text'}],
                       'required': ['text']}]},
    )
    assert Bold().is_toolkit is False and PhraseEmphasis().is_toolkit is True


# ---- "Auto-registration" ------------------------------------------------------------------------------
def test_list_tools_and_get_tool() -> None:
    from plait.actions import get_tool, list_tools, register_tool

    tools = list_tools()
    assert tools[:4] == ['BaseAction', 'InvalidAction', 'NoAction', 'FinishAction']
    assert {'Bold', 'PhraseEmphasis'} <= set(tools)

    register_tool(PhraseEmphasis)  # another test module may have defined a class of the same name since
    action = get_tool('PhraseEmphasis')
    assert same(
        action.description,
        {'name': 'PhraseEmphasis',
         'description': 'a toolkit which provides different styles of text emphasis',
         'api_list': [{'name': 'bold',
                       'description': 'make text bold',
                       'parameters': [{'name': 'text',
                                       'type': 'STRING',
                                       'description': 'input text'}],
                       'required': ['text'],
                       'parameter_description': JSON_HINT},
                      {'name': 'italic',
                       'description': 'make text italic',
                       'parameters': [{'name': 'text',
                                       'type': 'STRING',
                                       'description': 'input text'}],
                       'required': ['text'],
                       'parameter_description': JSON_HINT}]},
    )


# ---- "Run a Tool" (with Bold standing in for IPythonInterpreter) -----------------------------------------
def test_run_a_tool_json_and_tuple(mode: str) -> None:
    action1 = Bold()
    ret = call_action(mode, action1, '{"text": "import math;math.sqrt(100)"}')
    assert ret.result == [{'type': 'text', 'content': '**import math;math.sqrt(100)**'}]
    ret = call_action(mode, action1, {'text': 'import math;math.sqrt(100)'})
    assert ret.result == [{'type': 'text', 'content': '**import math;math.sqrt(100)**'}]
    assert isinstance(ret, ActionReturn) and ret.args == {'text': 'import math;math.sqrt(100)'} and ret.type == 'Bold'

    action2 = Bold(parser=TupleParser)
    ret = call_action(mode, action2, '("import math;math.sqrt(100)", )')
    assert ret.result == [{'type': 'text', 'content': '**import math;math.sqrt(100)**'}]
    ret = call_action(mode, action2, ('import math;math.sqrt(100)',))
    assert ret.result == [{'type': 'text', 'content': '**import math;math.sqrt(100)**'}]
    assert action2.description['parameter_description'] != JSON_HINT
    assert isinstance(action1.parser, JsonParser)


# ---- "Dynamic Invocation" -----------------------------------------------------------------------------
def test_executor_name_flattening(mode: str) -> None:
    executor = make_executor(mode, actions=[PhraseEmphasis(), Bold()])
    assert isinstance(executor, ActionExecutor)
    info = executor.get_actions_info()
    assert same(
        info,
        [{'name': 'PhraseEmphasis.bold',
          'description': 'make text bold',
          'parameters': [{'name': 'text', 'type': 'STRING', 'description': 'input text'}],
          'required': ['text'],
          'parameter_description': JSON_HINT},
         {'name': 'PhraseEmphasis.italic',
          'description': 'make text italic',
          'parameters': [{'name': 'text', 'type': 'STRING', 'description': 'input text'}],
          'required': ['text'],
          'parameter_description': JSON_HINT},
         {'name': 'Bold',
          'description': 'make text bold',
          'parameters': [{'name': 'text', 'type': 'STRING', 'description': 'input text'}],
          'required': ['text'],
          'parameter_description': JSON_HINT}],
    )
    ret = call_executor(executor, 'Bold', '{"text": "import math;math.sqrt(100)"}')
    assert ret.result == [{'type': 'text', 'content': '**import math;math.sqrt(100)**'}]
    ret = call_executor(executor, 'PhraseEmphasis.italic', '{"text": "x"}')
    assert ret.result == [{'type': 'text', 'content': '*x*'}] and ret.type == 'PhraseEmphasis.italic'
