"""javascript_execute in CPython: a Node process with a hard timeout and an output cap."""

from __future__ import annotations

import time

import pytest

from agent_py.tools.javascript import JavascriptExecutor, JSRunResult
from agent_py.tools.node_runner import NodeRunner

runner = NodeRunner()


async def test_returns_a_value_and_captures_console() -> None:
    result = await runner.run(
        "console.log('a', {b: 1}); console.error('bad'); return [1, 'two']",
        timeout_s=5,
        output_limit=1000,
    )
    assert result.error is None
    assert result.value == [1, "two"]
    assert result.console == ['a {"b":1}', "[error] bad"]


async def test_async_code_and_undefined_result() -> None:
    result = await runner.run(
        "await new Promise(r => setTimeout(r, 10))", timeout_s=5, output_limit=100
    )
    assert result.error is None and result.value is None


async def test_an_infinite_loop_is_killed_at_the_timeout() -> None:
    started = time.perf_counter()
    result = await runner.run("while (true) {}", timeout_s=1, output_limit=100)
    assert result.timed_out is True
    assert time.perf_counter() - started < 3


async def test_errors_come_back_with_their_message() -> None:
    result = await runner.run("null.x", timeout_s=5, output_limit=100)
    assert result.error is not None and "TypeError" in result.error


@pytest.mark.parametrize(
    "code",
    [
        "return require('fs').readFileSync('/etc/hostname', 'utf8')",
        "return require('child_process').execSync('id').toString()",
    ],
)
async def test_files_and_processes_are_denied(code: str) -> None:
    result = await runner.run(code, timeout_s=5, output_limit=100)
    assert result.error is not None and "Access to this API has been restricted" in result.error


async def test_output_is_capped() -> None:
    result = await runner.run(
        "for (let i = 0; i < 10000; i++) console.log('x'.repeat(100)); return 'y'.repeat(5000)",
        timeout_s=10,
        output_limit=1000,
    )
    assert result.truncated is True
    assert sum(len(line) for line in result.console) <= 1000
    assert len(result.value) <= 1000


async def test_a_flood_on_raw_stdout_does_not_break_the_result() -> None:
    result = await runner.run(
        "for (let i = 0; i < 2000; i++) process.stdout.write('z'.repeat(1000)); return 1",
        timeout_s=10,
        output_limit=1000,
    )
    assert result.value == 1
    assert result.truncated is True


async def test_the_tool_reports_a_timeout_as_an_error() -> None:
    from agent_py.core.tool import ToolError

    tool = JavascriptExecutor(runner, timeout_s=0.5)
    with pytest.raises(ToolError, match=r"longer than 0\.5 s"):
        await tool.run({"code": "for(;;){}"}, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("1234 + 5678", 6912),
        ("let s = 0; for (let i = 1; i <= 4; i++) s += i; s", 10),
        ("'hello'.toUpperCase()", "HELLO"),
        ("return 6 * 7", 42),
        ("function f(n) {\n  return n * 6;\n}\nf(7);", 42),  # a return inside a function
        ("const x = 1 + 2; console.log(x)", "3"),  # what it printed is its value
    ],
)
async def test_code_without_return_gives_its_last_expression_as_a_console_does(
    code: str, value: object
) -> None:
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    result = await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert result.data == value


async def test_code_that_only_printed_is_shown_by_its_output_alone() -> None:
    """Seen (Qwen2.5-Coder-1.5B): "result: null" beside the printed 42 was read as a
    computation that gave nothing, and the run ended failed."""
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    code = "function multiply(a, b) { return a * b; }\nconsole.log(multiply(6, 7));"
    printed = await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert printed.content == "console:\n42"
    both = await tool.run({"code": "console.log('hi'); return 7"}, ToolContext(model=None))  # type: ignore[arg-type]
    assert both.content == "result: 7\nconsole:\nhi"


async def test_code_that_returns_and_prints_nothing_fails_its_step() -> None:
    from agent_py.core.tool import ToolContext, ToolError

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    with pytest.raises(ToolError, match="returned nothing and printed nothing"):
        await tool.run({"code": "return "}, ToolContext(model=None))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("code", "printed"),
    [
        ("console.log(0 / 0)", "null"),  # NaN, shown through JSON
        ("console.log(undefined)", "undefined"),
        ("let n; console.log(n + 1); return null;", "null"),
        ("return 0 / 0;", ""),
        ("console.log(new Promise(() => {})); return null;", "{}"),  # logged, not awaited
        ("console.log(String(new Date('Dubai 14:00')))", "Invalid Date"),
    ],
)
async def test_code_that_gives_no_value_fails_its_step_not_with_null(
    code: str, printed: str
) -> None:
    """NaN, undefined or null is what broken code gives: "null" must not pass for an answer."""
    from agent_py.core.tool import ToolContext, ToolError

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    with pytest.raises(ToolError) as failure:
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    message = str(failure.value)
    if printed:
        assert message.startswith(f"the code gave no value: it printed only {printed},")
    else:
        assert message.startswith("the code returned nothing and printed nothing")


async def test_code_that_caught_and_logged_its_error_fails_its_step() -> None:
    from agent_py.core.tool import ToolContext, ToolError

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    code = "try { null.x; } catch (e) { console.error(e.name); }"
    with pytest.raises(ToolError) as failure:
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert str(failure.value) == "the code gave no value and logged an error: [error] TypeError"


async def test_code_that_logged_its_error_and_printed_a_fallback_fails_its_step() -> None:
    """A fetch that failed, caught and logged, then "Page title: null": the printed line is
    no result, whatever else the code printed."""
    from agent_py.core.tool import ToolContext, ToolError

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    code = (
        "let title = null;\n"
        "try { null.title; } catch (e) { console.error('Error fetching page:', e.name); }\n"
        "console.log('Page title: ' + title);"
    )
    with pytest.raises(ToolError) as failure:
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert str(failure.value) == (
        "the code gave no value and logged an error: [error] Error fetching page: TypeError"
    )


async def test_code_that_logged_an_error_and_returned_its_result_runs() -> None:
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    code = "console.error('first try failed'); return 7;"
    result = await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert result.data == 7


async def test_code_that_prints_null_beside_its_result_runs() -> None:
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    code = "console.log(null); return 7;"
    result = await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert result.data == 7


class CountingRunner:
    """A runner that counts its calls and runs nothing."""

    def __init__(self) -> None:
        self.calls = 0

    async def run(self, code: str, *, timeout_s: float, output_limit: int) -> JSRunResult:
        self.calls += 1
        return JSRunResult(value=0)


@pytest.mark.parametrize(
    "code",
    [
        "return [1234, 5678];",  # the task's numbers handed back: no sum
        "return 2;",
        "  17 ",
        "return -1.5e3",
        "[3, 8, 15, 4]",
        "console.log(6.75);",
        "return [];",
        "function total() {\n  return 11;\n}",  # the number inside a function, uncalled
        "function total() { return 11; }\nreturn total();",
        "async function main() { return 11; }\nconsole.log(await main());",
        "const days = 42;\nreturn days;",
        # Comments change nothing: the number is still only written in (a guess).
        "function cost() {\n  // Assuming the cost is given\n  return 10.00; // Replace it\n}",
    ],
)
async def test_code_that_only_gives_back_numbers_written_into_it_is_refused(code: str) -> None:
    from agent_py.core.tool import ToolContext, ToolError

    runner = CountingRunner()
    tool = JavascriptExecutor(runner, timeout_s=5)
    refused = "computes nothing: write the calculation itself in JavaScript"
    with pytest.raises(ToolError, match=refused):
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert runner.calls == 0


@pytest.mark.parametrize(
    "code",
    [
        "return 'Email sent to bob@example.com';",
        "return 'Hello, Bob! ' + 'Subject: Hello';",  # text joined is still text written in
        'function weather() {\n  return "Sunny, 20°C in Oslo.";\n}',
        "function weather() { return 'Sunny'; }\nweather();",
        "return {status: 'booked', table: 2};",
        # a literal named first, then given back (the weekday of a date, seen)
        '// the day\nconst day = "Christmas"; // named\nconsole.log(day);',
        '# the same in Python\nday_of_week = "Christmas"  # print it\nprint(day_of_week)',
    ],
)
async def test_with_refuse_constant_text_code_that_only_gives_back_its_text_is_refused(
    code: str,
) -> None:
    """How a model fakes what no tool can do: the weather or a sent email written as text."""
    from agent_py.core.tool import ToolContext, ToolError

    runner = CountingRunner()
    tool = JavascriptExecutor(runner, timeout_s=5, refuse_constant_text=True)
    with pytest.raises(ToolError, match="the code only gives back text written into it"):
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert runner.calls == 0


@pytest.mark.parametrize(
    "code",
    [
        "return 'stressed'.split('').reverse().join('');",
        "return 'Hello, ' + name;",
        "function shout() { const word = 'hello'; return word.toUpperCase(); }",
        "function a() { return 'x'; }\nfunction b() { return a() + 'y'; }",
        "const word = 'stressed'; const reversed = [...word].reverse().join(''); return reversed;",
        "const word = 'a;b'; console.log(word.length);",
    ],
)
async def test_with_refuse_constant_text_code_that_works_on_text_runs(code: str) -> None:
    from agent_py.core.tool import ToolContext

    runner = CountingRunner()
    tool = JavascriptExecutor(runner, timeout_s=5, refuse_constant_text=True)
    await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert runner.calls == 1


@pytest.mark.parametrize(
    "code",
    ["return 6 * 7;", "return Math.max(17, 56);", "return 'hello';", "return [1, 2].length;", "-x"],
)
async def test_code_that_computes_or_returns_text_runs(code: str) -> None:
    from agent_py.core.tool import ToolContext

    runner = CountingRunner()
    tool = JavascriptExecutor(runner, timeout_s=5)
    await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert runner.calls == 1


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("function compute() {\n  return 6 * 7;\n}", 42),
        (
            "// helpers\nfunction half(x) { return x / 2; }\nfunction main() { return half(84); }",
            42,
        ),
        ("async function go() { return '}'.length + 41; }", 42),
    ],
)
async def test_code_that_only_declares_a_function_runs_it(code: str, value: object) -> None:
    """A code model's habit: the answer written as a function that is never called."""
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    result = await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert result.data == value


@pytest.mark.parametrize(
    "code",
    [
        "function f(x) { return x * 2; }",  # it needs an argument: nothing to call it with
        "function f() { return 1; }\nconst y = 2;",  # other statements: the code runs as it is
    ],
)
def test_only_a_lone_function_without_parameters_is_called(code: str) -> None:
    from agent_py.tools.code import javascript_lone_function

    assert javascript_lone_function(code) is None


@pytest.mark.parametrize(
    ("code", "signature"),
    [
        ("function add(a, b) { return a + b; }", "add(a, b)"),
        (
            "// sum\nfunction half(x) { return x / 2; }\nfunction sum(list) {\n  return 1;\n}",
            "sum(list)",
        ),
    ],
)
async def test_code_that_only_declares_a_function_needing_arguments_fails_saying_so(
    code: str, signature: str
) -> None:
    """Nothing calls such a function and nothing here knows its arguments: the step fails
    with what to write instead, before anything runs."""
    from agent_py.core.tool import ToolContext, ToolError
    from agent_py.tools.code import javascript_uncalled_function

    assert javascript_uncalled_function(code) == signature
    runner = CountingRunner()
    tool = JavascriptExecutor(runner, timeout_s=5)
    with pytest.raises(ToolError, match="never calls it") as failure:
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    name = signature.split("(")[0]
    assert f"only defines {signature}" in str(failure.value)
    assert f"return {name}(...);" in str(failure.value)
    assert runner.calls == 0


@pytest.mark.parametrize(
    "code",
    [
        "function f() { return 1; }",  # no parameter: it is called
        "function f(x) { return x; }\nreturn f(2);",  # called
        "const f = (x) => x;",
    ],
)
def test_a_called_or_parameterless_function_is_not_refused_as_uncalled(code: str) -> None:
    from agent_py.tools.code import javascript_uncalled_function

    assert javascript_uncalled_function(code) is None


@pytest.mark.parametrize(
    "code", ["return 1^2 + 2^2 + 3^2;", "const x = 7;\nreturn x ^ 2;", "return (a + 1)^3;"]
)
async def test_with_caret_is_power_a_caret_before_a_number_fails_naming_the_power(
    code: str,
) -> None:
    from agent_py.core.tool import ToolContext, ToolError

    counting = CountingRunner()
    tool = JavascriptExecutor(counting, timeout_s=5, caret_is_power=True)
    message = r"is bitwise XOR in JavaScript, not a power: write a power with \*\* \(2 \*\* 10\)"
    with pytest.raises(ToolError, match=message):
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert counting.calls == 0


@pytest.mark.parametrize(
    ("code", "value"),
    [
        ("return 'x^2'.length;", 3),  # inside a string
        ("return /^12$/.test('12') ? 1 : 0;", 1),  # a regular expression's anchor
        ("return 2 ** 10;", 1024),
    ],
)
async def test_a_caret_outside_arithmetic_runs(code: str, value: int) -> None:
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5, caret_is_power=True)
    result = await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert result.data == value


async def test_without_caret_is_power_xor_runs_as_written() -> None:
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    result = await tool.run({"code": "return 5 ^ 3;"}, ToolContext(model=None))  # type: ignore[arg-type]
    assert result.data == 6


@pytest.mark.parametrize(
    "code",
    [
        # Seen (the 1.5B model): a fetch that failed, its error caught and given back.
        "return Promise.reject(new TypeError('Failed to fetch')).catch((error) => error);",
        "try { null.x; } catch (e) { return String(e); }",
    ],
)
async def test_code_that_gives_back_its_error_as_the_value_fails_its_step(code: str) -> None:
    from agent_py.core.tool import ToolContext, ToolError

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    with pytest.raises(ToolError) as failure:
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert str(failure.value).startswith("the code gave back an error, not a result: TypeError")


async def test_a_text_that_names_an_error_later_is_a_result() -> None:
    from agent_py.core.tool import ToolContext

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    code = "return 'No Error: all ' + 'good';"
    result = await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
    assert result.data == "No Error: all good"


async def test_code_that_gives_back_an_invalid_date_fails_its_step() -> None:
    """Seen: "What time is 14:00 in Dubai in Shanghai?" completed with Invalid Date."""
    from agent_py.core.tool import ToolContext, ToolError

    tool = JavascriptExecutor(NodeRunner(), timeout_s=5)
    code = "return new Date('2026-12-02 14:00 Dubai').toLocaleString();"
    with pytest.raises(ToolError, match="the code gave Invalid Date"):
        await tool.run({"code": code}, ToolContext(model=None))  # type: ignore[arg-type]
