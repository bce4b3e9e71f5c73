"""Entry point of `triage-mcp`: flags and logging only; the server lives in server.py."""

from __future__ import annotations


def main() -> None:
    import sys

    print("triage-mcp: the MCP server is not built yet", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
