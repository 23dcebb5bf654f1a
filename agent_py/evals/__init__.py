"""The real-task suite: tasks with machine-checkable answers (``tasks.json``), the checks
(``suite``), the runner in the page (``runner``, CPython only) and its MCP server."""
