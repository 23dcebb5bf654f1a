"""The workspace (a folder here) and the tools that read it: list_files and read_file; a task
about a file that is not there ends failed with the reason, never with a writer's stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import default_tools, make_agent, plan_reply

from agent_py import AgentConfig, AgentState, ScriptedLLM
from agent_py.core.profiles import SMALL
from agent_py.core.tool import ToolContext
from agent_py.core.workspace import FolderWorkspace, WorkspaceError, checked_name, media_type
from agent_py.tools.files import MAX_READ_CHARS, ListFiles, ReadFile

CTX = ToolContext(model=None)  # type: ignore[arg-type]
SALES = "month,sales\nJanuary,1200\nFebruary,950\nMarch,1340\n"


@pytest.fixture
def workspace(tmp_path: Path) -> FolderWorkspace:
    (tmp_path / "sales.csv").write_text(SALES)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").write_text("# Report\n")
    return FolderWorkspace(tmp_path)


@pytest.mark.parametrize(
    ("name", "checked"), [("sales.csv", "sales.csv"), ("./out/a.txt", "out/a.txt"), (" b ", "b")]
)
def test_a_workspace_name_is_a_relative_posix_path(name: str, checked: str) -> None:
    assert checked_name(name) == checked


@pytest.mark.parametrize(
    "name", ["", "/etc/passwd", "../secret", "out/../../x", "a\\b", "a\nb", ".", "x" * 256]
)
def test_a_name_that_reaches_outside_or_is_no_name_is_refused(name: str) -> None:
    with pytest.raises(WorkspaceError):
        checked_name(name)


def test_media_types_come_from_the_name() -> None:
    assert media_type("a.csv") == "text/csv"
    assert media_type("notes.md") == "text/markdown"
    assert media_type("x.unknownext") == "application/octet-stream"


async def test_list_files_gives_every_file_with_size_and_type(workspace: FolderWorkspace) -> None:
    result = await ListFiles(workspace).run({}, CTX)

    assert result.content.splitlines() == [
        "out/report.md (9 bytes, text/markdown)",
        f"sales.csv ({len(SALES)} bytes, text/csv)",
    ]
    assert result.data[1] == {"name": "sales.csv", "size": len(SALES), "type": "text/csv"}


async def test_an_empty_workspace_says_so(tmp_path: Path) -> None:
    result = await ListFiles(FolderWorkspace(tmp_path / "empty")).run({}, CTX)
    assert result.content == "the workspace is empty: the user has added no files"
    assert result.data == []


async def test_read_file_gives_a_whole_small_file_and_says_so(workspace: FolderWorkspace) -> None:
    result = await ReadFile(workspace).run({"path": "sales.csv"}, CTX)

    assert result.content == f"sales.csv: all 4 lines\n{SALES}"
    assert result.data == SALES  # what ${s1} of the read holds


async def test_read_file_reads_a_slice_by_lines(workspace: FolderWorkspace) -> None:
    result = await ReadFile(workspace).run(
        {"path": "sales.csv", "first_line": 2, "max_lines": 2}, CTX
    )

    assert result.content == "sales.csv: lines 2 to 3 of 4\nJanuary,1200\nFebruary,950\n"
    assert result.meta == {"path": "sales.csv", "first_line": 2, "last_line": 3, "lines": 4}


async def test_a_read_past_the_end_or_of_a_binary_file_fails_with_why(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    with pytest.raises(
        WorkspaceError, match=r"sales\.csv has 4 lines: first_line 9 is past its end"
    ):
        await ReadFile(workspace).run({"path": "sales.csv", "first_line": 9}, CTX)
    (tmp_path / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(WorkspaceError, match=r"photo\.png is not a text file"):
        await ReadFile(workspace).run({"path": "photo.png"}, CTX)


async def test_one_long_line_is_cut_and_the_cut_is_said(
    workspace: FolderWorkspace, tmp_path: Path
) -> None:
    (tmp_path / "long.txt").write_text("x" * (MAX_READ_CHARS + 10))

    result = await ReadFile(workspace).run({"path": "long.txt"}, CTX)

    assert result.content.startswith(f"long.txt: lines 1 to 1 of 1, cut at {MAX_READ_CHARS} ")
    assert len(result.data) == MAX_READ_CHARS


async def test_a_missing_file_names_what_is_there(workspace: FolderWorkspace) -> None:
    with pytest.raises(WorkspaceError) as error:
        await ReadFile(workspace).run({"path": "budget.csv"}, CTX)
    assert str(error.value) == (
        "no file named 'budget.csv' in the workspace (files: out/report.md, sales.csv)"
    )


async def test_a_write_over_the_quota_fails_and_keeps_the_other_files(tmp_path: Path) -> None:
    workspace = FolderWorkspace(tmp_path, max_bytes=100)
    await workspace.write("out/a.txt", b"a" * 60)

    with pytest.raises(
        WorkspaceError, match=r"out/b.txt \(50 bytes\) does not fit: .* 60 of its 100"
    ):
        await workspace.write("out/b.txt", b"b" * 50)

    assert [f.name for f in await workspace.files()] == ["out/a.txt"]
    assert await workspace.read("out/a.txt") == b"a" * 60
    await workspace.write("out/a.txt", b"c" * 90)  # replacing a file frees its own bytes


SMALL_CONFIG = AgentConfig(
    plan_shape=SMALL.plan_shape, strategy=SMALL.strategy, budgets=SMALL.budgets
)


def read_then_write(path: str) -> str:
    return plan_reply(
        [{"step_id": "s1", "step_goal": "read it", "tool_name": "read_file", "input": path}],
        [
            {
                "step_id": "s2",
                "step_goal": "sum it",
                "tool_name": "llm_generator",
                "input": "Add up the sales in ${s1}",
            }
        ],
        needs="look_up",
    )


async def test_a_task_on_a_file_that_is_not_there_ends_failed_naming_it(
    workspace: FolderWorkspace,
) -> None:
    llm = ScriptedLLM.replaying({"plan": read_then_write("budget.csv"), "generate": "It is 3490."})
    tools = [ReadFile(workspace), ListFiles(workspace), *default_tools()]
    agent, _ = make_agent(llm, *tools, config=SMALL_CONFIG)

    result = await agent.task("Add up the sales in budget.csv.")

    assert result.state is AgentState.FAILED
    assert "no file named 'budget.csv' in the workspace" in result.error
    assert not any(call.purpose == "generate" for _, call in llm.calls)  # no stand-in text


async def test_a_look_up_planned_with_read_file_is_not_declined(
    workspace: FolderWorkspace,
) -> None:
    """The plan check declines a look-up planned with only the writer and the sandboxes; a
    read of the user's file is a look-up that can be done here."""
    llm = ScriptedLLM.replaying(
        {
            "plan": read_then_write("sales.csv"),
            "generate": "It holds the sales of January, February and March.",
        }
    )
    tools = [ReadFile(workspace), *default_tools()]
    agent, _ = make_agent(llm, *tools, config=SMALL_CONFIG)

    result = await agent.task("Add up the sales in sales.csv.")

    assert result.state is AgentState.COMPLETED, result.error
    assert result.answer == "It holds the sales of January, February and March."
    writer = next(m for m, call in llm.calls if call.purpose == "generate")
    assert "January,1200" in writer[-1]["content"]
