"""copy-returns: a cache's own tensor handed to callers as copies."""

from triage_agent.interventions import intervene, parse_intervention
from triage_agent.ledger import Ledger
from triage_agent.records import Case, RunSpec

CACHE = """import torch

_TABLE = {}


def table(n):
    if n not in _TABLE:
        _TABLE[n] = torch.linspace(0, 1, n)
    return _TABLE[n]


def fresh(n):
    return torch.linspace(0, 1, n)
"""

TRAIN = """import sys
import torch
import cache
from triage_agent.metrics import MetricLog

get = cache.table if "--cached" in sys.argv else cache.fresh
torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(8))
opt = torch.optim.SGD([w], lr=0.1)
log = MetricLog(sys.argv[1])
for step in range(4):
    t = get(8).mul_(0.5)  # the job scales what it is handed, in place
    loss = (w * t).square().sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    log.log(step, loss=loss.item())
log.close()
"""


def test_copies_of_a_cached_tensor_give_back_a_fresh_tables_bits_and_name_its_return(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "cache.py").write_text(CACHE)
    (src / "train.py").write_text(TRAIN)

    def run(name, *extra):
        launch = [["{python}", "train.py", "{out}", *extra]]
        return RunSpec(name=name, metrics="{out}", cwd=str(src), launch=launch)

    case = Case(
        name="cached",
        workspace=str(tmp_path / "ws"),
        source_roots=[str(src)],
        run_a=run("a"),
        run_b=run("b", "--cached"),
        timeout_s=120,
    )
    ledger = Ledger(case.workspace)
    # the cache is scaled again at every step: B differs until its callers get copies
    res = intervene(case, "b", [parse_intervention("copy-returns cache:table")], ledger=ledger)
    assert res.match.all_match, res.match
    assert res.match.steps == 4
    as_is = intervene(case, "b", [parse_intervention("env UNREAD=1")], ledger=ledger)
    assert as_is.match.first_differing_step == 1  # the second call meets the scaled cache
    report = next((tmp_path / "ws").rglob(".triage-copy-returns.json")).read_text()
    assert "cache.py:9" in report and "returned on an earlier call" in report
