"""The flight recorder: a bounded ring of per-rank trace segments, and windows cut from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from triage_agent.compare.reader import read_native
from triage_agent.errors import InputError
from triage_agent.fingerprint.recorder import (
    RankRing,
    RecorderSettings,
    RingSink,
    segments,
    start,
    summarize,
    window,
)
from triage_agent.fingerprint.sink import PendingEvent
from triage_agent.records import utcnow
from triage_agent.trace_format import TraceHeader

TRAIN = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(8, 16)
for s in range(40):
    m(x).square().mean().backward(); opt.step(); opt.zero_grad()
"""


def _header(rank: int = 0) -> TraceHeader:
    return TraceHeader(run_id="r", rank=rank, created=utcnow())


def _events(step: int, n: int = 20) -> list[PendingEvent]:
    return [
        PendingEvent(
            seq=i,
            step=step,
            kind="module",
            name="Linear",
            scope=f"m{i}",
            call=0,
            phase="forward",
            caller=None,
            inputs=[],
        )
        for i in range(n)
    ]


def test_ring_sink_keeps_the_newest_steps_under_the_cap(tmp_path):
    sink = RingSink(tmp_path, 3, _header(3), segment_bytes=8_000, cap_bytes=30_000)
    for step in range(60):
        sink.write_step(step, _events(step))
    sink.close("ok", list(range(60)))
    (ring,) = summarize(tmp_path)
    assert ring.rank == 3
    assert ring.bytes <= 30_000
    assert ring.steps == list(range(ring.steps[0], 60))  # a contiguous tail, newest kept
    assert ring.steps[0] > 0 and sink.deleted
    for seg in segments(tmp_path, 3):  # every segment is a trace the comparator reads
        run = read_native(seg)
        assert list(run.ranks) == [3]


def test_ring_sink_continues_a_ring_a_resumed_process_left(tmp_path):
    first = RingSink(tmp_path, 0, _header(), segment_bytes=4_000, cap_bytes=1 << 20)
    for step in range(10):
        first.write_step(step, _events(step))
    first.close("ok", [])
    second = RingSink(tmp_path, 0, _header(), segment_bytes=4_000, cap_bytes=1 << 20)
    second.write_step(10, _events(10))
    second.close("ok", [])
    names = [p.name for p in segments(tmp_path, 0)]
    assert names == sorted(set(names)) and len(names) >= 2
    assert summarize(tmp_path)[0].steps == list(range(11))


def test_recorder_settings_refuse_a_segment_above_the_cap(tmp_path):
    with pytest.raises(ValueError, match="larger than the cap"):
        RecorderSettings(out_dir=tmp_path, cap_bytes=10, segment_bytes=20)


def test_recorder_in_process_writes_module_events_of_every_step(tmp_path):
    import torch

    m = torch.nn.Linear(4, 4)
    tr = start(RecorderSettings(out_dir=tmp_path, backend="python"))
    with tr:
        for step in range(5):
            tr.step(step)
            m(torch.randn(2, 4))
    (ring,) = summarize(tmp_path)
    assert ring.steps == [0, 1, 2, 3, 4]


def _record(tmp_path: Path, *extra: str, env=None) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "triage_agent.cli.app",
            "record",
            "--out",
            str(tmp_path / "rec"),
            *extra,
            "--json",
            "--",
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_triage_record_keeps_a_bounded_ring_and_cuts_a_window(tmp_path):
    import os

    env = dict(os.environ, RANK="1")
    res = _record(tmp_path, "--cap-mb", "0.06", "--segment-mb", "0.02", env=env)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    (ring,) = [RankRing.model_validate(r) for r in out["ranks"]]
    assert ring.rank == 1 and ring.bytes <= 0.06 * (1 << 20)
    assert ring.steps[-1] == 39 and ring.steps[0] > 0  # older steps were recorded over
    last = ring.steps[-3], ring.steps[-1]
    written = window(tmp_path / "rec", last, tmp_path / "win")
    assert [p.name for p in written] == ["trace_rank00001.jsonl"]
    run = read_native(tmp_path / "win")
    stream = run.ranks[1]
    steps = {json.loads(ln)["step"] for ln in written[0].read_text().splitlines()[1:-1]}
    assert steps == set(range(last[0], last[1] + 1)) and stream.rank == 1
    with pytest.raises(InputError, match="not in it"):
        window(tmp_path / "rec", (0, 1), tmp_path / "win0")


def test_triage_record_bad_settings_are_one_line_errors(tmp_path):
    res = _record(tmp_path, "--cap-mb", "1", "--segment-mb", "2")
    assert res.returncode == 2
    assert "larger than the cap" in res.stderr and "Traceback" not in res.stderr
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage_agent.cli.app",
            "record-window",
            str(tmp_path / "none"),
            "--steps",
            "3-4",
            "--out",
            str(tmp_path / "w"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "no recording" in res.stderr


def test_a_background_ring_writer_writes_what_a_foreground_one_does(tmp_path):
    rings = []
    for background in (False, True):
        root = tmp_path / f"bg{background}"
        sink = RingSink(root, 0, _header(), 8_000, 30_000, background=background)
        for step in range(60):
            sink.write_step(step, _events(step))
        sink.close("ok", list(range(60)))
        rings.append(summarize(root))
        texts = sorted(p.read_text().split("\n", 1)[1] for p in root.rglob("trace_*.jsonl"))
        rings[-1].append(texts)
    assert rings[0] == rings[1]


def test_a_background_ring_writer_raises_its_failure_in_the_job(tmp_path):
    (tmp_path / "rank00000").write_text("a file where the rank's ring directory goes")
    sink = RingSink(tmp_path, 0, _header(), 8_000, 30_000, background=True)
    sink.write_step(0, _events(0))  # queued: the failure happens in the writer thread
    with pytest.raises(OSError):
        sink.close("ok", [0])
