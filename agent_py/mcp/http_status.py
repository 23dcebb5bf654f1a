"""What an HTTP status that is not 2xx means for an MCP request, in words a user can act
on: :func:`check_status` raises the :mod:`~agent_py.mcp.errors` class a caller branches
on (an ended session, a refused token, any other HTTP error)."""

from __future__ import annotations

import json

from agent_py.mcp.errors import MCPAuthError, MCPHTTPError, MCPSessionExpiredError
from agent_py.mcp.transport import HTTPResponse

ERROR_BODY_LIMIT = 4096
TOKEN_HINT = "Add one in this server's settings."
"""What a user without a token should do; the terminal command names its own option."""


def error_detail(body: bytes) -> str:
    """What an error body says, in one short line, if it says anything readable."""
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        if text.startswith("<"):
            return ""  # an HTML error page
        return text.splitlines()[0][:200]
    if not isinstance(value, dict):
        return ""
    error = value.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    for key in ("error_description", "message", "detail"):
        if isinstance(value.get(key), str):
            return str(value[key])
    return error if isinstance(error, str) else ""


async def check_status(
    response: HTTPResponse,
    *,
    url: str,
    sent_session: str | None,
    what: str,
    sent_token: bool,
    token_hint: str,
) -> None:
    """Return on 2xx; otherwise read the error body and raise what the status means."""
    status = response.status
    if 200 <= status < 300:
        return
    body, _ = await response.read(ERROR_BODY_LIMIT)
    text = body.decode("utf-8", "replace")
    detail = error_detail(body)
    said = f" The server said: {detail}" if detail else ""
    # 404 is the spec's answer for a session the server no longer knows; some servers
    # (server-everything) answer 400 and name the session instead.
    if sent_session is not None and (
        status == 404 or (status == 400 and "session" in detail.lower())
    ):
        raise MCPSessionExpiredError(
            f"The server at {url} ended the session (HTTP {status}).{said}",
            session_id=sent_session,
            status=status,
            body=text,
        )
    where = f"The server at {url}"
    challenge = response.headers.get("www-authenticate", "")
    if status == 401:
        if not sent_token:
            message = f"{where} needs a token (HTTP 401). {token_hint}"
        else:
            message = f"{where} refused the token (HTTP 401). {token_hint}"
        raise MCPAuthError(message + said, status=status, body=text, www_authenticate=challenge)
    if status == 403:
        raise MCPAuthError(
            f"{where} refused access (HTTP 403 Forbidden): the token may lack a permission, "
            f"or the server does not accept requests from this origin.{said}",
            status=status,
            body=text,
            www_authenticate=challenge,
        )
    if status == 404:
        message = (
            f"Nothing answers at {url} (HTTP 404 Not Found). Check the server URL "
            "(MCP endpoints often end in /mcp)."
        )
    elif status == 405:
        message = (
            f"{where} does not accept this request (HTTP 405 Method Not Allowed): it may not "
            "be a Streamable HTTP MCP endpoint (servers from before 2025-03-26 use the older "
            "HTTP+SSE transport, which is not supported)."
        )
    elif 300 <= status < 400:
        location = response.headers.get("location", "another URL")
        message = (
            f"{where} redirects to {location} (HTTP {status}). Use that URL in the server's "
            "settings."
        )
    elif status == 400:
        message = f"{where} rejected {what} as a bad request (HTTP 400)."
    elif status == 429:
        message = f"{where} is receiving too many requests (HTTP 429). Try again later."
    elif status >= 500:
        message = f"{where} failed with HTTP {status}. Try again later."
    else:
        message = f"{where} answered {what} with HTTP {status}."
    raise MCPHTTPError(message + said, status=status, body=text)
