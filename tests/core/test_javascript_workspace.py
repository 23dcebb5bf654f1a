"""javascript_execute on the user's workspace, run by the real Node runner: the code reads the
files with readFile, what it writes with writeFile('out/…') is kept (recorded by name, size
and sha256), nothing else reaches the workspace, and the value and console keep the tool's
own caps though the written files travel back beside them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, cast

import pytest
from support import make_agent, of_type, plan_reply, step

from agent_py import AgentConfig, AgentState, ScriptedLLM
from agent_py.core.profiles import SMALL
from agent_py.core.tool import ToolContext, ToolError, ToolResult
from agent_py.core.workspace import FolderWorkspace
from agent_py.tools.javascript import WRITTEN_CHARS, JavascriptExecutor
from agent_py.tools.llm_generator import LLMGenerator
from agent_py.tools.node_runner import NodeRunner
from agent_py.tools.python import PythonExecutor
from agent_py.tools.python_runner import SubprocessPyRunner

CTX = ToolContext(model=cast(Any, None))  # javascript_execute asks no model
ORDERS = "order,amount\nA-1,12.50\nA-2,7.25\nA-3,30\n"
SUM = (
    "const rows = readFile('orders.csv').trim().split('\\n').slice(1);\n"
    "return rows.reduce((total, row) => total + Number(row.split(',')[1]), 0);"
)


@pytest.fixture
def workspace(tmp_path: Path) -> FolderWorkspace:
    (tmp_path / "orders.csv").write_text(ORDERS)
    return FolderWorkspace(tmp_path)


def stored(root: Path) -> list[str]:
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())


async def run_in(workspace: FolderWorkspace, code: str, **options: Any) -> ToolResult:
    files = await workspace.files()
    tool = JavascriptExecutor(NodeRunner(), workspace=workspace, files=files, **options)
    return await tool.run({"code": code}, CTX)


async def test_the_code_reads_the_users_file_by_name(workspace: FolderWorkspace) -> None:
    result = await run_in(workspace, SUM)
    assert result.data == 49.75
    assert "files" not in result.meta  # it wrote nothing
    # A path written as ./name is the same file; listFiles names what there is.
    assert (await run_in(workspace, "readFile('./orders.csv').length")).data == len(ORDERS)
    assert (await run_in(workspace, "listFiles()")).data == ["orders.csv"]


async def test_what_the_code_writes_under_out_is_kept_and_recorded(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    code = (
        "const [header, ...rows] = readFile('orders.csv').trim().split('\\n');\n"
        "const keys = header.split(',');\n"
        "const records = rows.map((row) => Object.fromEntries("
        "row.split(',').map((v, i) => [keys[i], v])));\n"
        "writeFile('out/orders.json', JSON.stringify(records));"
    )
    result = await run_in(workspace, code)
    written = (tmp_path / "out" / "orders.json").read_bytes()
    assert written.startswith(b'[{"order":"A-1","amount":"12.50"}')
    record = {"name": "out/orders.json", "size": len(written)}
    assert result.meta["files"] == [{**record, "sha256": hashlib.sha256(written).hexdigest()}]
    # A file written and nothing returned is a result, not "the code returned nothing".
    assert result.data == f"files written: out/orders.json ({len(written)} bytes)"
    assert result.content == result.data
    assert (tmp_path / "orders.csv").read_text() == ORDERS


async def test_text_is_written_as_utf8_beside_the_value_and_the_console(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    result = await run_in(
        workspace, "writeFile('out/note.txt', 'Größe: 3');\nconsole.log('ok');\n7"
    )
    assert (tmp_path / "out" / "note.txt").read_text(encoding="utf-8") == "Größe: 3"
    assert result.data == 7 and result.meta["console"] == ["ok"]
    assert result.content == "result: 7\nconsole:\nok\nfiles written: out/note.txt (10 bytes)"


async def test_code_written_for_nodes_fs_reads_and_writes_the_same_files(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    """require('fs') (what models trained on Node write) is the same workspace: read by
    name (a ./ or / before it is the workspace's root), written under out/ only."""
    code = (
        "const fs = require('node:fs');\n"
        "const text = fs.readFileSync('/orders.csv', 'utf8');\n"
        "const total = text.trim().split('\\n').slice(1)"
        ".reduce((t, row) => t + Number(row.split(',')[1]), 0);\n"
        "fs.writeFileSync('out/total.txt', String(total));\n"
        "const later = await require('fs/promises').readFile('./orders.csv', 'utf8');\n"
        "return [total, fs.existsSync('orders.csv'), fs.existsSync('nope.csv'),"
        " fs.readdirSync('.'), later.length];"
    )
    result = await run_in(workspace, code)
    assert result.data == [49.75, True, False, ["orders.csv"], len(ORDERS)]
    assert (tmp_path / "out" / "total.txt").read_text() == "49.75"
    with pytest.raises(ToolError, match=r"there is no module path here: .*readFile\(name\)"):
        await run_in(workspace, "require('path')")
    with pytest.raises(ToolError, match=r"written under out/"):
        await run_in(workspace, "require('fs').writeFileSync('orders.csv', '')")
    assert (tmp_path / "orders.csv").read_text() == ORDERS


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("readFile('prices.csv')", r"no file prices\.csv in the user's workspace.*orders\.csv"),
        ("writeFile('orders.csv', 'gone')", r"written under out/: writeFile\(\"out/orders\.csv\""),
        ("writeFile('out/a.json', {a: 1})", r"TypeError: writeFile takes the file's text"),
    ],
)
async def test_a_missing_file_or_a_write_outside_out_fails_and_changes_nothing(
    workspace: FolderWorkspace, tmp_path: Path, code: str, error: str
) -> None:
    with pytest.raises(ToolError, match=error):
        await run_in(workspace, code)
    assert stored(tmp_path) == ["orders.csv"]
    assert (tmp_path / "orders.csv").read_text() == ORDERS


@pytest.mark.parametrize(
    ("name", "error"),
    [("../escape.txt", r"outside the workspace"), ("orders.csv", r"which is not under out/")],
)
async def test_a_name_outside_out_sent_back_around_writefile_is_refused(
    workspace: FolderWorkspace, tmp_path: Path, name: str, error: str
) -> None:
    """Code evaluated as a script shares the wrapper's scope: what it puts into the written
    files itself is checked as the sandbox's answer, and kept nowhere outside out/."""
    with pytest.raises(ToolError, match=error):
        await run_in(workspace, f"__written[{name!r}] = 'x'; 1")
    assert stored(tmp_path) == ["orders.csv"]


async def test_the_value_and_the_console_keep_the_tools_cap(workspace: FolderWorkspace) -> None:
    printed = await run_in(workspace, "console.log('x'.repeat(500)); return 1;", output_limit=100)
    assert printed.meta["truncated"] is True
    assert sum(len(line) + 1 for line in printed.meta["console"]) <= 100
    returned = await run_in(workspace, "return 'y'.repeat(500);", output_limit=100)
    assert returned.meta["truncated"] is True and len(returned.data) == 100


async def test_files_over_what_one_call_carries_back_fail_and_keep_nothing(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    # Past what the runner may send back: the files' allowance and the value's own cap.
    code = f"writeFile('out/big.txt', 'z'.repeat({WRITTEN_CHARS + 30_000})); return 1;"
    with pytest.raises(ToolError, match=rf"over {WRITTEN_CHARS} characters: write less"):
        await run_in(workspace, code)
    assert stored(tmp_path) == ["orders.csv"]


async def test_an_output_over_the_quota_fails_with_why_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    (tmp_path / "orders.csv").write_text(ORDERS)
    small = FolderWorkspace(tmp_path, max_bytes=len(ORDERS) + 100)
    with pytest.raises(ToolError, match=r"out/big.txt could not be kept: .*does not fit"):
        await run_in(small, "writeFile('out/big.txt', 'x'.repeat(1000))")
    assert stored(tmp_path) == ["orders.csv"]


async def test_the_description_says_how_the_code_reads_and_writes_the_files(
    workspace: FolderWorkspace,
) -> None:
    tool = JavascriptExecutor(NodeRunner(), workspace=workspace, files=await workspace.files())
    assert "orders.csv (39 bytes, first line: order,amount)" not in tool.description  # no heads
    assert "orders.csv (39 bytes)" in tool.description and "readFile(" in tool.description
    assert tool.sees_files and tool.reads_data and tool.file_names == ("orders.csv",)
    code = tool.input_schema["properties"]["code"]["description"]
    assert "readFile(name)" in code and "(orders.csv)" in code and "writeFile('out/" in code
    # Without a workspace the sandbox has no files, and says so.
    plain = JavascriptExecutor(NodeRunner())
    assert "no page, files or storage" in plain.description and not plain.sees_files


async def test_without_files_code_has_no_file_functions(tmp_path: Path) -> None:
    """A sandbox said to have no files has none: no workspace, or an empty one."""
    for tool in (
        JavascriptExecutor(NodeRunner()),
        JavascriptExecutor(NodeRunner(), workspace=FolderWorkspace(tmp_path)),
    ):
        assert (await tool.run({"code": "typeof readFile"}, CTX)).data == "undefined"


async def page_agent(workspace: FolderWorkspace, llm: ScriptedLLM) -> tuple[Any, Any]:
    """An agent of the small profile whose code tools both see the workspace's files, as
    the page's registry has them (python_execute first)."""
    files = await workspace.files()
    return make_agent(
        llm,
        LLMGenerator(),
        PythonExecutor(SubprocessPyRunner(), workspace=workspace, files=files),
        JavascriptExecutor(NodeRunner(), workspace=workspace, files=files),
        config=AgentConfig(
            plan_shape=SMALL.plan_shape, strategy=SMALL.strategy, budgets=SMALL.budgets
        ),
    )


async def test_a_javascript_step_on_the_users_files_stays_javascript_and_answers(
    workspace: FolderWorkspace,
) -> None:
    """Where both code tools see the files (the page's registry), the plan's JavaScript step
    runs as JavaScript and reads them."""
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([step("s1", "javascript_execute", {"code": SUM})], needs="compute")}
    )
    agent, sink = await page_agent(workspace, llm)

    result = await agent.task("What is the total of the amount column of orders.csv?")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "49.75"
    assert [s.tool for s in result.steps] == ["javascript_execute"]
    assert not of_type(sink.events, "plan_to_code")


@pytest.mark.parametrize(
    "planned",
    [
        step("s1", "javascript_execute", goal="Add up the amount column"),
        step("s1", "llm_generator", {"prompt": "Add up the amount column"}),
    ],
    ids=["javascript without code", "writer of a compute task"],
)
async def test_code_written_afresh_on_the_files_is_python(
    workspace: FolderWorkspace, planned: dict[str, Any]
) -> None:
    """A code step whose code a code call will write, on the user's files, goes to
    python_execute even where javascript_execute sees them too: the default model's fresh
    JavaScript reached for FileReader and Node's file APIs, its Python opens the file."""
    python = (
        "```python\nimport csv\n"
        "sum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))\n```"
    )
    llm = ScriptedLLM.replaying(
        {"plan": plan_reply([planned], needs="compute"), "arguments": python}
    )
    agent, sink = await page_agent(workspace, llm)

    result = await agent.task("What is the total of the amount column of orders.csv?")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "49.75"
    assert [s.tool for s in result.steps] == ["python_execute"]
    moved = [event.meta["moved"] for event in of_type(sink.events, "plan_to_code")]
    assert moved[-1] == {"s1": "python_execute"}, moved


async def test_the_plans_javascript_that_failed_is_written_again_as_python(
    workspace: FolderWorkspace,
) -> None:
    """The plan's own JavaScript on the files runs as JavaScript; when it fails, the code
    call that writes it afresh writes Python (the default model's fresh JavaScript required
    './fruit.csv' and repeated it when shown the error)."""
    python = (
        "```python\nimport csv\n"
        "sum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))\n```"
    )
    broken = {"code": "return orders.csv.split(',').length;"}  # ReferenceError: orders
    llm = ScriptedLLM.replaying(
        {
            "plan": plan_reply([step("s1", "javascript_execute", broken)], needs="compute"),
            "arguments": python,
        }
    )
    agent, sink = await page_agent(workspace, llm)

    result = await agent.task("What is the total of the amount column of orders.csv?")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "49.75"
    started = [(e.step, e.meta["tool"]) for e in of_type(sink.events, "step_started")]
    assert started == [("s1", "javascript_execute"), ("s1", "python_execute")]
    failed = [e.content for e in of_type(sink.events, "step_failed")]
    assert len(failed) == 1 and "ReferenceError" in failed[0], failed
