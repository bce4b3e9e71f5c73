"""Every probe against its annotated fixtures: `ruleid:` lines must match, nothing else may.

A rule's fixtures carry the rule module's own base name, as semgrep pairs a rule with its
test: probes/rules/<module>.py is tested by probes/fixtures/<module>.<ext> (and
<module>.d/ for cases that need a file of their own). `todoruleid:` marks a known miss and
`todook:` a known false positive; both are asserted as they stand today, so the test fails
when the rule improves and the annotation gets promoted (to `ruleid:` or `ok:`).
"""

import re
from pathlib import Path

import pytest

from probes.model import TEMPLATES, template_names
from probes.registry import FIXTURES, all_probes, fixture_files, probe_module, rule_modules
from probes.scan import ScanRequest, run_scan
from reproducers.params import TEMPLATES as DESCRIBED

REPO = Path(__file__).resolve().parent.parent
ANNOT = re.compile(r"(?:#|//)\s*(ruleid|ok|todoruleid|todook):\s*([\w-]+)")


def _annotations(path: Path, probe_id: str) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {"ruleid": set(), "ok": set(), "todoruleid": set(), "todook": set()}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for kind, pid in ANNOT.findall(line):
            if pid == probe_id:
                out[kind].add(n)
    return out


def _fixture_problems(path: Path, probe_id: str) -> list[str]:
    """What is wrong between ``path``'s annotations and ``probe_id``'s findings in it."""
    ann = _annotations(path, probe_id)
    res = run_scan(ScanRequest(paths=[str(path)], probes=[probe_id], exclude_globs=[], workers=1))
    if res.files_scanned != 1 or res.skipped:
        return [f"{path.name}: not scanned ({res.skipped})"]
    got = {f.line_start for f in res.findings}
    # a known false positive fires today, like a ruleid line; a known miss that fires is
    # reported once, as a miss to promote
    expected = ann["ruleid"] | ann["todook"] | ann["todoruleid"]
    problems = []
    if missing := ann["ruleid"] - got:
        problems.append(f"{path.name}: {probe_id} no longer matches lines {sorted(missing)}")
    if extra := got - expected:
        problems.append(f"{path.name}: {probe_id} matches unannotated/ok lines {sorted(extra)}")
    if fixed := ann["todook"] - got:
        problems.append(f"{path.name}: known false positive gone at {sorted(fixed)}; make it ok:")
    if promoted := got & ann["todoruleid"]:
        problems.append(f"{path.name}: known miss now matches at {sorted(promoted)}; promote it")
    return problems


@pytest.mark.parametrize("module", rule_modules())
def test_every_rule_has_a_fixture_of_its_module_name(module):
    files = fixture_files(module)
    assert files, f"probes/rules/{module}.py has no fixture {FIXTURES}/{module}.*"
    # the id a user types is the module's name spelled with dashes, so either finds the other
    assert probe_module(module.replace("_", "-")) == module


def test_every_fixture_belongs_to_a_rule_of_its_name():
    modules = set(rule_modules())
    orphans = sorted(p.name for p in FIXTURES.iterdir() if p.name.split(".")[0] not in modules)
    assert not orphans, f"fixtures named after no rule module: {orphans}"


def test_fixture_lookup_goes_by_module_name(tmp_path):
    for name in ("coll_x.py", "coll_x.cu", "coll-x.py", "coll_xy.py", "coll_x.d/case.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    got = [p.relative_to(tmp_path).as_posix() for p in fixture_files("coll_x", tmp_path)]
    assert got == ["coll_x.cu", "coll_x.py", "coll_x.d/case.py"]
    assert fixture_files("coll_z", tmp_path) == []


@pytest.mark.parametrize("probe", all_probes(), ids=lambda p: p.id)
def test_probe_fixtures_match_exactly_the_annotated_lines(probe):
    files = fixture_files(probe_module(probe.id))
    assert files, f"probe {probe.id} has no fixture in {FIXTURES}"
    problems = [msg for path in files for msg in _fixture_problems(path, probe.id)]
    assert not problems, "\n".join(problems)
    totals = {k: sum(len(_annotations(p, probe.id)[k]) for p in files) for k in ("ruleid", "ok")}
    assert totals["ruleid"] >= 1, f"{probe.id}: fixtures need at least one positive case"
    assert totals["ok"] >= 1, f"{probe.id}: fixtures need at least one negative case"


FIRES = (
    "import torch.distributed as dist\n\ndef f(t):\n    dist.all_reduce(t, op=dist.ReduceOp.AVG)\n"
)


@pytest.mark.parametrize(
    ("marker", "problem"),
    [
        ("ruleid", None),
        ("todook", None),
        ("ok", "matches unannotated/ok lines [4]"),
        ("todoruleid", "known miss now matches at [4]"),
    ],
)
def test_fixture_markers_on_a_line_the_rule_fires_on(tmp_path, marker, problem):
    path = tmp_path / "case.py"
    path.write_text(FIRES.replace("AVG)\n", f"AVG)  # {marker}: coll-reduceop-avg\n"))
    problems = _fixture_problems(path, "coll-reduceop-avg")
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


@pytest.mark.parametrize(
    ("marker", "problem"),
    [
        ("ok", None),
        ("todoruleid", None),
        ("ruleid", "no longer matches lines [4]"),
        ("todook", "known false positive gone at [4]"),
    ],
)
def test_fixture_markers_on_a_line_the_rule_does_not_fire_on(tmp_path, marker, problem):
    path = tmp_path / "case.py"
    path.write_text(f"def f(t):\n    pass\n\nx = 1  # {marker}: coll-reduceop-avg\n")
    problems = _fixture_problems(path, "coll-reduceop-avg")
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1 and problem in problems[0]


def test_probe_fixtures_findings_carry_metadata():
    path = FIXTURES / "coll_empty_list_before_collective.py"
    res = run_scan(
        ScanRequest(
            paths=[str(path)], probes=["coll-empty-list-before-collective"], exclude_globs=[]
        )
    )
    f = res.findings[0]
    assert f.category == "collectives" and f.function == "global_norm"
    assert "torch.stack(norms)" in f.snippet
    assert f.reproducer is not None and f.reproducer.template == "empty_contribution"
    assert f.reproducer.params["function"].endswith("global_norm")


def test_template_list_is_the_reproducer_template_files(tmp_path):
    on_disk = template_names(REPO / "reproducers" / "templates")
    assert on_disk and on_disk == TEMPLATES
    assert set(DESCRIBED) == TEMPLATES
    (tmp_path / "_common.py").write_text("")
    (tmp_path / "new_check.py").write_text("")
    (tmp_path / "notes.md").write_text("")
    assert template_names(tmp_path) == {"new_check"}


def test_registry_probes_have_unique_ids_and_known_templates():
    probes = all_probes()
    assert len({p.id for p in probes}) == len(probes)
    assert {p.template for p in probes} - {None} <= TEMPLATES
    cats = {p.category.value for p in probes}
    assert cats == {
        "optimizer-init",
        "casts",
        "accumulation",
        "collectives",
        "rng-state",
        "nondeterminism",
    }
    for cat in cats:
        assert sum(p.category.value == cat for p in probes) >= 3, f"{cat} needs several probes"
