"""The alignment loop on a real cross-framework pair on the CPU: A is a reference trainer
in plain torch (bf16 model, fp32 master copies, torch AdamW with its own weight-decay rule),
B the same model, bytes and batches under real DeepSpeed ZeRO 1 (gloo, one rank). B's
launch flag ``--decay`` and the tool's own DeepSpeed replacements are the surface the loop
draws its candidates from; nothing here tells it which one aligns.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from test_cli_support import run_cli

from triage_agent.config import load_case
from triage_agent.correspond.align import Budget, capture_dir
from triage_agent.correspond.boundaries import build_table
from triage_agent.correspond.candidates import candidates, launch_flags, setting_value
from triage_agent.correspond.model import Policy, SideMeta
from triage_agent.correspond.table import align_markdown
from triage_agent.correspond.workflow import align_case
from triage_agent.interventions import parse_intervention, plan, rerun, to_text
from triage_agent.ledger import Ledger
from triage_agent.records import RunSpec
from triage_agent.runs import materialize

pytest.importorskip("deepspeed")

NET = textwrap.dedent(
    """
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(32, 32)
            self.norm = torch.nn.LayerNorm(32)
            self.fc = torch.nn.Linear(32, 32)

        def forward(self, x):
            return self.fc(self.norm(self.emb(x)))

    def build():
        torch.manual_seed(5)
        torch.set_num_threads(1)
        return Net()

    def batch(step):
        return torch.randint(0, 32, (4, 8), generator=torch.Generator().manual_seed(step))

    def loss_of(logits, x):
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, 32), x.reshape(-1))
    """
)

REF = textwrap.dedent(
    '''
    """A: the reference, in plain torch."""
    import argparse
    import torch
    import net
    from triage_agent.correspond.capture import attach_torch
    from triage_agent.metrics import MetricLog

    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--boundaries", required=True)
    p.add_argument("--no-decay", choices=["none", "1d-and-bias", "bias"], default="1d-and-bias")
    p.add_argument("--clip", type=float, default=0.0)
    args = p.parse_args()
    model = net.build().to(torch.bfloat16)
    masters = {n: q.detach().float().clone() for n, q in model.named_parameters()}

    def exempt(n, q):
        if args.no_decay == "bias":
            return n.endswith(".bias")
        return args.no_decay == "1d-and-bias" and (q.ndim == 1 or n.endswith(".bias"))

    named = list(model.named_parameters())
    groups = [{"params": [masters[n] for n, q in named if not exempt(n, q)]},
              {"params": [masters[n] for n, q in named if exempt(n, q)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=1e-2, weight_decay=0.1)
    cap = attach_torch(args.boundaries, model, opt, masters, outputs=("fc",), clip=args.clip)
    with MetricLog(args.out, rank=0) as log:
        for step in range(3):
            x = net.batch(step)
            loss = net.loss_of(model(x), x)
            loss.backward()
            for n, q in named:
                masters[n].grad, q.grad = q.grad.float(), None
            if args.clip > 0:  # Megatron's clip without Apex or TE, in its groups' order
                order = [n for n, q in named if q.ndim > 1] + [n for n, q in named if q.ndim == 1]
                grads = [masters[n].grad for n in order]
                reduced = torch.norm(torch.tensor([[torch.norm(g) for g in grads]]))
                norm = (torch.tensor([float(reduced)], dtype=torch.float) ** 2.0).item() ** 0.5
                coeff = args.clip / (norm + 1.0e-6)
                if coeff < 1.0:
                    for g in grads:
                        g.copy_(g * coeff)
            opt.step()
            with torch.no_grad():
                for n, q in named:
                    q.copy_(masters[n])
            log.log(step, loss=loss.detach())
    cap.close()
    '''
)

DS = textwrap.dedent(
    '''
    """B: the same model and batches under DeepSpeed ZeRO 1, bf16, one gloo rank."""
    import argparse, os
    import deepspeed, torch
    import net
    from triage_agent.correspond.capture import attach_deepspeed
    from triage_agent.metrics import MetricLog
    # one rank uses no shared-memory allreduce: skip building DeepSpeed's op for it
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False

    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--boundaries", required=True)
    p.add_argument("--deepspeed_config", required=True)
    p.add_argument("--port", required=True)
    p.add_argument("--decay", choices=["all", "matrices"], default="all",
                   help="which tensors weight decay applies to")
    args = p.parse_args()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=args.port, RANK="0",
                      LOCAL_RANK="0", WORLD_SIZE="1")
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    model = net.build()
    named = list(model.named_parameters())
    params = [q for n, q in named]
    if args.decay == "matrices":
        params = [{"params": [q for n, q in named if q.ndim > 1]},
                  {"params": [q for n, q in named if q.ndim == 1], "weight_decay": 0.0}]
    engine, *_ = deepspeed.initialize(model=model, model_parameters=params,
                                      config=args.deepspeed_config)
    cap = attach_deepspeed(args.boundaries, engine, outputs=("fc",))
    with MetricLog(args.out, rank=0) as log:
        for step in range(3):
            x = net.batch(step)
            loss = net.loss_of(engine(x), x)
            engine.backward(loss)
            engine.step()
            log.log(step, loss=loss.detach())
    cap.close()
    '''
)

CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "bf16": {"enabled": True},
    "zero_optimization": {"stage": 1},
    "gradient_clipping": 0.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1, "torch_adam": True}},
    "zero_allow_untested_optimizer": True,
    "steps_per_print": 10**9,
}


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    """The two trainers and B's config, shared by every case here: B's launch is the same
    in each, so its baseline and its reruns are launched once and reused."""
    root = tmp_path_factory.mktemp("src")
    (root / "net.py").write_text(NET)
    (root / "train_ref.py").write_text(REF)
    (root / "train_ds.py").write_text(DS)
    (root / "ds.json").write_text(json.dumps(CONFIG))
    (root / "ds_clip.json").write_text(json.dumps({**CONFIG, "gradient_clipping": 0.05}))
    return root


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("align") / "ws"


def _case(src: Path, where: Path, a_rule: str, a_extra: str = "", config: str = "ds.json") -> Path:
    """A case file in ``where``: A with weight-decay rule ``a_rule`` (and ``a_extra``
    arguments), B as launched with ``config``."""
    where.mkdir(parents=True, exist_ok=True)
    text = f"""
        [case]
        name = "torch-vs-deepspeed"
        workspace = ".triage"
        timeout_s = 300.0
        [runs.a]
        metrics = "{{out}}"
        cwd = "{src}"
        env = {{PYTHONPATH = "{src}"}}
        launch = [["{{python}}", "train_ref.py", "--out", "{{out}}", "--boundaries", "{{out}}/boundaries", "--no-decay", "{a_rule}"{a_extra}]]
        [runs.b]
        metrics = "{{out}}"
        cwd = "{src}"
        env = {{DS_ACCELERATOR = "cpu", PYTHONPATH = "{src}"}}
        launch = [["{{python}}", "train_ds.py", "--out", "{{out}}", "--boundaries", "{{out}}/boundaries", "--deepspeed_config", "{config}", "--port", "{{port}}"]]
        """
    (where / "triage.toml").write_text(textwrap.dedent(text))
    return where / "triage.toml"


def test_flags_with_choices_are_read_from_the_script_b_launches(src):
    flags = {f.name: f for f in launch_flags(src / "train_ds.py")}
    assert flags["--decay"].choices == ["all", "matrices"] and flags["--decay"].default == "all"
    assert "--port" not in flags  # no finite set of values
    assert setting_value("float:0x1.999999999999ap-4") == 0.1
    assert setting_value("(float:0x1.ccccccccccccdp-1, float:0x1.ff7ced916872bp-1)") == [
        0.9,
        0.999,
    ]


def test_boolean_flags_are_bare_candidates_and_a_bare_flag_is_added_once(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import argparse
            p = argparse.ArgumentParser()
            p.add_argument("--fp32-reduce", action="store_true", help="reduce gradients in fp32")
            p.add_argument("--fused", action=argparse.BooleanOptionalAction)
            p.add_argument("--mode", choices=("a", "b"), default="a")
            """
        )
    )
    flags = {f.name: f for f in launch_flags(script)}
    assert flags["--fp32-reduce"].bare == ["--fp32-reduce"] and not flags["--fp32-reduce"].choices
    assert flags["--fused"].bare == ["--fused", "--no-fused"]
    assert flags["--mode"].choices == ["a", "b"] and not flags["--mode"].bare
    run = RunSpec(name="b", cwd=str(tmp_path), launch=[["python", "train.py", "--fused"]])
    policy = Policy(name="grads arithmetic with equal inputs", detail="", explains_all=False)
    side = SideMeta(
        version=1, framework="deepspeed", optimizer="x", wrapper="y", sites=[], outputs=[]
    )
    got = [c.intervention for c in candidates(policy, "grads", 0, side, side, run)]
    # relevant to gradient arithmetic first; --fused is passed already, so only its negation
    assert got == ["config --fp32-reduce", "config --no-fused", "config --mode=b"], got
    iv = parse_intervention("config --fp32-reduce")
    assert to_text(iv) == "config --fp32-reduce" and parse_intervention(to_text(iv)) == iv
    changed, _, _ = plan(run, [iv], tmp_path / "ws")
    assert changed.launch == [["python", "train.py", "--fused", "--fp32-reduce"]]
    again, _, _ = plan(changed, [iv], tmp_path / "ws")
    assert again.launch == changed.launch


def test_the_loop_proves_the_decay_set_with_bs_own_flag(src, shared, tmp_path):
    case = load_case(_case(src, tmp_path, "1d-and-bias"))
    r = align_case(case, shared, [], budget=Budget(reruns=3))
    t = r.alignment
    assert t.launched.first is not None
    assert (t.launched.first.step, t.launched.first.boundary) == (0, "master_weights")
    assert t.kept == ["config --decay=matrices"], align_markdown(t)
    assert t.aligned.first is None and [x.verdict for x in t.aligned.rows] == ["match"] * 5
    rows = {x.boundary: x for x in t.rows}
    assert rows["master_weights"].proven_by == "config --decay=matrices"
    assert rows["master_weights"].policy == "optimizer setting 'weight_decay' per tensor"
    assert all(x.aligned == "match" for x in t.rows)
    assert t.walk[0].attempts[0].candidate.source == "launch-flag"
    md = align_markdown(t)
    assert (
        "torch vs deepspeed boundary master_weights: differs (optimizer setting 'weight_decay' "
        "per tensor, from step 0), proven by config --decay=matrices"
    ) in md
    st = Ledger(shared).state()
    ev = next(e for e in st.evidence if e.id == t.walk[0].attempts[0].evidence_id)
    assert ev.result == "supported" and ev.data.interventions == ["config --decay=matrices"]
    assert st.hypotheses[t.walk[0].hypothesis_id].status == "supported"


def test_the_replacement_regroups_b_by_megatrons_rule_through_the_bootstrap(src, shared, tmp_path):
    """The tool's own replace of deepspeed.initialize: B's parameters regrouped by
    Megatron's default rule; against the reference with that rule every boundary matches,
    and the patch was applied and called (or the metric comparison says it was not)."""
    case = load_case(_case(src, tmp_path, "1d-and-bias"))
    iv = "replace deepspeed:initialize=triage_agent.correspond.aligners:megatron_decay_groups"
    b = rerun(case, "b", [parse_intervention(iv)], workspace=shared)
    assert b.ok, b.error
    assert b.patches["deepspeed:initialize"].get("called"), b.patches
    a = materialize(case.run_a, shared, "baseline")
    t, _ = build_table(capture_dir(a, "boundaries"), capture_dir(b, "boundaries"))
    assert t.first is None, (t.first, t.policy)


def test_a_policy_no_candidate_aligns_stays_unproven(src, shared, tmp_path):
    """A exempts only biases: neither B's flag (1-D tensors too) nor Megatron's rule is A's
    set, so the boundary stays differs, unproven, with every attempt on the ledger."""
    case = load_case(_case(src, tmp_path, "bias"))
    r = align_case(case, shared, [], budget=Budget(reruns=4))
    t = r.alignment
    assert t.kept == [] and t.aligned.first is not None
    step = t.walk[0]
    assert step.boundary == "master_weights" and step.proven_by is None
    tried = {a.candidate.intervention: a.outcome for a in step.attempts}
    assert tried == {
        "config --decay=matrices": "still differs",
        "replace deepspeed:initialize=triage_agent.correspond.aligners:megatron_decay_groups": (
            "still differs"
        ),
    }, tried
    rows = {x.boundary: x for x in t.rows}
    assert rows["master_weights"].proven_by == "unproven"
    assert "none of the 2 candidates tried aligned it" in step.unproven_why
    assert (
        "torch vs deepspeed boundary master_weights: differs (optimizer setting "
        "'weight_decay' per tensor, from step 0), unproven"
    ) in align_markdown(t)
    st = Ledger(shared).state()
    ids = {a.evidence_id for a in step.attempts}
    assert {e.result for e in st.evidence if e.id in ids} == {"refuted"}
    assert st.hypotheses[step.hypothesis_id].status == "open"


def test_cli_align_writes_the_table_and_exits_by_proof(src, shared, tmp_path):
    case_file = _case(src, tmp_path, "1d-and-bias")
    out = tmp_path / "t"
    done = run_cli(
        *("correspond", "case", "--case", str(case_file), "--workspace", str(shared)),
        *("--format", "md", "--out", str(out)),
        timeout=600,
    )
    assert done.returncode == 1, done.stderr  # differs as launched, every difference proven
    assert "proven by config --decay=matrices" in done.stdout
    table = json.loads((out / "table.json").read_text())
    assert table["kept"] == ["config --decay=matrices"]
    assert (out / "mapping.json").is_file()


def test_the_clip_is_aligned_by_a_replacement_of_deepspeeds(src, shared, tmp_path):
    """Both clip at 0.05, A as Megatron does (its norm decomposition and coefficient form),
    B as DeepSpeed does: the consumed gradients differ by one scale, the clips are equal (no
    config key to offer), and the tool's replacements of DeepSpeed's clip are tried in turn."""
    case = load_case(_case(src, tmp_path, "none", ', "--clip", "0.05"', "ds_clip.json"))
    r = align_case(case, shared, [], budget=Budget(reruns=2))
    t = r.alignment
    print(align_markdown(t))
    first = t.walk[0]
    assert (first.step, first.boundary) == (0, "grads")
    assert first.policy is not None and first.policy.kind == "gradient-scale", first.policy
    # the coefficient's form alone is not enough on the CPU (DeepSpeed's norm of the same
    # gradients rounds otherwise than Megatron's per-tensor decomposition); the whole clip is
    tried = [(a.candidate.intervention.rsplit(":", 1)[1], a.outcome) for a in first.attempts]
    assert tried == [
        ("megatron_clip_coefficient", "still differs"),
        ("megatron_clip", "aligned"),
    ], tried
    assert t.kept == [first.proven_by] and t.aligned.first is None, align_markdown(t)


def test_triage_run_reads_the_corresponding_boundaries_and_proves_the_decay_set(src, tmp_path):
    # the whole workflow, as `triage run` makes it: the baselines' boundary captures are an
    # observation, and the interventions their first difference asks for are its arms
    from test_workflow_support import triage

    from triage_agent.ledger_view import verdict_basis

    case = load_case(_case(src, tmp_path / "case", "1d-and-bias"))
    case = case.model_copy(update={"workspace": str(tmp_path / "ws")})
    result, st = triage(case)
    v = result.verdict
    assert v is not None and v.classification.value == "policy-difference", v
    assert (v.location or "").startswith("config:--decay"), v.location
    basis = verdict_basis(st)
    proof = next(e for e in st.evidence if e.id == basis.evidence)
    assert proof.data.interventions == ["config --decay=matrices"]
    observed = [e for e in st.evidence if e.summary.startswith("corresponding boundaries:")]
    assert observed and "master_weights" in observed[0].summary
