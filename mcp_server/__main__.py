"""Entry point of `triage-mcp`: flags and logging only; the server lives in server.py.

    triage-mcp [--workspace DIR] [--case triage.toml] [--transport stdio|http]
               [--host 127.0.0.1] [--port 8765] [--log-level INFO]

stdio is the default. HTTP is served on loopback only and needs a bearer token, read from
the environment variable TRIAGE_MCP_TOKEN (at least 16 characters).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys


def _port(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, got {n}")
    return n


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="triage-mcp",
        description="bitwise-triage MCP server",
        epilog="--transport http binds to loopback only and needs a bearer token of at least "
        "16 characters in TRIAGE_MCP_TOKEN; clients send it as 'Authorization: Bearer ...'.",
    )
    p.add_argument("--workspace", default=".", help="directory the server may work in")
    p.add_argument("--case", default=None, help="case file (default: <workspace>/triage.toml)")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP only; loopback addresses only")
    p.add_argument("--port", type=_port, default=8765, help="HTTP only (default 8765)")
    p.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    a = p.parse_args(argv)
    # stdout carries the protocol on stdio: every log line goes to stderr.
    logging.basicConfig(
        stream=sys.stderr,
        level=a.log_level,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )

    from triage_agent.errors import TriageError

    from .server import serve

    try:
        serve(a.workspace, a.case, a.transport, a.host, a.port, os.environ.get("TRIAGE_MCP_TOKEN"))
    except TriageError as exc:
        print(f"triage-mcp: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
