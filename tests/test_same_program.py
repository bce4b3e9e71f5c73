"""Which programs two runs launch, and which frames of a write's stack are the job's own.

A call only one run makes is a difference between the runs only when both run the same
program; two stacks' own scripts (Megatron's against DeepSpeed's) make their own calls.
"""

from __future__ import annotations

from triage_agent.records import Case, RunSpec
from triage_agent.workflow.extra_writers import _job_turn
from triage_agent.workflow.situation import programs, same_program
from triage_agent.workflow.write_recorder import Frame


def _case(a: list[list[str]], b: list[list[str]]) -> Case:
    return Case(
        name="programs",
        workspace="/tmp/unused",
        run_a=RunSpec(name="a", metrics="{out}", launch=a),
        run_b=RunSpec(name="b", metrics="{out}", launch=b),
    )


def test_the_script_is_found_past_the_launcher_and_a_flag_keeps_the_program():
    case = _case(
        [["{python}", "-m", "torch.distributed.run", "--nproc-per-node", "2", "train.py"]],
        [["torchrun", "--nproc-per-node", "2", "train.py", "--workers", "2"]],
    )
    assert programs(case, "a") == ["train.py"] == programs(case, "b")
    assert same_program(case)


def test_two_stacks_scripts_are_not_the_same_program():
    case = _case(
        [["torchrun", "pretrain_megatron.py", "--lr", "1e-3"]],
        [["deepspeed", "--num_gpus", "1", "train_deepspeed.py"]],
    )
    assert not same_program(case)
    modules = _case([["{python}", "-m", "job.train"]], [["{python}", "-m", "job.train_v2"]])
    assert programs(modules, "a") == ["-m job.train"]
    assert not same_program(modules)


def test_a_resume_launches_the_same_program_twice():
    case = _case(
        [["{python}", "train.py", "{out}", "5"]],
        [["{python}", "train.py", "{out}", "2"], ["{python}", "train.py", "{out}", "5"]],
    )
    assert same_program(case)


def test_a_package_installed_outside_the_run_directory_is_library_code():
    root = "/jobs/run1/"
    job = Frame(file="/jobs/run1/train.py", line=40, function="main")
    lib = Frame(file="/opt/pkgs/megatron/core/scheduler.py", line=12, function="step")
    inner = Frame(file="/opt/pkgs/megatron/core/counter.py", line=3, function="bump")
    # innermost first: the job called the package, which wrote the counter
    assert _job_turn([inner, lib, job], root) == (job, lib)
    # without a root, a path outside the known install prefixes reads as the job's own
    assert _job_turn([inner, lib, job]) == (inner, inner)
    assert _job_turn([job], root) == (job, job)
