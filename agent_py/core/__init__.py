"""The agent's core, the same in CPython and Pyodide, and a leaf: it imports nothing of
agent_py outside itself (tests/core/test_layout.py holds it to that).

- the loop: ``agent`` (the public face), ``planner`` (plan, run, rethink, answer),
  ``execution`` and ``step_action`` (one step: its arguments, its tool, its outcome),
  ``review``, ``conversation`` (follow-up turns), ``concurrency``;
- plans: ``plan`` (the schema), ``references``, ``parsing``, ``plan_prompts``, ``prompts/``,
  ``answer_checks``;
- the model layer: ``llm`` (what an engine must do), ``model_client`` (how the agent asks it),
  ``budget``, ``grammar``, ``messages``, ``profiles``;
- what a tool is: ``tool``, ``registry``, ``tool_schema``, ``decline``; the built-in tools are
  in ``agent_py.tools``;
- records: ``events``, ``history``, ``errors``.
"""
