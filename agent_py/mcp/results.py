"""What a tool call returned, as text a model can read and as data for later steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcp_types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import ValidationError

from agent_py.mcp.errors import MCPProtocolError

_KNOWN_BLOCK_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})


def describe_size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.3g} MB"
    if size >= 1024:
        return f"{size / 1024:.3g} KB"
    return f"{size} bytes"


def _base64_size(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=")


def describe_block(block: ContentBlock) -> str:
    """A block as text: text as it is, binary content described in one line."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type}: {block.mime_type}, {describe_size(_base64_size(block.data))}]"
    if isinstance(block, ResourceLink):
        about = f": {block.description}" if block.description else ""
        return f"[resource link {block.name} <{block.uri}>{about}]"
    resource = block.resource
    mime = f", {resource.mime_type}" if resource.mime_type else ""
    if isinstance(resource, TextResourceContents):
        return f"[resource <{resource.uri}>{mime}]\n{resource.text}"
    return f"[resource <{resource.uri}>{mime}, {describe_size(_base64_size(resource.blob))}]"


def content_text(blocks: Sequence[ContentBlock]) -> str:
    return "\n".join(describe_block(block) for block in blocks)


def result_data(result: CallToolResult) -> Any:
    """``structuredContent`` when the server gave it; else the text, when every block is
    text; else the content blocks as JSON.

    The MCP SDKs wrap a tool's non-object return value as ``{"result": value}``; the value
    itself is the data, so ``${s1}`` in a later step splices ``Lutz``, not its wrapping. A
    result of text blocks (a fetched page, a git log) is that text wherever it is spliced,
    never ``[{"type": "text", …}]``.
    """
    structured = result.structured_content
    if isinstance(structured, dict) and set(structured) == {"result"}:
        return structured["result"]
    if structured is not None:
        return structured
    if result.content and all(block.type == "text" for block in result.content):
        return content_text(result.content)
    return [
        block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content
    ]


def parse_call_tool_result(raw: Mapping[str, Any], tool: str) -> CallToolResult:
    """Validate a ``tools/call`` result. Blocks of a type this client does not know (a newer
    protocol revision may add some) become a text note instead of failing the call."""
    content = raw.get("content")
    if isinstance(content, list):
        raw = dict(raw)
        raw["content"] = [
            block
            if not isinstance(block, dict) or block.get("type") in _KNOWN_BLOCK_TYPES
            else {"type": "text", "text": f"[content of type {block.get('type')!r} not shown]"}
            for block in content
        ]
    try:
        return CallToolResult.model_validate(raw)
    except ValidationError as error:
        raise MCPProtocolError(
            f"The server's result for tool {tool!r} is not a valid tool result "
            f"({describe_validation_error(error)})."
        ) from error


def describe_validation_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "result"
    return f"{where}: {first['msg']}"
