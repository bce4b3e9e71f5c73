"""Scan bounding, ranking, bad input and SARIF, on real files, real git repos and real DeepSpeed."""

import json
import subprocess
import sys
from pathlib import Path

import deepspeed
import git
import jsonschema
import pytest

from probes.sarif import to_sarif
from probes.scan import ScanRequest, run_scan
from triage_agent.errors import InputError

DS_ROOT = Path(deepspeed.__file__).resolve().parent
REPO_ROOT = Path(__file__).resolve().parent.parent
# The official OASIS SARIF 2.1.0 schema, vendored so the test runs on any clone.
SARIF_SCHEMA = REPO_ROOT / "tests" / "fixtures" / "schemas" / "sarif-schema-2.1.0.json"

BUGGY = """import torch.distributed as dist


def reduce(t):
    dist.all_reduce(t, async_op=True)
    return t
"""


@pytest.fixture(scope="module")
def ds_resume_scan():
    return run_scan(ScanRequest(paths=[str(DS_ROOT)], phase="resume"))


def test_scan_deepspeed_resume_ranks_engine_checkpoint_paths_first(ds_resume_scan):
    res = ds_resume_scan
    assert res.files_scanned > 500 and res.budget_hit is None
    top = res.findings[:15]
    hits = {(Path(f.file).name, f.function) for f in top if f.probe_id == "rng-ckpt-omits-rng"}
    assert ("engine.py", "DeepSpeedEngine.save_checkpoint") in hits
    assert ("engine.py", "DeepSpeedEngine.load_checkpoint") in hits
    assert all(f.category == "rng-state" for f in top[:5])
    f = next(f for f in top if f.function == "DeepSpeedEngine.save_checkpoint")
    assert f.reproducer is not None and f.reproducer.template == "rng_resume"
    # the site really is the function definition in the installed source
    src = (DS_ROOT / "runtime" / "engine.py").read_text().splitlines()
    assert src[f.line_start - 1].lstrip().startswith("def save_checkpoint")


def test_scan_deepspeed_sarif_validates_against_schema(ds_resume_scan):
    assert SARIF_SCHEMA.is_file(), f"SARIF 2.1.0 schema expected at {SARIF_SCHEMA}"
    schema = json.loads(SARIF_SCHEMA.read_text())
    doc = to_sarif(ds_resume_scan)
    jsonschema.validate(doc, schema)
    results = doc["runs"][0]["results"]
    assert len(results) == ds_resume_scan.total_findings
    assert results[0]["ruleId"] == ds_resume_scan.findings[0].probe_id


def test_scan_phase_changes_ranking(tmp_path):
    path = tmp_path / "mixed.py"
    path.write_text(
        "import torch\n\n\ndef save_checkpoint(m, p):\n    torch.save(m.state_dict(), p)\n\n\n"
        "def g(out, idx, src):\n    out.index_add_(0, idx, src)\n"
    )
    first = run_scan(ScanRequest(paths=[str(path)], phase="first-step")).findings
    resume = run_scan(ScanRequest(paths=[str(path)], phase="resume")).findings
    assert first[0].category == "nondeterminism"
    assert resume[0].category == "rng-state"


def test_scan_file_budget_is_reported(tmp_path):
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(BUGGY)
    res = run_scan(ScanRequest(paths=[str(tmp_path)], max_files=2))
    assert res.files_scanned == 2 and res.files_total == 5
    assert res.budget_hit == "scanned 2/5 files, 2-file budget reached"


def test_scan_progress_names_each_file_with_workers_too(tmp_path):
    for i in range(4):
        (tmp_path / f"m{i}.py").write_text(BUGGY)
    for workers in (1, 2):
        seen: list[tuple[int, int, str]] = []
        res = run_scan(
            ScanRequest(paths=[str(tmp_path)], workers=workers),
            lambda done, total, what, seen=seen: seen.append((done, total, what)),
        )
        assert res.files_scanned == 4
        assert sorted(Path(w).name for _, _, w in seen) == [f"m{i}.py" for i in range(4)]
        assert [d for d, _, _ in seen] == [0, 1, 2, 3], workers


def test_scan_time_budget_is_reported():
    res = run_scan(ScanRequest(paths=[str(DS_ROOT)], max_seconds=0.05, workers=1))
    assert res.budget_hit is not None and "budget reached" in res.budget_hit
    assert res.files_scanned < res.files_total


def test_scan_around_limits_findings_to_the_window(tmp_path):
    path = tmp_path / "two.py"
    path.write_text(
        BUGGY + "\n" * 100 + BUGGY.replace("def reduce", "def reduce2").split("\n", 2)[2]
    )
    res = run_scan(ScanRequest(around=[f"{path}:5"], window=10))
    assert [f.line_start for f in res.findings] == [5]
    res_all = run_scan(ScanRequest(paths=[str(path)]))
    assert len(res_all.findings) == 2


def _repo(tmp_path):
    repo = git.Repo.init(tmp_path / "r")
    work = Path(repo.working_dir)
    (work / "pkg").mkdir()
    (work / "pkg" / "__init__.py").write_text("")
    old = "import torch.distributed as dist\n\n\ndef reduce(t):\n    h = dist.all_reduce(t, async_op=True)\n    h.wait()\n    return t\n"
    filler = "".join(f"\n\ndef f{i}(x):\n    return x\n" for i in range(30))
    stale = "\n\ndef stale(t):\n    dist.broadcast(t, 0, async_op=True)\n"
    (work / "pkg" / "comm.py").write_text(old + filler + stale)
    repo.index.add(["pkg/__init__.py", "pkg/comm.py"])
    a = repo.index.commit("a").hexsha
    (work / "pkg" / "comm.py").write_text(old.replace("    h.wait()\n", "") + filler + stale)
    repo.index.add(["pkg/comm.py"])
    b = repo.index.commit("b").hexsha
    # the work tree holds yet another change that must not be read
    (work / "pkg" / "comm.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    return work, a, b


def test_scan_diff_reads_the_revision_and_keeps_changed_hunks(tmp_path):
    work, a, b = _repo(tmp_path)
    res = run_scan(ScanRequest(diff=f"{a}..{b}", repo=str(work), window=3, phase="update"))
    assert res.revision == b
    assert [(f.file, f.probe_id, f.line_start) for f in res.findings] == [
        ("pkg/comm.py", "coll-async-no-wait", 5)
    ]
    assert res.findings[0].score > 0


@pytest.mark.parametrize(
    "diff, message",
    [
        ("--output=x..HEAD", "invalid git revision"),
        ("HEAD..nosuchbranch", "unknown revision"),
    ],
)
def test_scan_diff_rejects_bad_revisions(tmp_path, diff, message):
    work, _, _ = _repo(tmp_path)
    with pytest.raises(InputError, match=message):
        run_scan(ScanRequest(diff=diff, repo=str(work)))


def test_scan_diff_outside_git_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="needs a git repository"):
        run_scan(ScanRequest(diff="HEAD~1..HEAD", repo=str(tmp_path)))


def test_scan_missing_path_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="path not found"):
        run_scan(ScanRequest(paths=[str(tmp_path / "nope")]))


def test_scan_reports_binary_undecodable_and_broken_files_and_keeps_going(tmp_path):
    (tmp_path / "bin.py").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "latin.py").write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "broken.py").write_text(BUGGY + "\ndef oops(:\n    pass\n")
    (tmp_path / "good.py").write_text(BUGGY)
    res = run_scan(ScanRequest(paths=[str(tmp_path)]))
    reasons = {Path(s.file).name: s.reason for s in res.skipped}
    assert reasons["bin.py"].startswith("binary") and reasons["latin.py"].startswith("not UTF-8")
    assert [Path(p.file).name for p in res.parse_errors] == ["broken.py"]
    assert {Path(f.file).name for f in res.findings} == {"broken.py", "good.py"}
    assert res.files_scanned == 2 and res.files_total == 4


def test_scan_excludes_tests_by_default(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text(BUGGY)
    (tmp_path / "lib.py").write_text(BUGGY)
    assert run_scan(ScanRequest(paths=[str(tmp_path)])).files_total == 1
    assert run_scan(ScanRequest(paths=[str(tmp_path)], exclude_globs=[])).files_total == 2


def test_scan_resolves_dotted_module_without_importing():
    res = run_scan(ScanRequest(paths=["deepspeed.runtime.engine"], probes=["rng-ckpt-omits-rng"]))
    assert res.files_scanned == 1
    assert {f.function for f in res.findings} >= {"DeepSpeedEngine.save_checkpoint"}


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "scan", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_scan_cli_bad_input_is_one_line_without_traceback(tmp_path):
    r = _cli(str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "path not found" in r.stderr
    r = _cli("--diff", "HEAD~1..HEAD", "--repo", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "git repository" in r.stderr


def test_scan_cli_json_and_sarif_outputs(tmp_path):
    (tmp_path / "m.py").write_text(BUGGY)
    r = _cli(str(tmp_path / "m.py"), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (
        doc["schema"] == "triage.scan/1" and doc["findings"][0]["probe_id"] == "coll-async-no-wait"
    )
    out = tmp_path / "o.sarif"
    r = _cli(str(tmp_path / "m.py"), "--format", "sarif", "--output", str(out))
    assert r.returncode == 0, r.stderr
    jsonschema.validate(json.loads(out.read_text()), json.loads(SARIF_SCHEMA.read_text()))
