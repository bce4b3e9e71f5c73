"""Every probe against its annotated fixtures: `ruleid:` lines must match, nothing else may.

Fixtures live in probes/fixtures/<probe-id>.<ext> (and <probe-id>.d/ for cases that need a
file of their own). `todoruleid:` marks a known miss: the test fails if it starts matching,
so the annotation gets promoted.
"""

import re
from pathlib import Path

import pytest

from probes.registry import all_probes
from probes.scan import ScanRequest, run_scan

FIXTURES = Path(__file__).resolve().parent.parent / "probes" / "fixtures"
ANNOT = re.compile(r"(?:#|//)\s*(ruleid|ok|todoruleid|todook):\s*([\w-]+)")


def _fixture_files(probe_id: str) -> list[Path]:
    files = [p for p in FIXTURES.glob(f"{probe_id}.*") if p.is_file()]
    extra = FIXTURES / f"{probe_id}.d"
    if extra.is_dir():
        files += sorted(p for p in extra.iterdir() if p.is_file())
    return files


def _annotations(path: Path, probe_id: str) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {"ruleid": set(), "ok": set(), "todoruleid": set(), "todook": set()}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for kind, pid in ANNOT.findall(line):
            if pid == probe_id:
                out[kind].add(n)
    return out


@pytest.mark.parametrize("probe", all_probes(), ids=lambda p: p.id)
def test_probe_fixtures_match_exactly_the_annotated_lines(probe):
    files = _fixture_files(probe.id)
    assert files, f"probe {probe.id} has no fixture in {FIXTURES}"
    totals = {"ruleid": 0, "ok": 0}
    for path in files:
        ann = _annotations(path, probe.id)
        totals["ruleid"] += len(ann["ruleid"])
        totals["ok"] += len(ann["ok"])
        res = run_scan(
            ScanRequest(paths=[str(path)], probes=[probe.id], exclude_globs=[], workers=1)
        )
        assert res.files_scanned == 1 and not res.skipped
        got = {f.line_start for f in res.findings}
        missing = ann["ruleid"] - got
        extra = got - ann["ruleid"]
        assert not missing, f"{path.name}: {probe.id} no longer matches lines {sorted(missing)}"
        assert not extra, f"{path.name}: {probe.id} matches unannotated/ok lines {sorted(extra)}"
        assert not (got & ann["todoruleid"]), f"{path.name}: known miss now matches; promote it"
    assert totals["ruleid"] >= 1, f"{probe.id}: fixtures need at least one positive case"
    assert totals["ok"] >= 1, f"{probe.id}: fixtures need at least one negative case"


def test_probe_fixtures_findings_carry_metadata():
    path = FIXTURES / "coll-empty-list-before-collective.py"
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


def test_registry_probes_have_unique_ids_and_known_templates():
    probes = all_probes()
    assert len({p.id for p in probes}) == len(probes)
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
