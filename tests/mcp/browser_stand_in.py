"""A stand-in for the user's browser: ``python browser_stand_in.py URL`` follows the
authorization server's redirects up to the client's loopback redirect, as a browser
whose user approves would. Used as ``$BROWSER`` by the terminal tests."""

from __future__ import annotations

import sys

import httpx


def follow(url: str) -> str:
    with httpx.Client(follow_redirects=True, timeout=30) as client:
        response = client.get(url)
        response.raise_for_status()
        return str(response.url)


if __name__ == "__main__":
    follow(sys.argv[1])
