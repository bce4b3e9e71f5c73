"""Faults, counted: kill -9 during ledger appends, and a full disk under the ledger and a trace.

Why: a ledger next to a job that costs thousands of GPU-hours must lose nothing that was
recorded, whatever kills the process recording it. This kills writers at random moments
and checks, after every trial, what the ledger promises:

- every append that returned is in the ledger (each writer reports an append on a pipe
  only after the call returned; an append cut short may or may not be there);
- the ledger reads, with at most one torn last line, reported with its offset;
- the next append works, moves a torn tail to ``ledger.jsonl.torn-<offset>`` byte for byte
  and records a note naming it, and loses nothing.

Trial classes: one writer; several writers (2-4) killed together; several killed one by one
at independent moments (the survivors go on appending over a dead writer's torn tail, and
are killed later). Writers mix the public API's appends: evidence (payloads from a few
bytes to 4 MiB, so that some kills land inside a write), notes, new hypotheses and
hypothesis updates (a fold of the whole ledger under the lock). Every trial starts from a
ledger holding a case, a hypothesis and an evidence record, which must survive too.

Full disk (``RLIMIT_FSIZE`` in a child, SIGXFSZ ignored so a write fails with EFBIG as on a
full disk): a ``triage`` command whose ledger append does not fit, and a traced training
step whose trace does not fit. Each must end with one line on stderr and a non-zero exit,
and the ledger must hold everything it held before, readable.

    python benchmarks/faults.py [--trials 200] [--seed 0] [--workdir DIR] [--no-disk]

Limits: kill -9 of a process, not power loss: what a killed process wrote to the page
cache survives it, so this tests the ledger's locking, framing and torn-tail recovery, not
the disk's write ordering.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the benchmarks' shared table code
from benchmarks.md_table import markdown_table  # noqa: E402

TOKEN = re.compile(r"kt-w\d+-n\d+")
PAYLOADS = (0, 64, 4096, 65536, 1 << 20, 16 << 20)
CLASSES = ("one writer", "several, killed together", "several, killed one by one")

# -- the writer (a child process) -------------------------------------------------------


def writer(workspace: Path, index: int, seed: int) -> None:
    """Append forever through the public API; after each append returns, report its token."""
    from triage_agent.ledger import Ledger
    from triage_agent.records import Evidence, EvidenceKind, EvidenceResult, Hypothesis

    rng = random.Random(seed)
    led = Ledger(workspace)
    mine: list[str] = []
    os.write(1, b"ready\n")
    for n in range(10**9):
        token = f"kt-w{index}-n{n}"
        op = rng.choice(("evidence", "evidence", "note", "hypothesis", "update"))
        if op == "update" and mine:
            led.update_hypothesis(rng.choice(mine), rationale=token)
        elif op in ("hypothesis", "update"):
            hyp = Hypothesis(statement=token, rationale=token, category="other")
            mine.append(led.put_hypothesis(hyp).id)
        elif op == "note":
            led.note(token, writer=index)
        else:
            pad = "x" * rng.choice(PAYLOADS)
            led.add_evidence(
                Evidence(
                    kind=EvidenceKind.note,
                    result=EvidenceResult.observed,
                    summary=f"{token} {pad}",
                )
            )
        os.write(1, f"{token}\n".encode())


# -- one trial --------------------------------------------------------------------------


@dataclass
class Trial:
    klass: str
    writers: int
    returned: int = 0  # appends reported as returned
    lost: int = 0  # ... of which missing from the ledger
    duplicated: int = 0  # tokens recorded more than once
    torn_left: bool = False  # the killed writers left a torn tail
    quarantined_live: int = 0  # torn tails a surviving writer moved aside during the trial
    quarantine_ok: bool = True  # the next append moved the tail aside byte for byte, noted
    next_append_ok: bool = True
    history_ok: bool = True
    error: str = ""  # the ledger did not read, or a writer did not start

    @property
    def survived(self) -> bool:
        return (
            not self.error
            and not self.lost
            and not self.duplicated
            and self.quarantine_ok
            and self.next_append_ok
            and self.history_ok
        )


def _seed_ledger(ws: Path) -> set[str]:
    from triage_agent.ledger import Ledger
    from triage_agent.records import (
        Case,
        Evidence,
        EvidenceKind,
        EvidenceResult,
        Hypothesis,
        RunSpec,
    )

    led = Ledger(ws)
    led.set_case(Case(name="kt-history-case", run_a=RunSpec(name="a"), run_b=RunSpec(name="b")))
    led.put_hypothesis(Hypothesis(statement="kt-history-hyp", category="other"))
    led.add_evidence(
        Evidence(kind=EvidenceKind.note, result=EvidenceResult.observed, summary="kt-history-ev")
    )
    return {"kt-history-case", "kt-history-hyp", "kt-history-ev"}


def _spawn(ws: Path, index: int, seed: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--writer", str(ws), str(index), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )


def _read_reports(procs: list[subprocess.Popen], until_ready: bool, timeout: float) -> list[str]:
    """Lines the writers reported; with ``until_ready``, only until each said 'ready'."""
    sel = selectors.DefaultSelector()
    bufs: dict[int, bytes] = {}
    for p in procs:
        assert p.stdout is not None
        sel.register(p.stdout, selectors.EVENT_READ, p.pid)
        bufs[p.pid] = b""
    open_ = {p.pid for p in procs}
    deadline = time.monotonic() + timeout
    while open_ and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.05):
            chunk = os.read(key.fileobj.fileno(), 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
                open_.discard(key.data)
                continue
            bufs[key.data] += chunk
            if until_ready and b"ready\n" in bufs[key.data]:
                sel.unregister(key.fileobj)
                open_.discard(key.data)
    sel.close()
    if open_:
        raise TimeoutError(f"{len(open_)} writer(s) silent for {timeout} s")
    lines = [ln for b in bufs.values() for ln in b.decode().splitlines()]
    return [ln for ln in lines if ln != "ready"]


def _own_token(ev) -> str | None:
    """The token an append introduced: a hypothesis carries its statement into every later
    version, so its own token is the rationale (set on creation and on each update)."""
    text = {"evidence": "summary", "note": "text", "hypothesis": "rationale"}.get(ev.kind)
    m = TOKEN.match(str(ev.data.get(text, ""))) if text else None
    return m.group(0) if m else None


def _tokens_in(events) -> Counter:
    return Counter(t for t in map(_own_token, events) if t)


def _history_ok(events, history: set[str]) -> bool:
    import json

    text = " ".join(json.dumps(ev.data) for ev in events[:10])
    return all(h in text for h in history)


def run_trial(
    ws: Path,
    klass: str,
    rng: random.Random,
    max_delay: float = 0.4,
    after_kill: Callable[[Path, list[str]], None] | None = None,
) -> Trial:
    """One trial; ``after_kill`` (for the checker's own test) may damage the ledger first."""
    from triage_agent.errors import TriageError
    from triage_agent.ledger import Ledger

    shutil.rmtree(ws, ignore_errors=True)
    history = _seed_ledger(ws)
    n = 1 if klass == CLASSES[0] else rng.randint(2, 4)
    trial = Trial(klass, n)
    procs = [_spawn(ws, i, rng.randrange(1 << 30)) for i in range(n)]
    try:
        _read_reports(procs, until_ready=True, timeout=60)
    except TimeoutError as exc:
        for p in procs:
            p.kill()
            p.wait()
        trial.error = f"writer start: {exc}"
        return trial
    if klass == CLASSES[2]:
        moments = sorted(rng.uniform(0, max_delay) for _ in procs)
    else:
        moments = [rng.uniform(0, max_delay)] * n
    t0 = time.monotonic()
    for p, at in zip(procs, moments, strict=True):
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        p.send_signal(signal.SIGKILL)
    for p in procs:
        p.wait()
    reported = _read_reports(procs, until_ready=False, timeout=10)
    for p in procs:
        p.stdout.close()
    trial.returned = len(reported)
    if after_kill is not None:
        after_kill(ws, reported)
    trial.quarantined_live = len(list(ws.glob("ledger.jsonl.torn-*")))
    led = Ledger(ws)
    try:
        events, torn = led.read_events()
        led.state()
    except TriageError as exc:
        trial.error = f"unreadable after the kill: {exc}"
        return trial
    trial.torn_left = torn is not None
    seen = _tokens_in(events)
    trial.lost = sum(1 for t in reported if seen[t] == 0)
    trial.duplicated = sum(1 for t, k in seen.items() if k > 1)
    trial.history_ok = _history_ok(events, history)
    tail = led.path.read_bytes()[torn.offset :] if torn else b""
    try:
        led.note("kt-after", level="info")
        after, torn_after = led.read_events()
        led.state()
    except (TriageError, OSError) as exc:
        trial.next_append_ok = False
        trial.error = f"next append: {exc}"
        return trial
    seen_after = _tokens_in(after)
    trial.next_append_ok = torn_after is None and after[-1].data.get("text") == "kt-after"
    trial.lost = max(trial.lost, sum(1 for t in reported if seen_after[t] == 0))
    if torn:
        aside = ws / f"ledger.jsonl.torn-{torn.offset}"
        noted = any(e.kind == "note" and aside.name in str(e.data.get("text", "")) for e in after)
        trial.quarantine_ok = aside.is_file() and aside.read_bytes() == tail and noted
    return trial


def run_trials(trials: int, seed: int, workdir: Path, max_delay: float = 0.4) -> list[Trial]:
    """``trials`` kill trials, cycling through the classes, each in a fresh workspace."""
    rng = random.Random(seed)
    out = []
    for k in range(trials):
        ws = workdir / f"trial{k}"
        out.append(run_trial(ws, CLASSES[k % len(CLASSES)], rng, max_delay))
        shutil.rmtree(ws, ignore_errors=True)
    return out


# -- full disk ----------------------------------------------------------------------------


@dataclass
class DiskResult:
    name: str
    exit_code: int
    said: str  # the line the command gave about it ('' if none)
    lines: int  # lines of stderr
    traceback: bool  # a traceback in the command's own output
    ledger_kept: bool  # every byte the ledger held before is there, and it reads
    detail: str = ""

    @property
    def survived(self) -> bool:
        return self.exit_code != 0 and bool(self.said) and not self.traceback and self.ledger_kept


def _limited(limit: int):
    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return pre


def _triage(argv: list[str], cwd: Path, limit: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        preexec_fn=_limited(limit) if limit else None,
        timeout=300,
    )


def _ledger_kept(ws: Path, before: bytes, events: int) -> tuple[bool, str]:
    """Everything held before is still there and reads; a torn tail may follow it."""
    from triage_agent.errors import TriageError
    from triage_agent.ledger import Ledger

    led = Ledger(ws)
    if not led.path.read_bytes().startswith(before):
        return False, "the ledger's earlier bytes changed"
    try:
        st = led.state()
    except TriageError as exc:
        return False, f"unreadable: {exc}"
    torn = f", torn tail of {st.torn_tail.length} bytes" if st.torn_tail else ""
    return st.events >= events, f"{st.events} of {events} events{torn}"


_TINY_TRAIN = """\
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for s in range(30):
    m(torch.randn(4, 64)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def disk_faults(workdir: Path) -> list[DiskResult]:
    """A ledger append and a trace that do not fit under RLIMIT_FSIZE (EFBIG, as on a full
    disk), each through the CLI; afterwards, without the limit, the next append works."""
    from triage_agent.ledger import Ledger

    case = workdir / "disk"
    shutil.rmtree(case, ignore_errors=True)
    ws = case / ".triage"
    _seed_ledger(ws)
    for k in range(100):  # some history, so the limit leaves room for a reproducer file
        Ledger(ws).note(f"history {k} " + "y" * 500)
    out = []

    def result(name: str, proc: subprocess.CompletedProcess, said: str, before, events):
        kept, why = _ledger_kept(ws, before, events)
        text = proc.stdout + proc.stderr
        return DiskResult(
            name,
            proc.returncode,
            said,
            len([ln for ln in proc.stderr.splitlines() if ln.strip()]),
            "Traceback" in text,
            kept,
            why,
        )

    # 1. a command whose ledger append does not fit: 100 bytes of room past the ledger
    before = Ledger(ws).path.read_bytes()
    events = Ledger(ws).state().events
    proc = _triage(
        ["reproduce", "generate", "cast_roundtrip", "-w", str(ws)], case, len(before) + 100
    )
    said = next((ln for ln in proc.stderr.splitlines() if ln.startswith("error:")), "")
    r = result("ledger append (triage reproduce generate)", proc, said, before, events)
    # the limit lifted, the next append moves whatever was cut short aside and loses nothing
    Ledger(ws).note("after the full disk")
    st = Ledger(ws).state()
    r.ledger_kept = r.ledger_kept and st.torn_tail is None and st.events >= events + 1
    r.detail += f"; next append: {st.events} events, torn tail {st.torn_tail}"
    out.append(r)

    # 2. a traced run whose trace does not fit (64 KiB), op level
    (case / "tiny_train.py").write_text(_TINY_TRAIN)
    before = Ledger(ws).path.read_bytes()
    events = Ledger(ws).state().events
    trace_dir = case / "trace"
    argv = ["trace", "--level", "op", "--out", str(trace_dir), "--", sys.executable]
    proc = _triage([*argv, "tiny_train.py"], case, 65536)
    said = next((ln for ln in proc.stdout.splitlines() if "partial trace" in ln), "")
    r = result("trace past the limit (triage trace --level op)", proc, said, before, events)
    # what was written reads as an incomplete run, never as a complete one
    cmp = _triage(["compare", str(trace_dir), str(trace_dir), "--format", "json"], case)
    r.detail += f"; compare of the partial trace exits {cmp.returncode} (3: incomplete)"
    r.ledger_kept = r.ledger_kept and cmp.returncode == 3
    out.append(r)
    return out


# -- a short write: the last record cut at a random offset ------------------------------


@dataclass
class TornTrial:
    cut_at: int  # bytes of the last record kept
    record: int  # the last record's length, newline included
    reported: bool = False  # read as a torn tail at the last record's offset
    lost: int = 0  # earlier records missing
    quarantined: bool = False  # the next append moved the tail aside byte for byte, noted
    completed: bool = False  # only the newline was missing: the record was completed
    next_append_ok: bool = False

    @property
    def survived(self) -> bool:
        return self.reported and not self.lost and self.quarantined and self.next_append_ok


def torn_trial(ws: Path, rng: random.Random) -> TornTrial:
    """Records appended through the API, then the file truncated inside its last record
    (as a short write leaves it): what reads, what the next append does."""
    from triage_agent.ledger import Ledger

    shutil.rmtree(ws, ignore_errors=True)
    _seed_ledger(ws)
    led = Ledger(ws)
    for k in range(rng.randint(1, 20)):
        led.note(f"kt-torn-{k} " + "z" * rng.choice((0, 10, 1000, 100_000)))
    data = led.path.read_bytes()
    start = data.rindex(b"\n", 0, len(data) - 1) + 1
    record = len(data) - start
    cut = rng.randint(1, record - 1)  # at least one byte kept, the newline never
    os.truncate(led.path, start + cut)
    t = TornTrial(cut, record)
    before, torn = led.read_events()
    t.reported = torn is not None and torn.offset == start and torn.length == cut
    t.lost = max(0, len(data[:start].splitlines()) - len(before))
    tail = led.path.read_bytes()[start:]
    led.note("kt-after-torn")
    after, torn_after = led.read_events()
    aside = ws / f"ledger.jsonl.torn-{start}"
    if cut == record - 1:
        # a whole record short of its newline only: completed in place, nothing set aside
        t.completed = len(after) == len(before) + 2 and not aside.exists()
        t.quarantined = t.completed
    else:
        t.quarantined = (
            aside.is_file()
            and aside.read_bytes() == tail
            and any(aside.name in str(e.data.get("text", "")) for e in after)
        )
    t.next_append_ok = torn_after is None and after[-1].data.get("text") == "kt-after-torn"
    t.lost = max(t.lost, len(before) - sum(1 for e in after[: len(before)]))
    return t


def torn_trials(trials: int, seed: int, workdir: Path) -> list[TornTrial]:
    rng = random.Random(seed)
    return [torn_trial(workdir / "torn", rng) for _ in range(trials)]


# -- runs that fail: a rank killed, a rank hung, a reproducer that leaves a daemon ---------

# Two gloo ranks on CPU, six steps of all-reduced gradients. FAULT=kill: rank 1 kills itself
# (SIGKILL) at step FAULT_STEP; FAULT=hang: rank 1 ignores SIGTERM and sleeps forever there,
# so rank 0 blocks in its next all-reduce.
RANK_JOB = """\
import os, signal, sys, time
import torch
import torch.distributed as dist
from triage_agent.metrics import MetricLog

dist.init_process_group("gloo")
rank = dist.get_rank()
fault, at = os.environ.get("FAULT", ""), int(os.environ.get("FAULT_STEP", "3"))
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8) + rank
with MetricLog(sys.argv[1], rank=rank) as log:
    for step in range(6):
        if rank == 1 and step == at and fault == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == 1 and step == at and fault == "hang":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        log.log(step, loss=loss.detach())
dist.destroy_process_group()
"""


@dataclass
class RunFault:
    name: str
    exit_code: int
    seconds: float
    left_running: list[str]  # processes of the job alive after `triage trace` returned
    compare_exit: int | None = None
    rank_status: dict[int, str] | None = None  # per rank, against the complete run
    detail: str = ""

    @property
    def survived(self) -> bool:
        if self.left_running:
            return False
        if self.rank_status is None:
            return True
        # the faulted rank is never reported equal, the comparison is not complete, and no
        # rank diverges: the job is deterministic, so a divergence could only be the dead
        # peer's collective blamed on the rank that survived it
        return (
            self.compare_exit in (1, 3)
            and self.rank_status.get(1) != "identical"
            and "diverged" not in self.rank_status.values()
        )


def job_processes(marker: str) -> list[str]:
    """Command lines of live processes holding ``marker`` (the job's unique directory)."""
    import psutil

    out = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            line = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if marker in line and p.info["status"] != psutil.STATUS_ZOMBIE and p.pid != os.getpid():
            out.append(f"{p.pid} {line[:200]}")
    return out


def trace_job(workdir: Path, fault: str, timeout_s: float) -> tuple[RunFault, Path]:
    """``triage trace`` of the two-rank job with ``fault``; what is left running after."""
    workdir.mkdir(parents=True, exist_ok=True)
    job = workdir / "rank_job.py"
    job.write_text(RANK_JOB)
    out = workdir / f"trace-{fault or 'complete'}"
    shutil.rmtree(out, ignore_errors=True)
    argv = [
        *("trace", "--level", "collective", "--timeout", str(timeout_s), "--out", str(out)),
        *("--", sys.executable, "-m", "torch.distributed.run", "--standalone"),
        *("--nproc-per-node", "2", str(job), str(workdir / f"metrics-{fault or 'complete'}")),
    ]
    env = {**os.environ, "FAULT": fault, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", *argv],
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout_s + 300,
    )
    r = RunFault(
        name=f"rank 1 {'killed' if fault == 'kill' else 'hung'} mid-trace" if fault else "complete",
        exit_code=proc.returncode,
        seconds=time.monotonic() - t0,
        left_running=job_processes(str(job)),
        detail=" ".join((proc.stdout + proc.stderr).split())[-300:],
    )
    return r, out


def compare_ranks(a: Path, b: Path, cwd: Path) -> tuple[int, dict[int, str]]:
    import json

    cmp = _triage(["compare", str(a), str(b), "--format", "json"], cwd)
    try:
        ranks = {r["rank"]: r["status"] for r in json.loads(cmp.stdout)["ranks"]}
    except (ValueError, KeyError):
        ranks = {}
    return cmp.returncode, ranks


def rank_faults(workdir: Path, timeout_s: float = 90.0) -> list[RunFault]:
    """A complete two-rank trace, then rank 1 killed and rank 1 hung at step 3: each traced
    under ``timeout_s``, nothing of the job left running, the faulted rank never equal."""
    complete, a = trace_job(workdir, "", timeout_s * 3)
    out = [complete]
    for fault in ("kill", "hang"):
        r, b = trace_job(workdir, fault, timeout_s)
        r.compare_exit, r.rank_status = compare_ranks(a, b, workdir)
        out.append(r)
    return out


# A reproducer-like command: it forks a daemon (double fork, new session) that ignores
# SIGTERM, then ignores SIGTERM itself and sleeps past its timeout.
DAEMON_AND_DEAF = """\
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
    os._exit(0)
time.sleep(600)
"""


def reproducer_faults(workdir: Path, timeout_s: float = 3.0) -> RunFault:
    """A reproducer's launch (reproducers.launcher.run_argv) of a command that leaves a
    SIGTERM-deaf daemon and ignores SIGTERM itself: past the timeout, nothing is left."""
    sys.path.insert(0, str(ROOT))
    from reproducers.launcher import EnvPolicy, run_argv

    workdir.mkdir(parents=True, exist_ok=True)
    script = workdir / "daemon_and_deaf.py"
    script.write_text(DAEMON_AND_DEAF)
    t0 = time.monotonic()
    res = run_argv([sys.executable, str(script)], workdir, EnvPolicy().build(), timeout_s=timeout_s)
    return RunFault(
        name="reproducer: forks a daemon, ignores SIGTERM",
        exit_code=-1 if res.timed_out else (res.returncode or 0),
        seconds=time.monotonic() - t0,
        left_running=job_processes(str(script)),
        detail=f"timed out {res.timed_out}",
    )


# -- kill -9 of the workflow at each stage, then `triage run` again -----------------------

# Prepended to the case's training script (a copy): one line per launch, written by the
# launch's rank-0 process, so launches are counted outside the ledger.
_COUNT_LAUNCH = (
    "import os as _o, sys as _s, pathlib as _p\n"
    "if _o.environ.get('RANK', '0') == '0':\n"
    "    with open(_p.Path(__file__).resolve().parent / 'launches.log', 'a') as _f:\n"
    "        _f.write(' '.join(_s.argv) + '\\n')\n"
)

# When to kill: the stage's start as `triage run` prints it, or the first record the stage
# writes. Each is (stdout words, predicate over the ledger's events and the launch count).
STAGES = ("baseline", "scan", "reproducer", "trace", "compare", "fix check", "verdict")


def _stage_reached(stage: str, out: str, events: list, launches: int, held: int) -> bool:
    kinds = [(e.kind, str(e.data.get("kind", ""))) for e in events]
    if stage == "baseline":
        return "baseline:" in out and launches >= 1  # a baseline job is running
    if stage == "scan":
        return "stage 1:" in out
    if stage == "reproducer":
        return ("evidence", "reproducer") in kinds or any(e.kind == "reproducer" for e in events)
    if stage == "trace":
        return "stage 2:" in out
    if stage == "compare":
        return ("evidence", "trace-compare") in kinds
    if stage == "fix check":
        # a rerun under an intervention has started (one launch past the held ones)
        return ("intervene:" in out or " fix:" in out) and launches > held
    return any(e.kind == "verdict" for e in events)


@dataclass
class WorkflowKill:
    stage: str
    reached: bool = False  # the kill landed in this stage (else the run ended first)
    exit_code: int | None = None  # of the resumed run
    orphans: int = 0  # processes of the killed run's jobs still running after the kill
    lost: int = 0  # evidence recorded before the kill, missing after the resume
    duplicated: int = 0  # evidence records past the uninterrupted run's count, per kind
    missing: int = 0  # evidence records short of the uninterrupted run's count, per kind
    rerun: int = 0  # launches past what the uninterrupted run needed, less the one cut short
    verdict_same: bool = False
    seconds: float = 0.0
    detail: str = ""

    @property
    def survived(self) -> bool:
        return (
            self.exit_code == 0
            and not self.lost
            and not self.duplicated
            and not self.missing
            and self.rerun <= 0
            and self.verdict_same
        )


def _launches_held(events: list) -> int:
    """Launches whose result the ledger holds: baselines (a note each) and reruns."""
    return sum(
        1
        for e in events
        if (e.kind == "note" and str(e.data.get("text", "")).startswith("baseline run"))
        or (e.kind == "evidence" and e.data.get("kind") == "rerun")
    )


def _evidence_by_kind(ws: Path) -> Counter:
    from triage_agent.ledger import Ledger

    return Counter(e.kind.value for e in Ledger(ws).state().evidence)


def _launches(case: Path) -> int:
    log = case / "launches.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _copy_case(src: Path, dest: Path) -> Path:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".triage", "launches.log"))
    train = dest / "train.py"
    if train.is_file():
        train.write_text(_COUNT_LAUNCH + train.read_text())
    return dest


def _run(case: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "run"],
        cwd=case,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _ppid(p) -> int | None:
    try:
        return p.ppid()
    except Exception:  # noqa: BLE001 - gone since it was listed
        return None


def _processes_under(d: Path) -> list:
    import psutil

    out = []
    for p in psutil.process_iter(["cwd", "cmdline"]):
        try:
            cwd, line = p.info["cwd"] or "", " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if p.pid != os.getpid() and (cwd.startswith(str(d)) or str(d) in line):
            out.append(p)
    return out


@dataclass
class Reference:
    evidence: Counter
    launches: int
    verdict: tuple
    seconds: float


def _verdict_key(ws: Path) -> tuple:
    from triage_agent.ledger import Ledger

    v = Ledger(ws).state().verdict
    if v is None:
        return ()
    # each trial runs on its own copy of the case: a location names a file of that copy. What
    # follows the location proper ("; first divergence: ...") comes from the op trace, which
    # can differ between two uninterrupted runs (a digest the tracer reads as uninitialized
    # in one launch and not in the other): it is not part of the verdict compared here
    return (
        v.classification.value,
        (v.location or "").replace(str(ws.parent), "<case>").split("; ")[0],
    )


def workflow_reference(case_src: Path, workdir: Path, timeout: float = 1800) -> Reference:
    """The case run once, uninterrupted: what a resumed run must end with."""
    case = _copy_case(case_src, workdir / "reference")
    t0 = time.monotonic()
    proc = _run(case, timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"the uninterrupted run failed: {proc.stderr[-500:]}")
    ws = case / ".triage"
    return Reference(
        _evidence_by_kind(ws), _launches(case), _verdict_key(ws), time.monotonic() - t0
    )


def workflow_kill(
    case_src: Path, workdir: Path, stage: str, ref: Reference, timeout: float = 1800
) -> WorkflowKill:
    """`triage run` killed with SIGKILL as ``stage`` starts, then run again to its end."""
    from triage_agent.errors import TriageError
    from triage_agent.ledger import Ledger

    case = _copy_case(case_src, workdir / f"kill-{stage.replace(' ', '-')}")
    ws = case / ".triage"
    r = WorkflowKill(stage)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "triage_agent.cli.app", "run"],
        cwd=case,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        # each stage's line as it is printed, not when a pipe's buffer fills
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
    )
    os.set_blocking(proc.stdout.fileno(), False)
    out, held = "", 0
    while proc.poll() is None and time.monotonic() - t0 < timeout:
        chunk = proc.stdout.read() or b""
        out += chunk.decode(errors="replace")
        try:
            events = Ledger(ws).read_events()[0] if (ws / "ledger.jsonl").exists() else []
        except TriageError:
            events = []
        held = _launches_held(events)
        if _stage_reached(stage, out, events, _launches(case), max(held, 2)):
            proc.send_signal(signal.SIGKILL)
            r.reached = True
            break
        time.sleep(0.05)
    proc.wait()
    proc.stdout.close()
    before = {e.id for e in Ledger(ws).state().evidence} if ws.exists() else set()
    # what the killed run's jobs left running: they are in sessions of their own
    time.sleep(1.0)
    left = _processes_under(case)
    r.orphans = len(left)
    pids = {p.pid for p in left}
    roots = sum(1 for p in left if _ppid(p) not in pids)  # one per launch still running
    launched_before = max(_launches(case), held + roots)
    for p in left:
        try:
            p.kill()
        except Exception:  # noqa: BLE001 - gone already
            pass
    done = _run(case, timeout)
    r.exit_code = done.returncode
    r.seconds = time.monotonic() - t0
    st = Ledger(ws).state()
    after = {e.id for e in st.evidence}
    r.lost = len(before - after)
    got = _evidence_by_kind(ws)
    r.duplicated = sum(max(0, got[k] - ref.evidence[k]) for k in got)
    r.missing = sum(max(0, ref.evidence[k] - got[k]) for k in ref.evidence)
    # launches in flight at the kill (started, their result not in the ledger) are redone
    cut = max(0, launched_before - held) if r.reached else 0
    r.rerun = _launches(case) - ref.launches - cut
    r.verdict_same = _verdict_key(ws) == ref.verdict
    r.detail = f"killed at {out.strip().splitlines()[-1][:80] if out.strip() else '-'}; "
    r.detail += f"evidence {dict(got)} vs {dict(ref.evidence)}; launches {_launches(case)}"
    r.detail += f" vs {ref.launches}, {cut} in flight at the kill; {done.stderr.strip()[-200:]}"
    return r


def workflow_table(kills: list[WorkflowKill], case: str, ref: Reference) -> str:
    said = f"case {case}: uninterrupted run {ref.seconds:.0f} s, {ref.launches} launches, "
    said += f"evidence {dict(ref.evidence)}"
    cols = ("killed at", "reached", "resumed exit", "orphans after the kill", "evidence lost")
    cols += ("duplicated", "missing", "launches rerun", "same verdict", "s")
    rows = (
        [k.stage, k.reached, k.exit_code, k.orphans, k.lost, k.duplicated, k.missing]
        + [max(k.rerun, 0), k.verdict_same, f"{k.seconds:.0f}"]
        for k in kills
    )
    return said + "\n" + markdown_table(cols, rows)


# -- report -------------------------------------------------------------------------------


def kill_table(trials: list[Trial]) -> str:
    cols = ("fault", "trials", "writers", "appends returned", "lost", "torn tails left")
    cols += ("quarantined by a live writer", "survived", "crashes")

    def row(klass: str, ts: list[Trial]) -> list[object]:
        n = lambda field: sum(getattr(t, field) for t in ts)  # noqa: E731
        crashes = sum(bool(t.error) for t in ts)
        said = [n("lost"), n("torn_left"), n("quarantined_live"), n("survived"), crashes]
        return [f"kill -9, {klass}", len(ts), n("writers"), f"{n('returned'):,}", *said]

    groups = ((k, [t for t in trials if t.klass == k]) for k in CLASSES)
    return markdown_table(cols, (row(k, ts) for k, ts in groups if ts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-delay", type=float, default=0.4, help="latest kill, seconds")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "faults")
    ap.add_argument("--no-disk", action="store_true", help="skip the full-disk faults")
    ap.add_argument("--torn", type=int, default=200, help="short-write trials (0: none)")
    ap.add_argument(
        "--runs",
        action="store_true",
        help="also a killed and a hung rank, and a reproducer that leaves a daemon",
    )
    ap.add_argument(
        "--workflow",
        type=Path,
        default=None,
        help="a case directory: kill `triage run` at each stage, then resume",
    )
    ap.add_argument("--stages", default=",".join(STAGES), help="comma-separated, with --workflow")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ok = True
    if a.workflow is not None:
        ref = workflow_reference(a.workflow.resolve(), a.workdir)
        kills = [
            workflow_kill(a.workflow.resolve(), a.workdir, st.strip(), ref)
            for st in a.stages.split(",")
        ]
        print(workflow_table(kills, a.workflow.name, ref))
        for k in kills:
            print(f"  {k.stage}: {'survived' if k.survived else 'FAILED'}: {k.detail}")
        ok = all(k.survived for k in kills if k.reached)
    if a.runs:
        faults_run = [*rank_faults(a.workdir / "ranks"), reproducer_faults(a.workdir / "repro")]
        for r in faults_run:
            print(
                f"| {r.name} | exit {r.exit_code} | {r.seconds:.0f} s | left running "
                f"{len(r.left_running)} | compare exit {r.compare_exit} | ranks {r.rank_status} "
                f"| {'survived' if r.survived else 'FAILED'} |"
            )
        ok = ok and all(r.survived for r in faults_run)
    torn = torn_trials(a.torn, a.seed, a.workdir)
    if torn:
        print(
            f"| short write, last record cut at a random offset | {len(torn)} "
            f"| reported {sum(t.reported for t in torn)} | quarantined "
            f"{sum(t.quarantined and not t.completed for t in torn)}, completed in place "
            f"{sum(t.completed for t in torn)} | lost {sum(t.lost for t in torn)} "
            f"| next append worked {sum(t.next_append_ok for t in torn)} "
            f"| survived {sum(t.survived for t in torn)} |"
        )
        ok = ok and all(t.survived for t in torn)
    if a.trials == 0:
        return 0 if ok else 1
    trials = run_trials(a.trials, a.seed, a.workdir, a.max_delay)
    print(kill_table(trials))
    for t in trials:
        if not t.survived:
            print(f"  FAILED {t}")
    ok = ok and all(t.survived for t in trials)
    disk = [] if a.no_disk else disk_faults(a.workdir)
    for d in disk:
        print(
            f"| full disk: {d.name} | exit {d.exit_code} | said: {d.said or '-'} "
            f"| stderr lines {d.lines} | traceback {d.traceback} | ledger kept {d.ledger_kept} "
            f"({d.detail}) | {'survived' if d.survived else 'FAILED'} |"
        )
    print(
        f"summary: {len(trials)} kill trials, {sum(t.writers for t in trials)} writers killed, "
        f"{sum(t.returned for t in trials):,} appends returned, "
        f"{sum(t.lost for t in trials)} lost, {sum(t.torn_left for t in trials)} torn tails "
        f"quarantined on the next append, {sum(t.quarantined_live for t in trials)} by a live "
        f"writer, {sum(not t.survived for t in trials)} failed trials; "
        f"{sum(d.survived for d in disk)}/{len(disk)} full-disk faults survived; "
        f"{time.perf_counter() - t0:.0f} s"
    )
    return 0 if ok and all(d.survived for d in disk) else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--writer":
        sys.path.insert(0, str(ROOT))
        writer(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main())
