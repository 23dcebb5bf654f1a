"""The Files panel (web/ui/workspace-panel.js) in headless Chromium: the user's files in the
origin's private file system, picked or dropped, listed, previewed, deleted and downloaded;
python_execute sums a picked CSV and the file it writes is linked from the answer and is
still there after a reload (javascript_execute reads and writes the same files); a file
over the browser's quota fails with the reason and loses nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_page import done, open_app, plan, run_task, step, wait_final

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ORDERS = "order,amount\nA-1,12.50\nA-2,7.25\nA-3,30\n"
SUM_AND_WRITE = (
    "import csv\n"
    "total = sum(float(r['amount']) for r in csv.DictReader(open('orders.csv')))\n"
    "open('out/total.txt', 'w').write(f'{total:.2f}\\n')\n"
    "total"
)


@pytest.fixture
def scripted(page_url: Any) -> str:
    return str(page_url("index.html?engine=scripted"))


def stored(page: Any) -> dict[str, int]:
    """The workspace's files as the panel lists them (read again): name to size."""
    files = page.evaluate("window.agentApp.workspaceFiles()")
    return {f["name"]: f["size"] for f in files}


def row(page: Any, name: str) -> Any:
    return page.locator(f'#files-list tr[data-name="{name}"]')


def previewed(page: Any, name: str) -> str:
    """What the panel's Preview shows for ``name``, once the file has been read (the panel
    reads it after the click)."""
    page.get_by_role("button", name=f"Preview {name}").click()
    page.wait_for_function(
        "(name) => { const p = document.getElementById('files-preview');"
        " return !p.hidden && p.dataset.name === name; }",
        arg=name,
    )
    return str(page.locator("#files-preview-text").text_content())


def pick(page: Any, tmp_path: Path, files: dict[str, str | bytes]) -> None:
    paths = []
    for name, data in files.items():
        path = tmp_path / name
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        paths.append(str(path))
    page.locator("#files-pick").set_input_files(paths)


def test_a_picked_csv_is_summed_by_python_and_the_file_it_writes_survives_a_reload(
    page: Any, scripted: str, tmp_path: Path
) -> None:
    open_app(page, scripted, settings={"js_timeout_s": 120})
    pick(page, tmp_path, {"orders.csv": ORDERS})
    row(page, "orders.csv").wait_for()
    assert row(page, "orders.csv").inner_text().split("\t")[:3] == [
        "orders.csv",
        "39 bytes",
        "text/csv",
    ]
    assert previewed(page, "orders.csv") == ORDERS

    run_task(
        page,
        "What is the total of the amount column?",
        {
            "plan": plan([step("s1", "python_execute", {"code": SUM_AND_WRITE})]),
            "rethink": done("The amounts add up to 49.75."),
        },
    )
    assert wait_final(page, timeout=240_000) == "completed"
    output = page.locator('[data-step="s1"] .output pre').text_content()
    assert output == "result: 49.75\nfiles written: out/total.txt (6 bytes)", output
    row(page, "out/total.txt").wait_for()  # the panel shows it once the run ends
    page.locator("#files").screenshot(path=screenshot_path())

    page.reload()
    page.wait_for_function("document.body.dataset.status === 'ready'")
    assert stored(page) == {"orders.csv": 39, "out/total.txt": 6}
    # The answer, drawn again from the history, links the file; so does the panel.
    with page.expect_download() as from_answer:
        page.locator(".answer-files").get_by_role("button", name="Download out/total.txt").click()
    assert Path(from_answer.value.path()).read_text() == "49.75\n"
    with page.expect_download() as from_panel:
        row(page, "out/total.txt").get_by_role("button", name="Download out/total.txt").click()
    assert from_panel.value.suggested_filename == "total.txt"
    assert Path(from_panel.value.path()).read_text() == "49.75\n"

    page.get_by_role("button", name="Delete out/total.txt").click()
    row(page, "out/total.txt").wait_for(state="detached")
    assert stored(page) == {"orders.csv": 39}


def screenshot_path() -> Path:
    """Where the panel's picture goes (docs/page.md shows a copy of it)."""
    folder = ROOT / ".artifacts" / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "files-panel.png"


def test_a_picked_csv_is_summed_by_javascript_which_keeps_the_file_it_writes(
    page: Any, scripted: str, tmp_path: Path
) -> None:
    """javascript_execute sees the same workspace: readFile gives the file's text, a file
    given to writeFile('out/…') is kept there, and the panel lists it."""
    open_app(page, scripted)
    pick(page, tmp_path, {"orders.csv": ORDERS})
    row(page, "orders.csv").wait_for()
    code = (
        "const rows = readFile('orders.csv').trim().split('\\n').slice(1);\n"
        "const total = rows.reduce((sum, row) => sum + Number(row.split(',')[1]), 0);\n"
        "writeFile('out/total.json', JSON.stringify({total}));\n"
        "return total;"
    )
    run_task(
        page,
        "What is the total of the amount column?",
        {
            "plan": plan([step("s1", "javascript_execute", {"code": code})]),
            "rethink": done("The amounts add up to 49.75."),
        },
    )
    assert wait_final(page) == "completed"
    output = page.locator('[data-step="s1"] .output pre').text_content()
    assert output == "result: 49.75\nfiles written: out/total.json (15 bytes)", output
    row(page, "out/total.json").wait_for()
    assert stored(page) == {"orders.csv": 39, "out/total.json": 15}
    with page.expect_download() as download:
        row(page, "out/total.json").get_by_role("button", name="Download out/total.json").click()
    assert Path(download.value.path()).read_text() == '{"total":49.75}'


def test_dropped_files_are_stored_by_name(page: Any, scripted: str) -> None:
    open_app(page, scripted)
    transfer = page.evaluate_handle(
        """() => {
          const transfer = new DataTransfer();
          transfer.items.add(new File(["line one\\nline two\\n"], "notes.txt"));
          transfer.items.add(new File(["{}"], "empty.json"));
          return transfer;
        }"""
    )
    page.dispatch_event("#files-drop", "drop", {"dataTransfer": transfer})
    row(page, "notes.txt").wait_for()
    assert stored(page) == {"empty.json": 2, "notes.txt": 18}


def test_a_file_over_the_quota_fails_with_why_and_loses_nothing_else(
    page: Any, scripted: str, tmp_path: Path, base_url: str
) -> None:
    open_app(page, scripted)
    pick(page, tmp_path, {"orders.csv": ORDERS})
    row(page, "orders.csv").wait_for()
    used = page.evaluate("navigator.storage.estimate().then((e) => e.usage)")
    cdp = page.context.new_cdp_session(page)
    cdp.send(
        "Storage.overrideQuotaForOrigin",
        {"origin": base_url.rstrip("/"), "quotaSize": used + 100_000},
    )
    pick(page, tmp_path, {"big.bin": b"\0" * 400_000, "small.txt": "fits\n"})
    page.wait_for_function("document.getElementById('files-error').textContent !== ''")
    error = page.locator("#files-error").text_content() or ""
    # The browser itself refuses the write (its quota, as the override set it): said in words.
    assert "big.bin could not be stored: the browser's storage for this page is full" in error
    assert stored(page) == {"orders.csv": 39, "small.txt": 5}
    assert previewed(page, "orders.csv") == ORDERS
