"""Build the MCP server from the tool registry, and serve it over stdio or loopback HTTP.

``build_server(workspace)`` turns every ``ToolSpec`` into an SDK tool whose input schema is
the spec's input model (unknown arguments rejected) and whose structured output is the
spec's output model. Tool functions run in a worker thread so a long scan or launch never
blocks other calls; ``TriageError`` and pydantic validation errors come back as tool error
results with a one-line message, and anything unexpected is logged on stderr and returned as
a generic tool error: the server does not crash.

HTTP is streamable HTTP bound to a loopback address only, behind a bearer token compared in
constant time; the SDK's DNS-rebinding protection (Host/Origin checks) stays on.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.resources import FunctionResource
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from pydantic import BaseModel, ValidationError, create_model

from triage_agent import __version__
from triage_agent.errors import InputError, TriageError
from triage_agent.evidence_data import RerunData, TraceCompareData
from triage_agent.ledger import dumps_state
from triage_agent.ledger_view import to_markdown

from .compare_tools import COMPARE_RESOURCE, full_result
from .security import Workspace, cap_text
from .spec import ToolSpec
from .tools import available_tools
from .workflow_prompt import INSTRUCTIONS, two_stage_prompt

log = logging.getLogger("triage-mcp")
MAX_ERROR_CHARS = 2000


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "input"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"invalid {loc}: {first['msg']}{more}"
    return " ".join(str(exc).split())[:MAX_ERROR_CHARS]


MAX_PROGRESS_CHARS = 2000


class _ProgressSink:
    """A progress callable usable from the worker thread a tool runs in.

    Throttled (a scan reports every file): at most one notification per ``min_interval_s``,
    except the final one (done == total), which is always sent. A report the throttle holds
    back is not lost: its message travels with the next notification, and whatever is still
    held when the tool returns is sent then (``flush``), so a client sees every file a scan
    read and every stage a launch went through, however fast they came. The event loop's
    token is taken here, in the loop, because library code reports from threads of its own
    (a launch's output watcher), not only from the tool's worker thread; concurrent reports
    are serialised so the values the client sees only grow."""

    def __init__(self, ctx: Context, min_interval_s: float = 0.1) -> None:
        self._ctx = ctx
        self._interval = min_interval_s
        self._token = anyio.lowlevel.current_token()
        self._lock = threading.Lock()
        self._last = 0.0
        self._held: list[str] = []
        self._pending: tuple[float, float | None] | None = None

    def __call__(self, done: float, total: float | None = None, message: str | None = None) -> None:
        with self._lock:
            if message:
                self._held.append(message)
            now = time.monotonic()
            if now - self._last < self._interval and (total is None or done < total):
                self._pending = (done, total)
                return
            self._last = now
            said = self._take()
            try:
                anyio.from_thread.run(
                    self._ctx.report_progress, done, total, said, token=self._token
                )
            except Exception as exc:  # noqa: BLE001 - progress must never fail the tool
                log.warning("progress notification not delivered: %s", exc)

    def _take(self) -> str | None:
        """The held messages, oldest first, as one line; the newest kept when over the cap."""
        held, self._held, self._pending = self._held, [], None
        kept: list[str] = []
        size = 0
        for m in reversed(held):
            if kept and size + len(m) + 2 > MAX_PROGRESS_CHARS:
                break
            kept.append(m)
            size += len(m) + 2
        kept.reverse()
        said = "; ".join(kept)
        if len(kept) < len(held):
            said = f"(+{len(held) - len(kept)} earlier) {said}"
        return cap_text(said, MAX_PROGRESS_CHARS) if said else None

    async def flush(self) -> None:
        """Send what the throttle still holds; called in the event loop once the tool ends."""
        # never wait for the lock here, in the loop: a thread holding it waits for the loop
        # to deliver its own report, which carries what was held
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._pending is None:
                return
            done, total = self._pending
            said = self._take()
        finally:
            self._lock.release()
        try:
            await self._ctx.report_progress(done, total, said)
        except Exception as exc:  # noqa: BLE001 - progress must never fail the tool
            log.warning("progress notification not delivered: %s", exc)


class _Tool(Tool):
    """The SDK's tool, with argument-validation errors cut to one line for the client."""

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and not isinstance(exc, UnexpectedToolError):
                raise ToolError(f"Error executing tool {self.name}: {_one_line(cause)}") from cause
            if isinstance(cause, TriageError):  # a validator that runs the library's own check
                raise ToolError(f"Error executing tool {self.name}: {_one_line(cause)}") from cause
            raise


def _sdk_tool(spec: ToolSpec, ws: Workspace) -> Tool:
    # The argument model is the spec's input model itself (its bounds, descriptions and
    # extra="forbid"), with the SDK's base mixed in for how arguments are handed over.
    args_model = create_model(f"{spec.name}_arguments", __base__=(spec.input, ArgModelBase))

    async def call(ctx: Context, **kwargs: Any) -> BaseModel:
        progress = _ProgressSink(ctx)
        try:
            args = spec.input.model_validate(kwargs)
            result = await anyio.to_thread.run_sync(spec.fn, ws, args, progress)
        except (TriageError, ValidationError) as exc:
            raise ToolError(_one_line(exc)) from exc
        finally:
            await progress.flush()
        return result

    return _Tool(
        fn=call,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        parameters=args_model.model_json_schema(by_alias=True),
        fn_metadata=FuncMetadata(arg_model=args_model, output_model=spec.output),
        is_async=True,
        context_kwarg="ctx",
        annotations=spec.annotations.model_copy(update={"title": spec.title}),
    )


def _resource(
    uri: str, name: str, description: str, mime: str, fn: Callable[[], str]
) -> FunctionResource:
    def read() -> str:
        try:
            return cap_text(fn())
        except TriageError as exc:
            raise ResourceError(_one_line(exc)) from exc

    return FunctionResource(uri=uri, name=name, description=description, mime_type=mime, fn=read)


def _resources(ws: Workspace) -> list[FunctionResource]:
    def case_json() -> str:
        return ws.require_case().model_dump_json(indent=2)

    def findings_json() -> str:
        st = ws.ledger.state()
        return json.dumps([f.model_dump(mode="json") for f in st.findings.values()], indent=2)

    def traces_json() -> str:
        st = ws.ledger.state()
        rows = [
            {
                "evidence": e.id,
                "summary": e.summary,
                "result": e.result.value,
                "trace_dir": e.data_as(RerunData).trace_dir,
                "capture": e.data_as(RerunData).capture,
                "files": [a.model_dump(mode="json") for a in e.artifacts],
            }
            for e in st.evidence
            if e.kind.value == "rerun" and e.data_as(RerunData).trace_dir
        ]
        compares = [
            {
                "evidence": e.id,
                "summary": e.summary,
                **e.data_as(TraceCompareData).model_dump(
                    mode="json", include={"status", "complete", "summary"}
                ),
            }
            for e in st.evidence
            if e.kind.value == "trace-compare"
        ]
        return json.dumps({"captures": rows, "comparisons": compares}, indent=2)

    def report_md() -> str:
        md = ws.ledger.workspace / "report" / "report.md"
        if not md.is_file():
            raise InputError("no report written yet: call write_report")
        return md.read_text()

    return [
        _resource(
            "triage://traces",
            "traces",
            "Trace summaries: every capture (run, window, level, per-rank files with sha256) and "
            "every comparison (status, completeness, cross-rank summary) in the ledger, as JSON.",
            "application/json",
            traces_json,
        ),
        _resource(
            "triage://report",
            "report",
            "The reviewer's report (Markdown) last written by write_report.",
            "text/markdown",
            report_md,
        ),
        _resource(
            "triage://ledger",
            "ledger",
            "The evidence ledger folded into its current state (case, findings, hypotheses, "
            "evidence, verdict), as JSON.",
            "application/json",
            lambda: dumps_state(ws.ledger.state()),
        ),
        _resource(
            "triage://ledger.md",
            "ledger-markdown",
            "The evidence ledger as Markdown, for reading.",
            "text/markdown",
            lambda: to_markdown(ws.ledger.state()),
        ),
        _resource(
            "triage://findings",
            "findings",
            "Static-scan findings recorded in the ledger, as JSON.",
            "application/json",
            findings_json,
        ),
        _resource(
            "triage://case", "case", "The open case, as JSON.", "application/json", case_json
        ),
        _resource(
            "triage://workspace",
            "workspace",
            "Where this server may read and write: the workspace, allowed roots, the ledger.",
            "application/json",
            lambda: ws.info().model_dump_json(indent=2),
        ),
    ]


def build_server(ws: Workspace) -> MCPServer:
    specs = available_tools()
    names = {s.name for s in specs}
    server: MCPServer = MCPServer(
        "bitwise-triage",
        title="bitwise-triage",
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=[_sdk_tool(s, ws) for s in specs],
        resources=_resources(ws),
    )

    @server.resource(
        COMPARE_RESOURCE,
        name="comparison",
        description="The whole trace comparison a compare_traces call recorded (every "
        "candidate and unmatched event of every rank), by its evidence id, as JSON.",
        mime_type="application/json",
    )
    def comparison(evidence_id: str) -> str:
        try:
            return cap_text(full_result(ws, evidence_id))
        except TriageError as exc:
            raise ResourceError(_one_line(exc)) from exc

    def two_stage_triage(mismatch_step: str = "", budget_minutes: str = "20") -> str:
        """The two-stage workflow: bounded static triage, execution evidence, then tracing."""
        try:
            step = int(mismatch_step) if mismatch_step else None
            budget = int(budget_minutes)
        except ValueError:
            raise InputError("mismatch_step and budget_minutes must be whole numbers") from None
        if step is None and ws.case is not None:
            step = ws.case.mismatch_step
        return two_stage_prompt(names, step, max(1, min(budget, 24 * 60)))

    server.add_prompt(Prompt.from_function(two_stage_triage, title="Two-stage bitwise triage"))
    return server


# -- transports ------------------------------------------------------------------------------
def check_loopback(host: str) -> str:
    try:
        ok = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise InputError(
            f"--host {host!r} is not a loopback address: HTTP is served on loopback only"
        )
    return host


class BearerAuth:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str):
        if len(token) < 16:
            raise InputError("the bearer token must be at least 16 characters")
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="triage-mcp"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
                return
        await self.app(scope, receive, send)


def http_app(server: MCPServer, host: str, token: str) -> Any:
    return BearerAuth(server.streamable_http_app(host=check_loopback(host)), token)


async def serve_http(server: MCPServer, host: str, port: int, token: str) -> None:
    import uvicorn

    app = http_app(server, host, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


def serve(
    workspace: str,
    case: str | None,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
) -> None:
    """Open the workspace and serve until the client goes away (stdio) or the process is
    stopped (HTTP). Raises TriageError for a bad workspace, case, host or token."""
    ws = Workspace(workspace, case)
    server = build_server(ws)
    if transport == "http":
        check_loopback(host)
        if not token or len(token) < 16:
            raise InputError("HTTP needs TRIAGE_MCP_TOKEN set to a secret of 16+ characters")
        anyio.run(serve_http, server, host, port, token)
    else:
        anyio.run(server.run_stdio_async)
