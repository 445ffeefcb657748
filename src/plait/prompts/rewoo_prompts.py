"""Prompts of `plait.agents.ReWOO` (planner, format hint, solver, failure message).

Planner placeholders: ``{action_info}`` (one line per tool) and ``{tool_names}``; hint
placeholders: ``{error}`` and ``{tool_names}``; solver placeholders: ``{question}`` and
``{worklog}`` (the plans with their evidence). Literal braces are doubled.
"""

from __future__ import annotations

__all__ = ["REWOO_FAILURE", "REWOO_FORMAT_HINT", "REWOO_PLANNER_PROMPT", "REWOO_SOLVER_PROMPT"]

REWOO_PLANNER_PROMPT = """You are the planner of a team. For the user's question, write a plan that gathers the \
evidence needed to answer it with the tools below. The plan is run for you afterwards; do not answer the question \
yourself.

Tools (write an input as plain text for a tool with one argument, or as a JSON object of its arguments):
{action_info}

Format: for every step write one line "Plan: <what the step is for>" followed by exactly one line \
"#E<n> = <tool>[<input>]" that stores the step's result in the variable #E<n>. An input may use the result of an \
earlier step by writing its variable. Example:
Plan: Find out which city hosted the 2012 Summer Olympics.
#E1 = Search[host city of the 2012 Summer Olympics]
Plan: Look up the current weather there.
#E2 = Weather[#E1]

Use only these tools: {tool_names}. Reply with the plan only."""

REWOO_FORMAT_HINT = """Your plan could not be used: {error}
Write the whole plan again. Every step is a "Plan: ..." line followed by exactly one "#E<n> = Tool[input]" line; \
the square brackets around the input are required, and Tool is one of: {tool_names}. Reply with the plan only."""

REWOO_SOLVER_PROMPT = """Answer the question below. A planner split it into steps and the results (evidence) of \
those steps were collected for you. Evidence can be incomplete or wrong, or report an error: use it with judgement.

{worklog}

Question: {question}
Reply with the answer only."""

REWOO_FAILURE = """I could not work out a usable plan for this request after {attempts} attempt(s). \
The last problem was: {error}"""
