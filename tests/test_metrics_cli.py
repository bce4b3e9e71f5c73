import json
import subprocess

import pytest
import torch

from triage_agent.errors import InputError
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
    out = plot_metric_distance(a, b, tmp_path / "x.png")
    assert out == tmp_path / "x.png" and out.stat().st_size > 1000


def test_metrics_diff_bad_path_one_line(tmp_path):
    r = subprocess.run(
        ["python", "-m", "triage_agent.cli.app", "metrics", "diff", "nope", "nope2"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode == 2 and "does not exist" in r.stderr and "Traceback" not in r.stderr


def _cli(tmp_path, *args):
    return subprocess.run(
        ["python", "-m", "triage_agent.cli.app", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )


def _one_line_error(r, needle):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_metrics_non_utf8_file_is_input_error_naming_file(tmp_path):
    _run(tmp_path / "a")
    f = tmp_path / "a" / "metrics_rank0.jsonl"
    f.write_bytes(f.read_bytes() + b'{"type": "st\xff\xfe"}\n')
    with pytest.raises(InputError, match=r"metrics_rank0\.jsonl:\d+: not UTF-8"):
        load_metrics(f)
    _run(tmp_path / "b")
    _one_line_error(_cli(tmp_path, "metrics", "diff", "a", "b", "--no-plot"), "not UTF-8")


def test_metrics_only_unterminated_last_line_is_torn(tmp_path):
    _run(tmp_path / "a")
    f = tmp_path / "a" / "metrics_rank0.jsonl"
    good = f.read_bytes()
    n = good.count(b"\n")
    f.write_bytes(good + b'{"type": "step", "rank": 0, "st')  # cut mid-write: ignored
    assert sorted(load_metrics(f).ranks[0].steps) == list(range(6))
    f.write_bytes(good + b'{"type": "step", "rank": 0, "st\n')  # terminated: corruption
    with pytest.raises(InputError, match=rf"metrics_rank0\.jsonl:{n + 1}: malformed"):
        load_metrics(f)
    f.write_bytes(good + b"[1, 2]\n")
    with pytest.raises(InputError, match=rf"metrics_rank0\.jsonl:{n + 1}: malformed"):
        load_metrics(f)


def test_metrics_plot_path_must_be_png_in_existing_dir(tmp_path):
    _run(tmp_path / "a")
    _run(tmp_path / "b", flip_at=4)
    _one_line_error(_cli(tmp_path, "metrics", "diff", "a", "b", "--plot", str(tmp_path)), ".png")
    assert not (tmp_path.parent / (tmp_path.name + ".png")).exists()
    missing = tmp_path / "no" / "such"
    _one_line_error(
        _cli(tmp_path, "metrics", "diff", "a", "b", "--plot", str(missing / "x.png")),
        "does not exist",
    )
    assert not (tmp_path / "no").exists()
    _one_line_error(_cli(tmp_path, "metrics", "diff", "a", "b", "--plot", "x.svg"), ".png")
    r = _cli(tmp_path, "metrics", "diff", "a", "b", "--plot", "sub.png")
    assert r.returncode == 1, r.stderr
    assert "plot: sub.png" in r.stdout and (tmp_path / "sub.png").read_bytes()[:4] == b"\x89PNG"
