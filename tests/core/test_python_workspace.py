"""python_execute on the user's workspace, in the real CPython sandbox: the files are in the
code's folder, what it writes under out/ is kept (recorded by name, size and sha256), and
nothing else it does reaches the workspace."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, cast

import pytest
from support import default_tools, make_agent, of_type, plan_reply, step

from agent_py import AgentConfig, AgentState, ScriptedLLM
from agent_py.core.llm import CallPurpose
from agent_py.core.profiles import SMALL
from agent_py.core.tool import ToolContext, ToolError, ToolResult
from agent_py.core.workspace import FolderWorkspace
from agent_py.tools.code_files import file_heads
from agent_py.tools.files import ReadFile
from agent_py.tools.python import PythonExecutor
from agent_py.tools.python_runner import SubprocessPyRunner

CTX = ToolContext(model=cast(Any, None))  # python_execute asks no model
SMALL_CONFIG = AgentConfig(
    plan_shape=SMALL.plan_shape, strategy=SMALL.strategy, budgets=SMALL.budgets
)
ORDERS = "order,amount\nA-1,12.50\nA-2,7.25\nA-3,30\n"


@pytest.fixture
def workspace(tmp_path: Path) -> FolderWorkspace:
    (tmp_path / "orders.csv").write_text(ORDERS)
    return FolderWorkspace(tmp_path)


def stored(root: Path) -> list[str]:
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())


async def agent_on(
    workspace: FolderWorkspace, llm: ScriptedLLM, *, with_reader: bool = False
) -> tuple[Any, Any]:
    """An agent of the small profile whose python_execute (and read_file, ``with_reader``)
    works on ``workspace``, and its event sink."""
    files = await workspace.files()
    python = PythonExecutor(SubprocessPyRunner(), workspace=workspace, files=files)
    reader = [ReadFile(workspace, files)] if with_reader else []
    return make_agent(llm, *default_tools(), *reader, python, config=SMALL_CONFIG)


async def run_in(workspace: FolderWorkspace, code: str) -> ToolResult:
    files = await workspace.files()
    tool = PythonExecutor(SubprocessPyRunner(), workspace=workspace, files=files, timeout_s=10)
    return await tool.run({"code": code}, CTX)


async def test_the_code_reads_the_users_file_by_name(workspace: FolderWorkspace) -> None:
    code = "import csv\nsum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))"
    result = await run_in(workspace, code)
    assert result.data == 49.75
    assert "files" not in result.meta  # it wrote nothing


async def test_what_the_code_writes_under_out_is_kept_and_recorded(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    code = (
        "import csv, json\n"
        "open('scratch.txt', 'w').write('not for the user')\n"
        "rows = list(csv.DictReader(open('orders.csv')))\n"
        "json.dump(rows, open('out/orders.json', 'w'))\n"
    )
    result = await run_in(workspace, code)
    written = (tmp_path / "out" / "orders.json").read_bytes()
    assert written.startswith(b'[{"order": "A-1"')
    record = {"name": "out/orders.json", "size": len(written)}
    assert result.meta["files"] == [{**record, "sha256": hashlib.sha256(written).hexdigest()}]
    # A file written and nothing printed is a result, not "the code gave no value".
    assert result.data == f"files written: out/orders.json ({len(written)} bytes)"
    assert not (tmp_path / "scratch.txt").exists()  # only out/ comes back
    assert (tmp_path / "orders.csv").read_text() == ORDERS


async def test_the_users_file_changed_in_place_stays_as_it_was(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    result = await run_in(workspace, "open('orders.csv', 'w').write('gone')\n1")
    assert result.data == 1
    assert (tmp_path / "orders.csv").read_text() == ORDERS


async def test_an_output_of_an_earlier_call_is_read_and_an_unchanged_one_not_written_again(
    workspace: FolderWorkspace,
) -> None:
    await run_in(workspace, "open('out/n.txt', 'w').write('41')")
    result = await run_in(workspace, "int(open('out/n.txt').read()) + 1")
    assert result.data == 42
    assert "files" not in result.meta


async def test_a_missing_file_fails_with_the_python_error(workspace: FolderWorkspace) -> None:
    with pytest.raises(ToolError, match=r"FileNotFoundError.*prices\.csv"):
        await run_in(workspace, "open('prices.csv').read()")


async def test_an_output_over_the_quota_fails_with_why_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    (tmp_path / "orders.csv").write_text(ORDERS)
    small = FolderWorkspace(tmp_path, max_bytes=len(ORDERS) + 100)
    with pytest.raises(ToolError, match=r"out/big.txt could not be kept: .*does not fit"):
        await run_in(small, "open('out/big.txt', 'w').write('x' * 1000)")
    assert stored(tmp_path) == ["orders.csv"]
    assert (tmp_path / "orders.csv").read_text() == ORDERS


async def test_the_description_names_the_files_and_out(workspace: FolderWorkspace) -> None:
    tool = PythonExecutor(SubprocessPyRunner(), workspace=workspace, files=await workspace.files())
    assert "orders.csv (39 bytes)" in tool.description
    assert "out/" in tool.description and "no numpy" in tool.description
    # The code call is shown the input's description, not the tool's: it says so too.
    code = tool.input_schema["properties"]["code"]["description"]
    assert "there is no pandas or numpy" in code and "(orders.csv)" in code
    # Without a workspace the sandbox has no files, and says so.
    assert "no network, files or storage" in PythonExecutor(SubprocessPyRunner()).description


async def test_a_javascript_step_on_the_users_files_runs_as_python_which_opens_them(
    workspace: FolderWorkspace,
) -> None:
    """The JavaScript sandbox has no files: while the workspace holds some, the plan's
    JavaScript step goes to python_execute, whose code call writes code that opens them."""
    code = "const fs = require('fs'); return fs.readFileSync('orders.csv', 'utf8');"
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "javascript_execute", {"code": code})], needs="compute"),
            "arguments": (
                "```python\nimport csv\n"
                "sum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))\n```"
            ),
        }
    )
    agent, sink = await agent_on(workspace, llm)

    result = await agent.task("What is the total of the amount column?")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "49.75"
    moved = of_type(sink.events, "plan_to_code")
    assert moved and moved[0].meta["moved"] == {"s1": "python_execute"}
    assert [s.tool for s in result.steps] == ["python_execute"]


async def test_without_files_javascript_steps_stay_javascript(tmp_path: Path) -> None:
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "javascript_execute", {"code": "return 6 * 7;"})])}
    )
    python = PythonExecutor(SubprocessPyRunner(), workspace=FolderWorkspace(tmp_path))
    agent, sink = make_agent(llm, *default_tools(), python, config=SMALL_CONFIG)

    result = await agent.task("Use JavaScript to compute 6 times 7.")

    assert result.answer == "42" and [s.tool for s in result.steps] == ["javascript_execute"]
    assert not of_type(sink.events, "plan_to_code")


async def test_a_look_up_of_the_users_files_planned_with_python_is_not_declined(
    workspace: FolderWorkspace,
) -> None:
    """A task declared look_up needs a tool that reads data; python_execute on the workspace
    reads the user's files, and the plan's prompt says which tools can look up."""
    code = "import csv\nlen(list(csv.DictReader(open('orders.csv'))))"
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "python_execute", {"code": code})], needs="look_up")}
    )
    agent, _ = await agent_on(workspace, llm)

    result = await agent.task("How many orders are in orders.csv?")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "3"
    system = next(m for m, call in llm.calls if call.purpose == "plan")[0]["content"]
    assert "a server's tool or python_execute can look up" in system


async def test_the_code_call_is_shown_how_the_users_text_files_begin(tmp_path: Path) -> None:
    """The columns the data has, in the code call only: code that sums a column uses its
    real name, and code asked for a column that is not there can say so."""
    (tmp_path / "orders.csv").write_text(ORDERS)
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "long.txt").write_text("x" * 500 + "\nsecond\nthird\nfourth\n")
    workspace = FolderWorkspace(tmp_path)
    files = await workspace.files()
    heads = await file_heads(workspace, files)
    assert heads == {
        "orders.csv": "order,amount\nA-1,12.50\nA-2,7.25",
        "long.txt": "x" * 200 + "\nsecond\nthird",
    }
    python = PythonExecutor(SubprocessPyRunner(), workspace=workspace, files=files, heads=heads)
    code = "import csv\nsum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))"
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "python_execute", {})], needs="compute"),
            "arguments": f"```python\n{code}\n```",
        }
    )
    agent, _ = make_agent(llm, *default_tools(), python, config=SMALL_CONFIG)

    result = await agent.task("What is the total of the amount column in orders.csv?")

    assert result.answer == "49.75", result.error
    plan_prompt = json.dumps(next(m for m, call in llm.calls if call.purpose == "plan"))
    code_prompt = json.dumps(next(m for m, call in llm.calls if call.purpose == "arguments"))
    assert "A-2,7.25" in code_prompt and "orders.csv:\\norder,amount" in code_prompt
    # The plan's prompt gets each file's first line (its columns), never more.
    assert "orders.csv (39 bytes, first line: order,amount)" in plan_prompt
    assert "A-2,7.25" not in plan_prompt and "photo.png (" in plan_prompt
    assert "raise an error that says what is missing" in code_prompt


async def test_code_on_a_column_the_file_lacks_fails_the_run_with_the_error(
    workspace: FolderWorkspace,
) -> None:
    code = "import csv\nsum(float(r['discount']) for r in csv.DictReader(open('orders.csv')))"
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "python_execute", {"code": code})], needs="compute"),
            "arguments": f"```python\n{code}\n```",  # the code call writes it the same
        }
    )
    agent, _ = await agent_on(workspace, llm)

    result = await agent.task("What is the total of the discount column in orders.csv?")

    assert result.state is AgentState.FAILED and not result.answer
    assert "KeyError: 'discount'" in (result.error or "")


async def test_a_look_up_of_a_named_file_planned_on_the_writer_goes_to_python(
    workspace: FolderWorkspace,
) -> None:
    """The writer cannot open files: a look-up task planned on it, in a question that names
    one of the user's files (here in Chinese around the name), runs as python_execute."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "llm_generator", {"prompt": "return orders.csv.split('\\n').last();"})],
                needs="look_up",
            ),
            "arguments": "```python\nopen('orders.csv').read().splitlines()[-1]\n```",
        }
    )
    agent, sink = await agent_on(workspace, llm)

    result = await agent.task("orders.csv 的最后一行是什么？")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "A-3,30"
    assert of_type(sink.events, "plan_to_code")[0].meta["moved"] == {"s1": "python_execute"}


async def test_a_look_up_of_anything_but_a_named_file_stays_declined(
    workspace: FolderWorkspace,
) -> None:
    """With files in the workspace, a look-up of live data the writer was to make up is still
    no task for python: the run ends failed, saying no tool here can do it."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "llm_generator", {"prompt": "Today's weather"})], needs="look_up"
            )
        }
    )
    agent, sink = await agent_on(workspace, llm)

    result = await agent.task("What is the weather in Paris today?")

    assert result.state is AgentState.FAILED
    assert "no tool here can do that" in (result.error or "")
    assert not of_type(sink.events, "plan_to_code")


async def test_an_answer_that_drops_what_the_code_computed_for_a_number_of_the_file_fails(
    workspace: FolderWorkspace,
) -> None:
    """The code found nothing to sum and printed 0; the answer call took 12.50 from the file
    read beside it. The run ends failed, saying what was computed."""
    code = (
        "import csv\n"
        "print(sum(float(r.get('discount') or 0) for r in csv.DictReader(open('orders.csv'))))"
    )
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [
                    step("s1", "read_file", {"path": "orders.csv"}),
                    step("s2", "python_execute", {"code": code}),
                ],
                answer="number",
                needs="compute",
            ),
            "answer": "The total of the discount column is 12.50.",
        }
    )
    agent, _ = await agent_on(workspace, llm, with_reader=True)

    result = await agent.task("What is the total of the discount column in orders.csv?")

    assert result.state is AgentState.FAILED, result.answer
    assert "12.50" in (result.error or "") and "computed '0" in (result.error or "")


async def test_a_number_from_a_file_the_plan_only_read_is_computed_by_code(
    workspace: FolderWorkspace,
) -> None:
    """Seen (0.5B): the plan only read the file and the answer's writer gave a value of it
    for the mean. A number answer from read files gets a code step that computes it."""
    code = "import csv\nsum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))"
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "read_file", {"path": "orders.csv"})], answer="number", needs="look_up"
            ),
            "arguments": f"```python\n{code}\n```",
        }
    )
    agent, sink = await agent_on(workspace, llm, with_reader=True)

    result = await agent.task("Wie hoch ist die Summe der Beträge in orders.csv?")

    assert result.state is AgentState.COMPLETED, result.error
    # The code's number, handed over as it is: the step runs in a turn after the read.
    assert result.answer == "49.75"
    assert of_type(sink.events, "plan_to_code")[0].meta["added"] == {"s2": "python_execute"}
    assert of_type(sink.events, "plan_ordered")[0].meta["ordered"] == {"s2": "t1_2"}
    assert [s.tool for s in result.steps] == ["read_file", "python_execute"]


async def test_the_code_step_added_after_a_failed_read_is_skipped_without_a_code_call(
    workspace: FolderWorkspace,
) -> None:
    """The added code step works from what the task read: it runs after the read, and a
    read that failed skips it (no code written for a file that is not there)."""
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "read_file", {"path": "budget.csv"})], answer="number", needs="look_up"
            )
        }
    )
    agent, sink = await agent_on(workspace, llm, with_reader=True)

    result = await agent.task("Add up the amounts in budget.csv.")

    assert result.state is AgentState.FAILED
    assert "budget.csv" in (result.error or "")
    assert "skipped: depends on s1, which failed" in (result.error or "")
    assert of_type(sink.events, "plan_ordered")[0].meta["ordered"] == {"s2": "t1_2"}
    assert CallPurpose.ARGUMENTS not in {call.purpose for _, call in llm.calls}


async def test_a_text_answer_from_a_read_file_gets_no_code_step(
    workspace: FolderWorkspace,
) -> None:
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply(
                [step("s1", "read_file", {"path": "orders.csv"})], answer="text", needs="look_up"
            ),
            "answer": "It lists three orders, A-1 to A-3.",
        }
    )
    agent, sink = await agent_on(workspace, llm, with_reader=True)

    result = await agent.task("What is orders.csv about?")

    assert result.state is AgentState.COMPLETED, result.error
    assert [s.tool for s in result.steps] == ["read_file"]
    assert not of_type(sink.events, "plan_to_code")
