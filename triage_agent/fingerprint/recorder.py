"""The flight recorder: module-level digests of every step, kept in a bounded ring on disk.

``triage record -- COMMAND`` runs an unmodified command with a recorder in every Python
process: a :class:`~triage_agent.fingerprint.capture.Tracer` (the native one where it can
run, :mod:`.native`) tracing every step at module level, whose writer is a
:class:`RingSink`. Each rank keeps its own ring under ``DIR/rank{R:05d}/``: segments
``seg{K:06d}/``, each an ordinary trace directory (``trace_rank{R:05d}.jsonl`` with its
header, events, one ``step_end`` per step and an ``end`` line once the segment is full,
plus the rank's status file), so any segment is read by the comparator as it is. A segment
is closed once it holds ``segment_bytes``; the oldest closed segments are deleted while the
rank's ring is over ``cap_bytes``. A crashed rank keeps every completed step of its
segments. :func:`window` cuts the steps of a mismatch window out of the rings into one
trace directory, line for line (no relaunch needed when the ring covers the window).

A launcher can set the recorder up without ``triage record``: :func:`prepare` writes the
settings and a ``sitecustomize`` under ``DIR`` and returns the environment to add
(``PYTHONPATH`` and ``TRIAGE_RECORD_CONFIG``). The native extension is built in the
launching process first, so no rank pays for the build inside its timeout.

At ``sentinel`` level the ring holds only what crosses rank boundaries and what the
optimizer wrote (see :mod:`triage_agent.compare.sentinel` for its reading: the first
divergent step and rank of two recordings, and a rank that disagrees with its peers).

Limits: the ring holds whole steps; one step larger than the cap still fills one segment.
Steps come from the tracer's automatic boundaries (DeepSpeed engine steps, else optimizer
steps), as for ``triage trace``.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import sys
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import InputError
from ..trace_format import TRACE_GLOB, TraceHeader, trace_filename
from .command import CaptureResult, capture_command, check_out_dir
from .config import CaptureConfig
from .sink import PendingEvent, TraceSink

RECORD_ENV = "TRIAGE_RECORD_CONFIG"
SETTINGS_NAME = "record_config.json"
METRICS_NAME = "metric_files.json"
SITE_DIR = ".site"
_SITECUSTOMIZE = (
    "# written by triage record: starts the flight recorder in every Python process\n"
    "from triage_agent.fingerprint.recorder import bootstrap\n"
    "bootstrap(__file__)\n"
)
_MB = 1 << 20
# steps a background ring writer may hold before the job's thread waits for it
_QUEUED = 4


class RecorderSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out_dir: Path = Field(description="the recording: one ring per rank under rank*/")
    cap_bytes: int = Field(default=256 * _MB, gt=0, description="per rank, all segments")
    segment_bytes: int = Field(default=16 * _MB, gt=0, description="a segment is closed here")
    level: Literal["sentinel", "collective", "module"] = "module"
    ranks: list[int] | None = None
    run_id: str = "run"
    backend: Literal["auto", "native", "python"] = "auto"
    side_stream: bool = False

    @model_validator(mode="after")
    def _segment_fits(self) -> RecorderSettings:
        if self.segment_bytes > self.cap_bytes:
            raise ValueError(
                f"segment size {self.segment_bytes} B is larger than the cap {self.cap_bytes} B"
            )
        return self

    def capture_config(self) -> CaptureConfig:
        return CaptureConfig(
            out_dir=self.out_dir, level=self.level, ranks=self.ranks, run_id=self.run_id
        )


def rank_dir(root: Path, rank: int) -> Path:
    return Path(root) / f"rank{rank:05d}"


def segments(root: Path, rank: int) -> list[Path]:
    """The rank's segment directories, oldest first."""
    d = rank_dir(root, rank)
    return sorted(p for p in d.glob("seg*") if p.is_dir()) if d.is_dir() else []


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


class RingSink:
    """A :class:`TraceSink` stand-in that writes a rank's steps into a bounded ring."""

    def __init__(
        self,
        root: Path,
        rank: int,
        header: TraceHeader,
        segment_bytes: int,
        cap_bytes: int,
        background: bool = False,
    ):
        """``background``: steps are written by a thread of the sink's own, so the step
        that produced them does not wait for their encoding and the disk (the sentinel's
        way: a killed process loses the at most ``_QUEUED`` steps still queued)."""
        self.root = Path(root)
        self.rank = rank
        self.header = header
        self.segment_bytes = segment_bytes
        self.cap_bytes = cap_bytes
        self.events_written = 0
        self.steps_written: list[int] = []
        # the tracer's list of the job's MetricLog files (see start); kept beside the ring so a
        # reader can check the recorded run's metric bits against an unrecorded run's
        self.metric_files: list[str] = []
        self._metric_files_said = 0
        self.deleted: list[str] = []
        self._seg: TraceSink | None = None
        self._seg_steps: list[int] = []
        old = segments(self.root, rank)
        # a later process of the same rank (a resumed run) continues the numbering
        self._next = int(old[-1].name[3:]) + 1 if old else 0
        self._closed: list[tuple[Path, int]] = [(p, _dir_bytes(p)) for p in old]
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        if background:
            self._queue = queue.Queue(maxsize=_QUEUED)
            self._thread = threading.Thread(
                target=self._drain, name="triage-ring-writer", daemon=True
            )
            self._thread.start()

    def _drain(self) -> None:
        assert self._queue is not None
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._failed is None:
                try:
                    self._write_step(*item)
                except BaseException as exc:  # noqa: BLE001 - raised again in the job's thread
                    self._failed = exc

    def _raise_failed(self) -> None:
        if self._failed is not None:
            exc, self._failed = self._failed, None
            raise exc

    @property
    def path(self) -> Path | None:
        return self._seg.path if self._seg is not None else None

    def write_step(self, step: int, events: list[PendingEvent]) -> None:
        if self._queue is None:
            self._write_step(step, events)
            return
        self._raise_failed()
        # the tracer hands over a list it no longer touches; the digests in it are resolved
        self._queue.put((step, events))

    def _write_step(self, step: int, events: list[PendingEvent]) -> None:
        if self._seg is None:
            seg_dir = rank_dir(self.root, self.rank) / f"seg{self._next:06d}"
            self._next += 1
            self._seg = TraceSink(seg_dir, self.rank, self.header)
            self._seg_steps = []
        self._seg.write_step(step, events)
        self._seg_steps.append(step)
        if len(self.metric_files) != self._metric_files_said:
            self._metric_files_said = len(self.metric_files)
            path = rank_dir(self.root, self.rank) / METRICS_NAME
            path.write_text(json.dumps({"files": sorted(set(self.metric_files))}))
        self.events_written += len(events)
        self.steps_written.append(step)
        if self._seg.path is not None and self._seg.path.stat().st_size >= self.segment_bytes:
            self._close_segment("ok", "")
        self._trim()

    def _close_segment(self, status: str, note: str) -> None:
        if self._seg is not None:
            self._seg.close(status, self._seg_steps, note)
            if self._seg.path is not None:
                seg_dir = self._seg.path.parent
                self._closed.append((seg_dir, _dir_bytes(seg_dir)))
            self._seg = None

    def _trim(self) -> None:
        """Delete the oldest closed segments while the rank's ring is over the cap."""
        total = sum(size for _, size in self._closed)
        if self._seg is not None and self._seg.path is not None:
            total += self._seg.path.stat().st_size
        while total > self.cap_bytes and self._closed:
            p, size = self._closed.pop(0)
            shutil.rmtree(p, ignore_errors=True)
            self.deleted.append(p.name)
            total -= size

    def close(
        self, status: str, steps_seen: list[int], note: str = "", resumed_from: int | None = None
    ) -> None:
        if self._queue is not None and self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._queue = None
            self._raise_failed()
        self._close_segment(status, note)


def start(settings: RecorderSettings, **tracer_kwargs):
    """A tracer recording into ``settings.out_dir``'s ring for this rank, not yet installed."""
    from .native import make_tracer

    tracer = make_tracer(
        settings.capture_config(),
        backend=settings.backend,
        side_stream=settings.side_stream,
        **tracer_kwargs,
    )
    tracer.sink = RingSink(
        settings.out_dir,
        tracer.rank,
        tracer.sink.header,
        settings.segment_bytes,
        settings.cap_bytes,
        background=settings.level == "sentinel",
    )
    tracer.sink.metric_files = tracer.metric_files
    return tracer


# -- injection into unmodified commands --------------------------------------------------
def prepare(settings: RecorderSettings) -> dict[str, str]:
    """Write the settings and the sitecustomize; return the environment a launcher adds."""
    out = check_out_dir(Path(settings.out_dir))
    settings = settings.model_copy(update={"out_dir": out})
    (out / SETTINGS_NAME).write_text(settings.model_dump_json(indent=1))
    site = out / SITE_DIR
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    if settings.backend != "python":
        from . import native

        if native.load() is None:
            # the ranks would each fail the same build: tell them not to try
            return {
                "PYTHONPATH": str(site),
                RECORD_ENV: str(out / SETTINGS_NAME),
                "TRIAGE_NATIVE": "0",
            }
    return {"PYTHONPATH": str(site), RECORD_ENV: str(out / SETTINGS_NAME)}


def bootstrap(site_file: str) -> None:
    """Run in each process by the generated sitecustomize: start the recorder, then chain."""
    site = os.path.dirname(os.path.abspath(site_file))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != site]
    path = os.environ.get(RECORD_ENV)
    if path:
        try:
            settings = RecorderSettings.model_validate_json(Path(path).read_text())
            tracer = start(settings, auto_steps=True).install()
        except Exception as exc:  # noqa: BLE001 - site.py would swallow it and run unrecorded
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            sys.stderr.write(f"triage record: cannot start the recorder: {first}\n")
            sys.stderr.flush()
            os._exit(2)
        atexit.register(_finish, tracer)
    from .inject.bootstrap import _chain

    _chain()  # a sitecustomize of the command's own, if any


def _finish(tracer) -> None:
    # Python keeps the exception that ended the script in sys.last_value for exit handlers
    err = getattr(sys, "last_value", None)
    note = f"{type(err).__name__}: {err}"[:500] if err is not None else ""
    tracer.close("error" if err is not None else "ok", note)


# -- running and reading a recording -----------------------------------------------------
class RankRing(BaseModel):
    rank: int
    segments: int
    bytes: int
    steps: list[int] = Field(default_factory=list, description="steps the ring still holds")


class RecordResult(BaseModel):
    capture: CaptureResult
    out_dir: str
    ranks: list[RankRing] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


def _ranks(root: Path) -> list[int]:
    return sorted(int(p.name[4:]) for p in Path(root).glob("rank*") if p.name[4:].isdigit())


def _segment_steps(seg: Path, rank: int) -> list[int]:
    f = seg / trace_filename(rank)
    if not f.is_file():
        return []
    steps = []
    for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"type":"step_end"' in line:
            try:
                steps.append(int(json.loads(line)["step"]))
            except (ValueError, KeyError):
                continue  # a torn last line of a killed rank
    return steps


def summarize(root: Path) -> list[RankRing]:
    rings = []
    for r in _ranks(root):
        segs = segments(root, r)
        steps = [s for seg in segs for s in _segment_steps(seg, r)]
        rings.append(
            RankRing(rank=r, segments=len(segs), bytes=sum(map(_dir_bytes, segs)), steps=steps)
        )
    return rings


def record_command(
    argv: list[str],
    settings: RecorderSettings,
    policies: list[str] | None = None,
    timeout_s: float | None = None,
) -> RecordResult:
    """Run ``argv`` with the recorder in every process; summarise what the rings hold."""
    root = Path(settings.out_dir)
    if root.is_dir() and any(root.glob("rank*/seg*")):
        raise InputError(
            f"{root} already holds a recording: give a new --out, or remove that directory first"
        )
    extra = prepare(settings)
    env = dict(os.environ)
    pp = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = extra.pop("PYTHONPATH") + (os.pathsep + pp if pp else "")
    env.update(extra)
    # the policy and launch machinery of `triage trace`, with nothing traced by it
    cfg = CaptureConfig(out_dir=root, level="none", run_id=settings.run_id, policies=policies or [])
    cap = capture_command(argv, cfg, env=env, timeout_s=timeout_s)
    rings = summarize(root)
    warnings = list(cap.warnings)
    if not rings:
        warnings.append(
            "no process recorded a step: no Python process of the command ran torch through "
            "an optimizer or DeepSpeed engine step; see the command's logs in the out dir"
        )
    return RecordResult(capture=cap, out_dir=str(root), ranks=rings, warnings=warnings)


def window(root: Path, steps: tuple[int, int], out_dir: Path) -> list[Path]:
    """Copy the steps ``steps`` of every rank's ring into ``out_dir``, one trace per rank.

    Lines are copied as written (header of the first segment used, the window's events and
    ``step_end`` lines, then an ``end`` line), so the result compares like a trace of the
    window. Raises :class:`InputError` when a rank's ring does not hold the whole window.
    """
    from ..trace_format import TraceEnd

    a, b = steps
    out = check_out_dir(Path(out_dir))
    if any(out.glob(TRACE_GLOB)):
        raise InputError(f"{out} already holds a trace: give a new directory")
    ranks = _ranks(root)
    if not ranks:
        raise InputError(f"{root} holds no recording (no rank*/ directories)")
    written = []
    for r in ranks:
        segs = [(seg, _segment_steps(seg, r)) for seg in segments(root, r)]
        held = sorted({s for _, ss in segs for s in ss})
        missing = [s for s in range(a, b + 1) if s not in held]
        if missing:
            span = f"{held[0]}-{held[-1]}" if held else "none"
            raise InputError(
                f"rank {r}'s ring holds steps {span}; steps {missing[:5]} of the window "
                f"{a}-{b} are not in it (recorded over, or never reached)"
            )
        lines: list[str] = []
        for seg, ss in segs:
            if not any(a <= s <= b for s in ss):
                continue
            text = (seg / trace_filename(r)).read_text(encoding="utf-8").splitlines()
            if not lines:
                lines.append(text[0])  # the header
            lines += [ln for ln in text[1:] if _line_step(ln) in range(a, b + 1)]
        lines.append(TraceEnd(steps=list(range(a, b + 1))).model_dump_json(exclude_none=True))
        target = out / trace_filename(r)
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(target)
    return written


def _line_step(line: str) -> int | None:
    """The step of an event or step_end line, read without parsing the whole line."""
    key = '"step":'
    i = line.find(key)
    if i < 0 or not ('"type":"event"' in line[:20] or '"type":"step_end"' in line[:24]):
        return None
    j = i + len(key)
    k = j
    while k < len(line) and (line[k].isdigit() or line[k] == "-"):
        k += 1
    try:
        return int(line[j:k])
    except ValueError:
        return None


def read_settings(root: Path) -> RecorderSettings | None:
    """The settings a recording was made with; None where ``root`` is no recording."""
    path = Path(root) / SETTINGS_NAME
    if not path.is_file() or not any(Path(root).glob("rank*/seg*")):
        return None
    try:
        return RecorderSettings.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def metric_source(root: Path) -> tuple[Path | None, str]:
    """The directory holding the recorded run's metric files, or (None, why it is not known)."""
    files: set[str] = set()
    for r in _ranks(root):
        path = rank_dir(root, r) / METRICS_NAME
        try:
            files.update(json.loads(path.read_text())["files"])
        except FileNotFoundError:
            continue
        except (OSError, ValueError, KeyError, TypeError):
            return None, f"{path} cannot be read"
    if not files:
        return (
            None,
            "no process of the recorded run opened a MetricLog, so its metric bits are unknown",
        )
    dirs = sorted({str(Path(f).parent) for f in files})
    if len(dirs) > 1:
        return (
            None,
            f"the recorded run wrote its metrics in {len(dirs)} directories ({dirs[0]}, ...)",
        )
    return Path(dirs[0]), ""
