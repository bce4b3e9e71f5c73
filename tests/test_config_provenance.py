import subprocess
import sys

import git
import pytest

from triage_agent.config import load_case
from triage_agent.errors import ConfigError, InputError
from triage_agent.paths import check_rev, contained, split_rev_range
from triage_agent.provenance import capture, numeric_env

GOOD = """
[case]
name = "resume"
mismatch_step = 37
source_roots = ["src"]

[runs.a]
metrics = "runs/a"
launch = [["python", "train.py"]]

[runs.b]
metrics = "runs/b"
[runs.b.source]
repo = "."
rev = "HEAD"
"""


def test_config_loads_and_resolves_relative_paths(tmp_path):
    (tmp_path / "triage.toml").write_text(GOOD)
    case = load_case(tmp_path / "triage.toml")
    assert case.mismatch_step == 37
    assert case.run_a.metrics == str(tmp_path / "runs" / "a")
    assert case.run_b.source.repo == str(tmp_path)
    assert case.source_roots == [str(tmp_path / "src")]
    assert case.run_a.launch == [["python", "train.py"]]


def test_config_flag_overrides_file(tmp_path):
    (tmp_path / "triage.toml").write_text(GOOD)
    assert load_case(tmp_path / "triage.toml", mismatch_step=5).mismatch_step == 5


@pytest.mark.parametrize(
    "text, needle",
    [
        (GOOD.replace("mismatch_step = 37", 'mismatch_step = "soon"'), "case.mismatch_step"),
        (
            GOOD.replace('launch = [["python", "train.py"]]', 'launch = "python train.py"'),
            "runs.a.launch",
        ),
        (
            GOOD.replace("[runs.b]", "[runs.c]").replace("[runs.b.source]", "[runs.c.source]"),
            "[runs.a] and [runs.b]",
        ),
        (GOOD + "\nbogus = 1\n", "runs.b.source.bogus"),
        ("[case\n", "not valid TOML"),
        ("case = 5\n[runs.a]\n[runs.b]\n", "'case' must be a table"),
        ('[runs]\na = "x"\nb = "y"\n', "'runs.a' must be a table"),
        ("[runs]\na = [1]\nb = [2]\n", "'runs.a' must be a table"),
        (GOOD.replace("mismatch_step = 37", "mismatch_step = -3"), "case.mismatch_step"),
        (GOOD.replace("mismatch_step = 37", "timeout_s = -1"), "case.timeout_s"),
        (
            GOOD.replace("mismatch_step = 37", "gradient_accumulation_steps = 0"),
            "case.gradient_accumulation_steps",
        ),
        (
            GOOD.replace(
                'source_roots = ["src"]', 'source_roots = ["src"]\nscan_paths = ["../x.py"]'
            ),
            "outside every source root",
        ),
    ],
)
def test_config_errors_name_the_key(tmp_path, text, needle):
    (tmp_path / "triage.toml").write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_case(tmp_path / "triage.toml")
    assert needle in str(exc.value)


def test_config_missing_named_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_case(tmp_path / "nope.toml")


def test_config_directory_or_non_utf8_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not a regular file"):
        load_case(tmp_path)
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'[case]\nname = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_case(bad)


def test_cli_run_with_directory_case_is_one_line_error(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "run", "--case", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "not a regular file" in out.stderr


def test_provenance_reads_git_revision_and_dirty_flag(tmp_path):
    repo = git.Repo.init(tmp_path)
    (tmp_path / "a.py").write_text("x = 1\n")
    repo.index.add(["a.py"])
    commit = repo.index.commit("one")
    prov = capture(
        repos={"src": str(tmp_path)},
        environ={"NCCL_ALGO": "Ring", "HOME": "/root", "NVTE_FLASH_ATTN": "0"},
    )
    assert prov.git["src"]["rev"] == commit.hexsha
    assert prov.git["src"]["dirty"] is False
    assert prov.env == {"NCCL_ALGO": "Ring", "NVTE_FLASH_ATTN": "0"}
    assert prov.torch is not None and prov.deepspeed is not None
    (tmp_path / "a.py").write_text("x = 2\n")
    assert capture(repos={"src": str(tmp_path)}).git["src"]["dirty"] is True


def test_provenance_dirty_flag_leaves_out_the_workspace_inside_the_repository(tmp_path):
    repo = git.Repo.init(tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("x = 1\n")
    repo.index.add(["src/train.py"])
    repo.index.commit("one")
    ws = tmp_path / ".triage"
    (ws / "runs" / "a").mkdir(parents=True)
    (ws / "ledger.jsonl").write_text("{}\n")
    (ws / "runs" / "a" / "metrics.jsonl").write_text("{}\n")
    # the run's directory is a subdirectory: the repository is found above it
    seen = capture(repos={"a": str(tmp_path / "src")}, import_torch=False, workspace=ws)
    assert seen.git["a"]["dirty"] is False and seen.git["a"]["dirty_excludes"] == [".triage"]
    assert capture(repos={"a": str(tmp_path)}, import_torch=False).git["a"]["dirty"] is True

    # anything else is still a change: an untracked file beside the workspace, an edit
    def dirty() -> bool:
        return capture(repos={"a": str(tmp_path)}, import_torch=False, workspace=ws).git["a"][
            "dirty"
        ]

    (tmp_path / "notes.txt").write_text("n\n")
    assert dirty() is True
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "src" / "train.py").write_text("x = 2\n")
    assert dirty() is True
    # a workspace outside the repository excludes nothing and says nothing
    other = capture(repos={"a": str(tmp_path)}, import_torch=False, workspace=tmp_path.parent)
    assert "dirty_excludes" not in other.git["a"]


def test_provenance_non_git_directory_is_reported_not_raised(tmp_path):
    assert capture(repos={"x": str(tmp_path)}, import_torch=False).git["x"] == {
        "error": "not a git repository"
    }


def test_numeric_env_keeps_only_numerics():
    env = numeric_env({"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PATH": "/bin", "PYTHONHASHSEED": "0"})
    assert env == {"CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONHASHSEED": "0"}


def test_paths_reject_symlink_escape(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    assert contained(root / "a" / ".." / "b", [root]) == root / "b"
    with pytest.raises(InputError, match="outside the allowed roots"):
        contained(root / "link" / "secret", [root])
    with pytest.raises(InputError):
        contained(root / ".." / "x", [root])


@pytest.mark.parametrize("rev", ["--output=/tmp/x", "-n", "", "a b", "HEAD;rm", "a..b"])
def test_paths_reject_bad_revisions(rev):
    with pytest.raises(InputError):
        check_rev(rev)


def test_paths_split_range():
    assert split_rev_range("v1..HEAD~2") == ("v1", "HEAD~2")
    with pytest.raises(InputError):
        split_rev_range("v1...v2")


def test_cli_version_and_empty_ledger(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("bitwise-triage ")
    (tmp_path / "ledger.jsonl").write_text("")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage_agent.cli.app",
            "ledger",
            "export",
            "--format",
            "json",
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and '"hypotheses": {}' in out.stdout


@pytest.mark.parametrize("cmd", [["show"], ["export", "--format", "json"], ["export"]])
def test_cli_ledger_missing_workspace_is_one_line_error(tmp_path, cmd):
    missing = tmp_path / "no-such-workspace"
    out = subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", "ledger", *cmd, "-w", str(missing)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2, out.stdout
    assert "Traceback" not in out.stderr
    assert "no ledger at" in out.stderr and "triage run" in out.stderr
    assert not missing.exists()  # reading must not create the workspace


def _triage(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def test_cli_error_shows_brackets_in_paths_verbatim(tmp_path):
    odd = tmp_path / "[/]x" / "[bold]nope"
    out = _triage("metrics", "diff", str(odd), str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert str(odd) in out.stderr.replace("\n", "")


@pytest.mark.parametrize("where", ["missing/x.json", "."])
def test_cli_unwritable_output_is_one_line_error(tmp_path, where):
    (tmp_path / "e.py").write_text("x = 1\n")
    out = _triage("scan", "e.py", "-f", "json", "-o", str(tmp_path / where), cwd=tmp_path)
    assert out.returncode == 2, out.stdout
    assert "Traceback" not in out.stderr and out.stderr.startswith("error:")
