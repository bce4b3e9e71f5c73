"""Entry point of `triage`. Each command group lives in its own module with ``register(app)``."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape

from .. import __version__
from ..errors import TriageError
from .common import err_console

app = typer.Typer(
    name="triage",
    help="Find where and why two PyTorch training runs stop agreeing bit for bit.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"bitwise-triage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Static triage first, fingerprint tracing when the bytes are not explained."""


def _register_all() -> None:
    from . import (
        bisect_cmd,
        compare_cmd,
        correspond_cmd,
        ledger_cmd,
        metrics_cmd,
        ops_cmd,
        record_cmd,
        repro_cmd,
        rerun_cmd,
        run_cmd,
        scan_cmd,
        trace_cmd,
    )

    for mod in (
        ledger_cmd,
        scan_cmd,
        metrics_cmd,
        trace_cmd,
        record_cmd,
        compare_cmd,
        repro_cmd,
        run_cmd,
        rerun_cmd,
        bisect_cmd,
        ops_cmd,
        correspond_cmd,
    ):
        mod.register(app)


_register_all()


def main() -> None:
    try:
        app()
    except TriageError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(exc.exit_code)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        err_console.print(
            f"[bold red]error:[/] invalid {escape(exc.title)} at '{escape(loc)}': "
            f"{escape(str(first['msg']))}",
            highlight=False,
        )
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]: the ledger holds everything recorded so far")
        sys.exit(130)
    except OSError as exc:
        # a path given by the user that is missing, a directory, a file, or not writable:
        # the ledger is only ever appended whole lines, so nothing recorded is lost here
        what = exc.strerror or type(exc).__name__
        where = f": {exc.filename}" if exc.filename else ""
        err_console.print(
            f"[bold red]error:[/] {escape(what)}{escape(where)} "
            "(check the paths and options given; the ledger keeps what it holds)",
            highlight=False,
        )
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
