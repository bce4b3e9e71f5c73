"""Fuzzing the MCP server: tool calls generated from the tools' own input schemas, counted.

Why: the MCP client is an assistant acting on untrusted text. Whatever it sends, the server
must not crash, must not hand back or write a path outside the workspace and the source
roots (through ``..``, absolute paths or symlinks planted in the workspace, traces and
dumps), must run no command that did not come from the case file it was started with, and
must answer within a timeout. This drives ``triage-mcp`` as a subprocess, over stdio and over
streamable HTTP with its bearer token, with calls whose arguments are generated from each
tool's input schema (``list_tools``): valid ones (every bound, enum, pattern and
``$ref`` followed) and invalid ones (wrong types, missing required fields, unknown fields,
huge or negative numbers, over-long strings and lists). Strings are drawn from a pool of
hostile values: ``../`` chains, absolute paths, the planted symlinks, flag-like strings
(``--upload-pack=...``, ``-rf``), shell fragments that would create a canary file, NUL
bytes, non-ASCII text, and ids learnt from earlier results.

What is counted, per transport:

- crashes: the server process gone or the session broken;
- escapes: a path in a successful result that resolves (symlinks followed) outside the
  workspace, the source roots and the read-only framework roots; the content of a secret
  file outside the workspace (every planted link points at it) appearing in any result or
  resource; a file created or changed outside the workspace;
- smuggled commands: the canary file created, or a process of the server's tree whose
  command line holds the canary marker (every hostile command string carries it);
- hangs: a call that had no answer within ``--call-timeout``;
- auth: HTTP requests without the token, with a wrong one, or with a near miss, each of
  which must be answered 401.

    python benchmarks/fuzz_mcp.py [--trials 10000] [--seed 0] [--transport both]
                                  [--heavy 40] [--call-timeout 120] [--workdir DIR]

``--trials`` is the number of tool calls in all, split between the transports. Tools that
run processes (``open_world`` in their annotations) get valid arguments at most ``--heavy``
times per transport, with one rank and the python launcher, so that a run stays within
minutes on a small machine; their invalid calls are not limited. Exit 1 if any count that
must be 0 is not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path and a module of the same
# name as an installed package (mcp_server.py) would shadow it: drop that entry, and put the
# repository first so that the benchmarks' and the tests' shared code is found.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import anyio  # noqa: E402
import psutil  # noqa: E402

from benchmarks.md_table import markdown_table  # noqa: E402

MARK = "zzcanary"  # every hostile command string carries it; no real command does
SECRET = "SECRET-" + "5f1c0de" * 4  # the content of the file every planted link points at

# -- the workspace ------------------------------------------------------------------------

LOWP_SRC = """import torch
import torch.distributed as dist


def reduce_grads(grad):
    low = grad.to(torch.bfloat16)
    dist.all_reduce(low)
    grad.copy_(low.float())
"""


@dataclass
class Site:
    root: Path  # the directory holding the workspace and the outside
    ws: Path
    outside: Path
    canary: Path
    links: list[str]  # workspace-relative names of the planted links


def build_site(root: Path) -> Site:
    """A workspace with a case, two runs, a source root and a native trace pair, and links
    planted inside it (a directory, a source file, a metric file, a trace rank file, a dump)
    that all point at one secret outside it."""
    import torch

    sys.path.insert(0, str(_HERE.parent / "tests"))
    from test_mcp_support import case_toml, write_runs

    shutil.rmtree(root, ignore_errors=True)
    ws, outside = root / "ws", root / "outside"
    outside.mkdir(parents=True)
    for name in ("secret.txt", "secret.py", "secret.jsonl", "trace_rank00000.jsonl"):
        (outside / name).write_text(f"{SECRET}\n")
    torch.save({"x": torch.zeros(2)}, outside / "secret.pt")
    write_runs(ws)
    (ws / "src").mkdir()
    (ws / "src" / "acc.py").write_text(LOWP_SRC)
    (ws / "src" / "train.py").write_text("x = 1\n")
    launches = ([sys.executable, "-c", f"print('run {run}')"] for run in "ab")
    (ws / "triage.toml").write_text(case_toml("fuzz", *launches))
    (ws / "traces" / "a").mkdir(parents=True)
    (ws / "traces" / "b").mkdir(parents=True)
    (ws / "dumps").mkdir()
    torch.save({"x": torch.ones(2)}, ws / "dumps" / "ok.pt")
    plant = {
        "evil_dir": outside,
        "src/leak.py": outside / "secret.py",
        "src/evil_dir": outside,
        "runs/a/leak.jsonl": outside / "secret.jsonl",
        "traces/b/trace_rank00000.jsonl": outside / "trace_rank00000.jsonl",
        "traces/evil": outside,
        "dumps/leak.pt": outside / "secret.pt",
        "leak.toml": outside / "secret.txt",
    }
    for rel, target in plant.items():
        (ws / rel).symlink_to(target)
    return Site(root, ws, outside, root / f"{MARK}-pwned", sorted(plant))


def _digest_tree(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        h.update(str(p.relative_to(d)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


# -- arguments from a schema --------------------------------------------------------------


def hostile_strings(site: Site) -> list[str]:
    canary = str(site.canary)
    return [
        *site.links,
        *(f"{ln}/secret.txt" for ln in site.links),
        "runs/a",
        "runs/b",
        "src",
        "src/acc.py",
        "traces/a",
        "traces/b",
        "dumps/ok.pt",
        "triage.toml",
        "../outside/secret.txt",
        "../" * 12 + "etc/passwd",
        "src/../../outside",
        str(site.outside / "secret.txt"),
        "/etc/passwd",
        "/proc/self/environ",
        "~/.ssh/id_rsa",
        "file:///etc/passwd",
        "-rf",
        "--help",
        f"--upload-pack=touch {canary}",
        f"--output={canary}",
        f"-o{canary}",
        f"$(touch {canary})",
        f"`touch {canary}`",
        f"; touch {canary} #",
        f"| touch {canary}",
        f"&& touch {canary}",
        f"env LD_PRELOAD={canary}.so",
        f"replace os:system=os:system {canary}",
        f"config --exec=touch {canary}",
        f"HEAD; touch {canary}",
        "HEAD~1",
        "main..HEAD",
        "\x00",
        "a\x00b",
        "é" * 50,
        "",
        " ",
        ".",
        "..",
        "x" * 5000,
        "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "deterministic",
        "restore-rng",
        "env OMP_NUM_THREADS=1",
        "casts",
        "bug",
    ]


class Gen:
    """Arguments for one tool from its input schema, valid or deliberately not."""

    def __init__(self, rng: random.Random, pool: list[str]):
        self.rng = rng
        self.pool = pool
        self.ids: list[str] = []  # learnt from results: hypothesis, finding, reproducer ids

    def learn(self, obj: Any) -> None:
        if isinstance(obj, dict):
            for v in obj.values():
                self.learn(v)
        elif isinstance(obj, list):
            for v in obj:
                self.learn(v)
        elif (
            isinstance(obj, str)
            and re.fullmatch(r"[A-Z]{1,3}-[0-9a-f]{6,32}", obj)
            and obj not in self.ids
        ):
            self.ids.append(obj)
            del self.ids[:-200]

    @staticmethod
    def _deref(schema: dict, defs: dict) -> dict:
        while "$ref" in schema:
            schema = defs[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def value(self, schema: dict, defs: dict, depth: int = 0) -> Any:
        r = self.rng
        schema = self._deref(schema, defs)
        if "anyOf" in schema:
            return self.value(r.choice(schema["anyOf"]), defs, depth)
        if "enum" in schema:
            return r.choice(schema["enum"])
        if "const" in schema:
            return schema["const"]
        t = schema.get("type")
        if isinstance(t, list):
            t = r.choice(t)
        if t == "string":
            return self._string(schema)
        if t == "integer":
            lo = schema.get("minimum", schema.get("exclusiveMinimum", -(10**6)) + 1)
            hi = schema.get("maximum", schema.get("exclusiveMaximum", 10**6) - 1)
            return r.choice([lo, hi, r.randint(lo, min(hi, lo + 10)), r.randint(lo, hi)])
        if t == "number":
            lo = schema.get("minimum", schema.get("exclusiveMinimum", 0))
            hi = schema.get("maximum", schema.get("exclusiveMaximum", 1e6))
            v = r.choice([r.uniform(lo, hi), hi, lo + 0.5])
            return max(v, lo + 1e-3) if "exclusiveMinimum" in schema else v
        if t == "boolean":
            return r.random() < 0.5
        if t == "null":
            return None
        if t == "array":
            lo = schema.get("minItems", 0)
            hi = min(schema.get("maxItems", 4), lo + 3)
            items = schema.get("items", {})
            return [self.value(items, defs, depth + 1) for _ in range(r.randint(lo, hi))]
        if t == "object" or "properties" in schema:
            return self.obj(schema, defs, depth + 1)
        return self._string({})

    def _string(self, schema: dict) -> str:
        r = self.rng
        pattern = schema.get("pattern")
        cands = self.pool + self.ids
        if pattern:
            ok = [s for s in cands if re.search(pattern, s)]
            if "R-" in pattern and r.random() < 0.5:
                ok.append("R-" + "".join(r.choice("0123456789abcdef") for _ in range(16)))
            s = r.choice(ok) if ok else "x"
        else:
            s = r.choice(cands) if r.random() < 0.9 else "".join(r.choices("ab/.-_~$", k=8))
        lo, hi = schema.get("minLength", 0), schema.get("maxLength", 10**6)
        if len(s) < lo:
            s = s + "x" * (lo - len(s))
        return s[:hi]

    def obj(self, schema: dict, defs: dict, depth: int = 0) -> dict:
        props = schema.get("properties", {})
        req = set(schema.get("required", []))
        out = {}
        for k, sub in props.items():
            if k in req or (depth < 4 and self.rng.random() < 0.5):
                out[k] = self.value(sub, defs, depth)
        return out

    def invalid(self, schema: dict) -> dict:
        """Valid arguments with one or two things made wrong."""
        r = self.rng
        defs = schema.get("$defs", {})
        args = self.obj(schema, defs)
        props = list(schema.get("properties", {}))
        for _ in range(r.randint(1, 2)):
            how = r.choice(("type", "type", "missing", "extra", "huge", "long", "list", "deep"))
            key = r.choice(props) if props else "x"
            if how == "missing" and schema.get("required"):
                args.pop(r.choice(schema["required"]), None)
            elif how == "extra" or not props:
                args[r.choice(self.pool)[:40] or "_"] = r.choice(self.pool)
            elif how == "type":
                args[key] = r.choice([1, -1, 1.5, True, None, "x", [], {}, [1, "a"], {"a": 1}])
            elif how == "huge":
                args[key] = r.choice([10**30, -(10**30), 1e308, -1e308, 2**63, 2**64, -1, 0])
            elif how == "long":
                args[key] = "y" * r.choice([4097, 20_001, 200_000])
            elif how == "list":
                args[key] = ["z"] * r.choice([501, 2000])
            else:
                nest: Any = "x"
                for _ in range(r.choice([20, 60])):
                    nest = {"a": nest}
                args[key] = nest
        return args


# -- checking results ---------------------------------------------------------------------


# Keys whose values name files: a path the server accepted, resolved or wrote. Free text
# (a statement, a note, a case name, a verdict's location) may quote any string the client
# sent: not checked.
PATH_KEY = re.compile(
    r"path|dir|file|root|ledger|metrics|trace|dump|repo|cwd|out|artifact|workspace|scan|"
    r"source|log|report|html|markdown_file|script"
)


def path_values(obj: Any, key: str = "") -> list[str]:
    """The strings of a result held under a key that names a file."""
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in path_values(v, str(k))]
    if isinstance(obj, list):
        return [s for v in obj for s in path_values(v, key)]
    if isinstance(obj, str) and PATH_KEY.search(key.lower()):
        return [obj]
    return []


@dataclass
class Allowed:
    roots: list[Path]
    exact: set[str]  # paths a result may name although outside: the interpreter

    def escapes(self, site: Site, obj: Any) -> list[str]:
        """Path values of a result that resolve, symlinks followed, outside every root."""
        bad = []
        for s in path_values(obj):
            # a finding's file may read 'file:line (function)'
            tok = re.split(r"[ ;]", s, maxsplit=1)[0]
            tok = re.sub(r":\d+$", "", tok)
            if not tok or "\x00" in tok or len(tok) > 4096 or "://" in tok:
                continue
            p = Path(tok).expanduser() if not tok.startswith("~") else Path(tok)
            p = p if p.is_absolute() else site.ws / p
            try:
                real = p.resolve()
            except (OSError, RuntimeError):
                continue
            if not real.exists() or tok in self.exact or str(real) in self.exact:
                continue
            if not any(real.is_relative_to(r) for r in self.roots):
                bad.append(tok)
        return bad


# -- one transport ------------------------------------------------------------------------


@dataclass
class Stats:
    transport: str
    calls: int = 0
    valid: int = 0
    ok: int = 0  # answered without a tool error
    refused: int = 0  # answered with a one-line tool error
    crashes: int = 0
    escapes: int = 0
    leaks: int = 0  # the secret's content in a result
    outside_writes: int = 0
    smuggled: int = 0
    hangs: int = 0
    tracebacks: int = 0  # unexpected errors the server logged (the client saw a generic one)
    bad_results: int = 0  # an answer the client could not take (schema, protocol)
    auth_tried: int = 0
    auth_refused: int = 0
    seconds: float = 0.0
    by_tool: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.crashes
            or self.escapes
            or self.leaks
            or self.outside_writes
            or self.smuggled
            or self.hangs
            or self.tracebacks
            or self.auth_tried != self.auth_refused
        )

    def fail(self, what: str) -> None:
        if len(self.failures) < 20:
            self.failures.append(what[:400])


class Watch:
    """Polls the server's process tree for command lines holding the canary marker."""

    def __init__(self, pid: int):
        self.pid = pid
        self.seen: set[str] = set()

    def poll(self) -> None:
        try:
            kids = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return
        for k in kids:
            try:
                line = " ".join(k.cmdline())
            except psutil.Error:
                continue
            if MARK in line:
                self.seen.add(line)


def _server_argv(site: Site, http_port: int | None) -> list[str]:
    exe = shutil.which("triage-mcp") or str(Path(sys.executable).with_name("triage-mcp"))
    argv = [exe, "--workspace", str(site.ws)]
    if http_port is not None:
        argv += ["--transport", "http", "--port", str(http_port)]
    return argv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if proc.poll() is not None:
            raise RuntimeError(f"triage-mcp exited with {proc.returncode}")
        time.sleep(0.2)
    raise TimeoutError("triage-mcp did not listen")


def _wrong_tokens(token: str, rng: random.Random) -> list[dict[str, str]]:
    near = token[:-1] + ("a" if token[-1] != "a" else "b")
    return [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer "},
        {"Authorization": f"Bearer {near}"},
        {"Authorization": f"Bearer {token[:-1]}"},
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"bearer {token}"},
        {"Authorization": f"Bearer  {token}"},
        {"Authorization": f"Basic {token}"},
        {"Authorization": token},
        {"Authorization": f"Bearer {token.upper()}"},
        {"Authorization": f"Bearer {secrets.token_urlsafe(24)}"},
        {"X-Authorization": f"Bearer {token}"},
        {"Authorization": f"Bearer {token}\x00"[:-1] + " "},
        {"Authorization": "Bearer " + "A" * rng.choice([16, 1000, 60000])},
    ]


async def _auth_probe(url: str, token: str, stats: Stats, rng: random.Random) -> None:
    """Requests without the token or with a wrong one: each must be refused (401)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "add_note", "arguments": {"text": f"{MARK} unauthenticated"}},
    }
    hdr = {"Accept": "application/json, text/event-stream"}
    async with create_mcp_http_client() as raw:
        for headers in _wrong_tokens(token, rng):
            for method in ("POST", "GET", "DELETE"):
                stats.auth_tried += 1
                try:
                    resp = await raw.request(
                        method, url, json=init if method == "POST" else None, headers=hdr | headers
                    )
                    code = resp.status_code
                except Exception as exc:  # noqa: BLE001 - a refused header is a refusal too
                    code = 401 if "header" in str(exc).lower() else -1
                if code == 401:
                    stats.auth_refused += 1
                else:
                    stats.fail(f"auth: {method} with {str(headers)[:80]} answered {code}")


async def _session(
    site: Site,
    transport: str,
    calls: int,
    rng: random.Random,
    stats: Stats,
    allowed: Allowed,
    heavy: int,
    call_timeout: float,
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    gen = Gen(rng, hostile_strings(site))
    heavy_left: Counter = Counter()
    outside_digest = _digest_tree(site.outside)
    proc: subprocess.Popen | None = None
    token = secrets.token_urlsafe(24)
    url = ""
    if transport == "http":
        port = _free_port()
        env = {**os.environ, "TRIAGE_MCP_TOKEN": token}
        proc = subprocess.Popen(
            _server_argv(site, port),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(site.root / "server-http.log").open("ab"),
            cwd=site.ws,
        )
        _wait_port(port, proc)
        url = f"http://127.0.0.1:{port}/mcp"
        await _auth_probe(url, token, stats, rng)
    done = broken = 0
    while done < calls:
        at_start = done
        # one session until it breaks (a crash): then a new one, and the crash is counted
        try:
            if transport == "http":
                http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
                client = Client(streamable_http_client(url, http_client=http))
                server_pid = proc.pid
            else:
                http = None
                argv = _server_argv(site, None)
                # the server's stderr goes to a file, where its tracebacks are counted
                params = StdioServerParameters(
                    command=sys.executable,
                    args=["-c", _TO_LOG, str(site.root / "server-stdio.log"), *argv],
                    cwd=str(site.ws),
                    env=dict(os.environ),
                )
                client = Client(params)
            async with client as c:
                if transport != "http":
                    server_pid = _stdio_server_pid(argv[0])
                watch = Watch(server_pid)
                tools = {t.name: t for t in (await c.list_tools()).tools}
                for name in heavy_left.keys() | tools.keys():
                    t = tools.get(name)
                    if t and t.annotations and t.annotations.open_world_hint:
                        heavy_left.setdefault(name, heavy)
                while done < calls:
                    done += 1
                    await _one_call(c, tools, gen, heavy_left, stats, site, allowed, call_timeout)
                    watch.poll()
                    if done % 500 == 0:
                        print(f"progress {table([stats]).splitlines()[-1]}", flush=True)
                    if done % 50 == 0 or done == calls:
                        await _read_resources(c, stats, allowed, site)
                        if _digest_tree(site.outside) != outside_digest:
                            stats.outside_writes += 1
                            stats.fail(f"files outside the workspace changed by call {done}")
                            outside_digest = _digest_tree(site.outside)
                stats.smuggled += len(watch.seen)
                for line in watch.seen:
                    stats.fail(f"smuggled command: {line}")
            if http is not None:
                await http.aclose()
        except Exception as exc:  # noqa: BLE001 - the session broke: the server crashed
            if not _broken_session(exc):
                raise  # the harness's own error, not the server's
            stats.crashes += 1
            stats.fail(f"session broke after call {done}: {_innermost(exc)}")
            broken = broken + 1 if done == at_start else 0
            if broken >= 3 or (
                transport == "http" and proc is not None and proc.poll() is not None
            ):
                break  # the server does not even start: nothing more to learn
    if site.canary.exists() or any(site.root.glob(f"*{MARK}*")):
        stats.smuggled += 1
        stats.fail("the canary file was created")
    logs = [p.read_text(errors="replace") for p in site.root.glob("server-*.log")]
    stats.tracebacks = sum(t.count("Traceback (most recent call last)") for t in logs)
    if proc is not None:
        if proc.poll() is not None:
            stats.crashes += 1
            stats.fail(f"the HTTP server exited with {proc.returncode}")
        proc.terminate()
        proc.wait(timeout=30)


def _broken_session(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(
        exc, MCPError | anyio.ClosedResourceError | anyio.BrokenResourceError | OSError
    )


def _innermost(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


_TO_LOG = "import os, sys; fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND); "
_TO_LOG += "os.dup2(fd, 2); os.execv(sys.argv[2], sys.argv[2:])"


def _stdio_server_pid(exe: str) -> int:
    me = psutil.Process()
    for k in me.children(recursive=True):
        try:
            if exe in " ".join(k.cmdline()):
                return k.pid
        except psutil.Error:
            continue
    return me.pid


async def _one_call(c, tools, gen: Gen, heavy_left, stats, site, allowed, call_timeout) -> None:
    from mcp.shared.exceptions import MCPError

    rng = gen.rng
    name = rng.choice(sorted(tools))
    schema = tools[name].input_schema
    valid = rng.random() < 0.6
    if valid and name in heavy_left:
        if heavy_left[name] <= 0:
            valid = False
        else:
            heavy_left[name] -= 1
    args = gen.obj(schema, schema.get("$defs", {})) if valid else gen.invalid(schema)
    if valid and name in heavy_left:
        # one rank, plain python, a short timeout: the budget of a small machine
        args.update({k: v for k, v in (("ranks", 1), ("launcher", "python")) if k in args})
        if "timeout_s" in schema.get("properties", {}):
            args["timeout_s"] = 60
        if "budget_minutes" in args:
            args["budget_minutes"] = 1
    stats.calls += 1
    stats.valid += valid
    stats.by_tool[name] += 1
    try:
        with anyio.fail_after(call_timeout):
            res = await c.call_tool(name, args)
    except TimeoutError:
        stats.hangs += 1
        stats.fail(f"hang: {name} {json.dumps(args)[:200]}")
        return
    except MCPError as exc:
        stats.refused += 1  # a protocol-level refusal (arguments the SDK rejected)
        _check_text(str(exc), stats, f"{name} error")
        return
    except (ValueError, TypeError, RuntimeError) as exc:
        # the client's own refusal of an answer it cannot take (e.g. not its output schema)
        stats.bad_results += 1
        stats.fail(f"bad result: {name}: {type(exc).__name__}: {str(exc)[:200]}")
        return
    texts = [getattr(b, "text", "") for b in res.content]
    for t in texts:
        _check_text(t, stats, name)
    if res.is_error:
        stats.refused += 1
        return
    stats.ok += 1
    gen.learn(res.structured_content)
    bad = allowed.escapes(site, res.structured_content)
    if bad:
        stats.escapes += len(bad)
        stats.fail(f"escape: {name} {json.dumps(args)[:200]} -> {bad[:3]}")


def _check_text(text: str, stats: Stats, where: str) -> None:
    if SECRET in text:
        stats.leaks += 1
        stats.fail(f"secret leaked in {where}")


async def _read_resources(c, stats: Stats, allowed: Allowed, site: Site) -> None:
    for r in (await c.list_resources()).resources:
        try:
            got = await c.read_resource(r.uri)
        except Exception:  # noqa: BLE001 - a resource error (no report yet) is an answer
            continue
        for part in got.contents:
            text = getattr(part, "text", "") or ""
            _check_text(text, stats, f"resource {r.uri}")
            try:
                obj = json.loads(text)
            except ValueError:
                continue
            bad = allowed.escapes(site, obj)
            if bad:
                stats.escapes += len(bad)
                stats.fail(f"escape in resource {r.uri}: {bad[:3]}")


def allowed_for(site: Site) -> Allowed:
    from mcp_server.security import Workspace

    info = Workspace(site.ws).info()
    roots = [Path(r) for r in [*info.allowed_roots, *info.read_only_roots]]
    exe = {sys.executable, str(Path(sys.executable).resolve())}
    return Allowed(roots=roots, exact=exe)


def fuzz(
    calls: int,
    transport: str,
    seed: int,
    workdir: Path,
    heavy: int = 40,
    call_timeout: float = 120.0,
) -> Stats:
    """``calls`` generated tool calls over one transport against a fresh planted site."""
    site = build_site(workdir / f"site-{transport}")
    allowed = allowed_for(site)
    stats = Stats(transport)
    t0 = time.perf_counter()
    rng = random.Random(seed)
    anyio.run(_session, site, transport, calls, rng, stats, allowed, heavy, call_timeout)
    stats.seconds = time.perf_counter() - t0
    from triage_agent.ledger import Ledger

    st = Ledger(site.ws / ".triage").state()  # the ledger the fuzzing wrote to still reads
    if st.torn_tail is not None:
        stats.fail(f"torn ledger tail after fuzzing: {st.torn_tail}")
    return stats


COLUMNS = (
    "transport", "calls", "valid args", "answered", "refused (one line)", "crashes", "escapes",
    "secret leaked", "writes outside", "smuggled commands", "hangs", "server tracebacks",
    "auth refused", "s",
)  # fmt: skip


def table(results: list[Stats]) -> str:
    def row(s: Stats) -> list[object]:
        auth = f"{s.auth_refused}/{s.auth_tried}" if s.auth_tried else "-"
        counts = [s.crashes, s.escapes, s.leaks, s.outside_writes, s.smuggled, s.hangs]
        calls = [f"{n:,}" for n in (s.calls, s.valid, s.ok, s.refused)]
        return [s.transport, *calls, *counts, s.tracebacks, auth, f"{s.seconds:.0f}"]

    return markdown_table(COLUMNS, map(row, results))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=10_000, help="tool calls in all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--transport", choices=("stdio", "http", "both"), default="both")
    ap.add_argument("--heavy", type=int, default=40, help="valid calls per process-running tool")
    ap.add_argument("--call-timeout", type=float, default=120.0)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "fuzz-mcp")
    a = ap.parse_args(argv)
    transports = ["stdio", "http"] if a.transport == "both" else [a.transport]
    per = a.trials // len(transports)
    results = [
        fuzz(per, t, a.seed + k, a.workdir, a.heavy, a.call_timeout)
        for k, t in enumerate(transports)
    ]
    print(table(results))
    for s in results:
        print(f"{s.transport}: calls per tool {dict(sorted(s.by_tool.items()))}")
        for f in s.failures:
            print(f"  FAILED {s.transport}: {f}")
    clean = all(s.clean for s in results)
    print(
        f"summary: {sum(s.calls for s in results):,} calls, "
        f"{sum(s.crashes for s in results)} crashes, "
        f"{sum(s.escapes + s.leaks + s.outside_writes for s in results)} escapes, "
        f"{sum(s.smuggled for s in results)} smuggled commands, "
        f"{sum(s.hangs for s in results)} hangs, "
        f"{sum(s.tracebacks for s in results)} server tracebacks, "
        f"{sum(s.bad_results for s in results)} results the client refused; "
        f"{'clean' if clean else 'FAILED'}"
    )
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
