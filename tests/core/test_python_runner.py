"""python_execute in CPython: a fresh, limited Python process per call, with no network, no
processes and no files outside its own folder."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, cast

import pytest

from agent_py.core.tool import ToolContext, ToolError, ToolResult
from agent_py.tools.python import PyRunResult, PythonExecutor, program_for
from agent_py.tools.python_runner import SubprocessPyRunner

runner = SubprocessPyRunner()
SANDBOX = "is not allowed in the sandbox"


async def run_code(code: str, *, timeout_s: float = 10, output_limit: int = 1000) -> PyRunResult:
    return await runner.run(
        program_for(code, output_limit), timeout_s=timeout_s, output_limit=output_limit
    )


async def run_tool(code: str) -> ToolResult:
    tool = PythonExecutor(runner, timeout_s=10)
    # python_execute asks no model.
    return await tool.run({"code": code}, ToolContext(model=cast(Any, None)))


def children() -> set[int]:
    """The processes whose parent is this test process, from /proc."""
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        # pid (name) state ppid ...: the name may hold spaces and parentheses.
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
            found.add(int(entry))
    return found


async def test_the_value_of_the_last_line_and_the_printed_output_come_back() -> None:
    result = await run_tool("x = 6\nprint('hi')\nx * 7")
    assert result.data == 42
    assert result.meta["stdout"] == "hi\n"


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("return 6 * 7", 42),  # as the JavaScript tool takes it (the plans' habit)
        ("x = [4, 8, 15]\nreturn sum(x) / len(x)", 9.0),
        ("if 221 % 13 == 0:\n    return False\nreturn True", False),
        ("n = 3\nprint('hi')\nn * 2", 6),  # no return: the last expression, as before
        ("def f(n):\n    return n * 2\nf(3)", 6),  # a return inside a function is its own
    ],
)
async def test_code_that_returns_at_its_top_level_gives_the_returned_value(
    code: str, value: object
) -> None:
    assert (await run_tool(code)).data == value


async def test_an_error_in_code_that_returns_names_the_codes_own_line() -> None:
    with pytest.raises(ToolError) as caught:
        await run_tool("x = 0\nreturn 1 / x")
    why = "ZeroDivisionError: division by zero\n  at line 2: return 1 / x"
    assert str(caught.value).endswith(why)


async def test_a_syntax_error_names_itself_and_its_line() -> None:
    with pytest.raises(ToolError, match=r"SyntaxError: .*\(line 2\)"):
        await run_tool("x = 1\ndef f(:\n    pass")


async def test_an_exception_names_its_type_and_the_line_of_the_code() -> None:
    with pytest.raises(ToolError, match=r"ZeroDivisionError(.|\n)*line 2: y = x / 0"):
        await run_tool("x = 1\ny = x / 0\ny")


async def test_an_endless_loop_is_stopped_at_the_timeout_and_its_process_is_gone() -> None:
    before = children()
    result = await run_code("while True: pass", timeout_s=1)
    assert result.timed_out is True
    assert children() - before == set()
    assert (await run_code("'still working'")).value == "still working"


async def test_no_connection_reaches_a_listening_socket() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        result = await run_code(
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
        )
        assert result.error is not None and SANDBOX in result.error
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing is waiting to be accepted
            server.accept()


async def test_urllib_cannot_fetch_a_local_url() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        result = await run_code(
            f"import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/', timeout=2)"
        )
        assert result.error is not None and SANDBOX in result.error


@pytest.mark.parametrize(
    "code",
    [
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.system('true')",
        "import os\nos.fork()",
    ],
)
async def test_no_process_can_be_started(code: str) -> None:
    result = await run_code(code)
    assert result.error is not None and SANDBOX in result.error


async def test_asyncio_still_runs_its_event_loop() -> None:
    """Its loop needs a local socket pair, the one socket the sandbox lets through."""
    result = await run_code("import asyncio\nasync def f():\n    return 5\nasyncio.run(f())")
    assert result.error is None and result.value == 5


async def test_a_file_outside_its_folder_is_neither_written_nor_read(tmp_path: Path) -> None:
    outside = tmp_path / "x_outside"
    result = await run_code(f"open({str(outside)!r}, 'w').write('escaped')")
    assert result.error is not None and SANDBOX in result.error
    assert not outside.exists()
    result = await run_code(f"open({__file__!r}).read()")
    assert result.error is not None and SANDBOX in result.error


async def test_a_file_in_its_own_folder_can_be_written_and_read_back() -> None:
    result = await run_code("open('notes.txt', 'w').write('kept')\nopen('notes.txt').read()")
    assert result.error is None and result.value == "kept"


async def test_the_agent_is_out_of_reach() -> None:
    result = await run_code("import agent_py")
    assert result.error is not None and "ModuleNotFoundError" in result.error
    result = await run_code("sorted(globals())")
    assert result.value == ["__builtins__", "__name__"]
    assert (await run_code("__name__")).value == "__main__"


async def test_the_standard_library_works() -> None:
    result = await run_code(
        "import json, datetime, statistics, re, math\nstatistics.mean([1,2,3,4])"
    )
    assert result.error is None and result.value == 2.5


async def test_output_is_capped() -> None:
    result = await run_code("print('x' * 1_000_000)", output_limit=1000)
    assert result.truncated is True
    assert len(result.stdout) <= 1000


async def test_a_huge_allocation_fails_cleanly() -> None:
    result = await run_code("data = bytearray(4 * 1024**3)\nlen(data)")
    assert result.timed_out is False
    assert result.error is not None
    assert "MemoryError" in result.error or "ended abnormally" in result.error


@pytest.mark.parametrize(
    "code",
    ["6.75", "print(9)", "[4, 8, 15]", "def total():\n    return 11\n\nprint(total())"],
)
async def test_code_that_only_gives_back_numbers_written_into_it_is_refused(code: str) -> None:
    with pytest.raises(ToolError, match="computes nothing: write the calculation itself in Python"):
        await run_tool(code)


async def test_code_that_computes_a_number_runs() -> None:
    assert (await run_tool("(4 + 8 + 15) / 3")).data == 9


@pytest.mark.parametrize(
    ("code", "printed"),
    [("print(None)", "None"), ("print(float('nan'))", "nan"), ("float('nan')", "")],
)
async def test_code_that_gives_no_value_fails_its_step_not_with_none(
    code: str, printed: str
) -> None:
    with pytest.raises(ToolError, match="gave no value") as failure:
        await run_tool(code)
    if printed:
        assert f"printed only {printed}," in str(failure.value)


async def test_code_that_prints_none_beside_its_result_runs() -> None:
    assert (await run_tool("print(None)\nprint(5)")).data == "None\n5"


async def test_code_that_only_defines_a_function_runs_it() -> None:
    """A code model's habit: the answer written as a function that is never called."""
    result = await run_tool("import math\n\ndef main():\n    return math.factorial(4) + 18\n")
    assert result.data == 42


@pytest.mark.parametrize(
    "code",
    [
        "def f(x):\n    return x",
        "def f():\n    return 1\nprint(f())",
        "async def f():\n    return 1",
    ],
)
def test_only_a_lone_function_without_required_arguments_is_called(code: str) -> None:
    from agent_py.tools.code import python_lone_function

    assert python_lone_function(code) is None


async def test_code_that_only_defines_a_function_needing_arguments_fails_saying_so() -> None:
    """Nothing calls it and nothing here knows its arguments: the step says what to write."""
    from agent_py.tools.code import python_uncalled_function

    code = "import math\n\ndef area(radius, *, unit):\n    return math.pi * radius ** 2\n"
    assert python_uncalled_function(code) == "area(radius, unit)"
    with pytest.raises(ToolError, match=r"only defines area\(radius, unit\) and never calls it"):
        await run_tool(code)
    assert python_uncalled_function("def f(x=1):\n    return x") is None
    assert python_uncalled_function("def f(x):\n    return x\nprint(f(2))") is None


async def test_with_caret_is_power_python_refuses_a_caret_before_a_number() -> None:
    tool = PythonExecutor(runner, timeout_s=10, caret_is_power=True)
    ctx = ToolContext(model=None)  # type: ignore[arg-type]
    with pytest.raises(ToolError, match=r"`2\^10` is bitwise XOR in Python, not a power"):
        await tool.run({"code": "print(2^10)"}, ctx)
    result = await tool.run({"code": "print(2 ** 10)"}, ctx)
    assert result.content.strip().endswith("1024")
