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


def _two_ranks(path, steps=6):
    for rank in (0, 1):
        with MetricLog(path, rank=rank) as log:
            for s in range(steps):
                log.log(s, loss=torch.tensor(1.0 / (s + 1 + rank)))


def _diff(tmp_path, *extra):
    return subprocess.run(
        ["python", "-m", "triage_agent.cli.app", "metrics", "diff", "a", "b", "--no-plot", *extra],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip


def test_a_rank_missing_from_one_run_is_not_equal(tmp_path):
    _two_ranks(tmp_path / "a")
    _two_ranks(tmp_path / "b")
    (tmp_path / "b" / "metrics_rank0.jsonl").unlink()
    r = _diff(tmp_path)
    assert r.returncode == 3, r.stdout
    assert "INCOMPLETE" in r.stdout and "ranks only in A: [0]" in r.stdout
    d = json.loads(_diff(tmp_path, "--json").stdout)
    assert d["ranks_only_in_a"] == [0] and d["ranks"] == [1]


def test_a_truncated_run_is_incomplete_not_equal(tmp_path):
    _two_ranks(tmp_path / "a", steps=10)
    _two_ranks(tmp_path / "b", steps=5)
    r = _diff(tmp_path)
    assert r.returncode == 3 and "steps only in A: [5, 6, 7, 8, 9]" in r.stdout


def test_a_line_naming_another_rank_than_its_file_is_refused(tmp_path):
    _two_ranks(tmp_path / "a")
    _two_ranks(tmp_path / "b")
    f = tmp_path / "b" / "metrics_rank0.jsonl"
    f.write_text(f.read_text().replace('"rank":0', '"rank":1').replace('"rank": 0', '"rank": 1'))
    r = _diff(tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "file name says 0" in r.stderr


@pytest.mark.parametrize(
    "metric, needle",
    [
        ('{"dtype":"float32","bits":"zz","value":1}', "not a hexadecimal"),
        ('{"dtype":"float99","bits":"0x1","value":1}', "unknown dtype"),
    ],
)
def test_malformed_metric_values_are_refused_with_the_field(tmp_path, metric, needle):
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "metrics_rank0.jsonl").write_text(
            f'{{"type":"step","step":0,"rank":0,"metrics":{{"loss":{metric}}}}}\n'
            f'{{"type":"step","step":1,"rank":0,"metrics":{{"loss":{metric}}}}}\n'
        )
    r = _diff(tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert needle in r.stderr and "metrics.loss" in r.stderr
