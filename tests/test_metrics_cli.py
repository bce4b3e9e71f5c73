import json
import subprocess

import torch

from triage_agent.metrics import MetricLog, load_metrics
from triage_agent.metrics_plot import distance, plot_metric_distance


def _run(path, flip_at=None, resumed_from=None):
    with MetricLog(path, rank=0, resumed_from=resumed_from) as log:
        for s in range(6):
            loss = torch.tensor(1.0 / (s + 1))
            if flip_at is not None and s >= flip_at:
                loss = (loss.view(torch.int32) ^ 1).view(torch.float32)  # one ULP
            log.log(s, loss=loss, lr=1e-3 * s)


def test_metrics_diff_first_step_and_png(tmp_path):
    _run(tmp_path / "a")
    _run(tmp_path / "b", flip_at=4)
    r = subprocess.run(
        ["python", "-m", "triage_agent.cli.app", "metrics", "diff", "a", "b",
         "--plot", "d.png", "--json"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 1, r.stderr
    d = json.loads(r.stdout)
    assert d["first_step"] == 4 and d["last_equal_step"] == 3
    assert [m["metric"] for m in d["mismatches"]] == ["loss"]
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_metrics_diff_equal_runs_exit_zero(tmp_path):
    _run(tmp_path / "a")
    _run(tmp_path / "b")
    r = subprocess.run(
        ["python", "-m", "triage_agent.cli.app", "metrics", "diff", "a", "b", "--no-plot"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 0 and "bitwise equal" in r.stdout


def test_metrics_distance_is_one_ulp(tmp_path):
    _run(tmp_path / "a")
    _run(tmp_path / "b", flip_at=0)
    a, b = load_metrics(tmp_path / "a"), load_metrics(tmp_path / "b")
    assert distance(a.ranks[0].steps[2]["loss"], b.ranks[0].steps[2]["loss"]) == (1.0, "ulp")
    out = plot_metric_distance(a, b, tmp_path / "p" / "x.png")
    assert out.stat().st_size > 1000


def test_metrics_diff_bad_path_one_line(tmp_path):
    r = subprocess.run(
        ["python", "-m", "triage_agent.cli.app", "metrics", "diff", "nope", "nope2"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr
