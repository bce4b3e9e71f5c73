"""Correspondence and the boundary comparator on real DeepSpeed state (CPU, gloo, one rank).

Each job trains the same small bf16 model with DeepSpeed ZeRO 1 or 2 and dumps its
boundaries through the fragment maps (triage_agent.correspond.capture); the mapping pairs
the parameters by init bytes, and the comparator says which boundary differs first and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from triage_agent.correspond.boundaries import build_table
from triage_agent.correspond.mapping import build_mapping
from triage_agent.correspond.table import markdown, verdict_line
from triage_agent.errors import InputError
from triage_agent.runs import free_port

pytest.importorskip("deepspeed")

JOB = textwrap.dedent(
    """
    import json, os, sys
    import torch, deepspeed
    from triage_agent.correspond.capture import attach_deepspeed
    # one rank uses no shared-memory allreduce: skip building DeepSpeed's op for it, which
    # takes minutes and waits on any other build of it
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(32, 16)
            self.norm = torch.nn.LayerNorm(16)
            self.fc = torch.nn.Linear(16, 32)
            self.fc2 = torch.nn.Linear(16, 16)  # starts from other bytes than fc: a unique pair
        def forward(self, x):
            h = self.norm(self.emb(x))
            return self.fc(h + self.fc2(h))

    class Wrapper(torch.nn.Module):  # another framework's extra level of module nesting
        def __init__(self, inner):
            super().__init__()
            self.module = inner
        def forward(self, x):
            return self.module(x)

    def job(out, stage, decay, wrap, clip):
        torch.manual_seed(5)
        net = Net()
        model = Wrapper(net) if wrap == "wrap" else net
        named = list(model.named_parameters())
        if decay == "matrices":
            params = [{"params": [p for n, p in named if p.ndim > 1]},
                      {"params": [p for n, p in named if p.ndim == 1], "weight_decay": 0.0}]
        else:
            params = [p for n, p in named]
        cfg = {"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True},
               "zero_optimization": {"stage": stage}, "gradient_clipping": clip,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.1,
                                                         "torch_adam": True}},
               "zero_allow_untested_optimizer": True, "steps_per_print": 10**9}
        engine, *_ = deepspeed.initialize(model=model, model_parameters=params, config=cfg)
        cap = attach_deepspeed(out, engine, outputs=("fc",))
        for step in range(3):
            g = torch.Generator().manual_seed(step)
            x = torch.randint(0, 32, (4, 8), generator=g)
            logits = engine(x)
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 32), x.reshape(-1))
            engine.backward(loss)
            engine.step()
        cap.close()

    # every job named on the command line (five arguments each), one engine after another in
    # one process: DeepSpeed's start-up, not three steps of a small model, is what a launch costs
    args = sys.argv[1:]
    for k in range(0, len(args), 5):
        out, stage, decay, wrap, clip = args[k : k + 5]
        job(out, int(stage), decay, wrap, float(clip))
    """
)


def _launch(tmp: Path, script_text: str, *args: str) -> None:
    script = tmp / f"job{abs(hash(script_text)) % 10**8}.py"
    script.write_text(script_text)
    env = dict(
        os.environ,
        DS_ACCELERATOR="cpu",
        MASTER_ADDR="127.0.0.1",
        RANK="0",
        LOCAL_RANK="0",
        WORLD_SIZE="1",
        MASTER_PORT=str(free_port()),
    )
    done = subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]


def _jobs(tmp: Path, jobs: dict[str, tuple[int, str, str, float]]) -> dict[str, Path]:
    """Each job (ZeRO stage, decay groups, wrapping, clip) captured into ``tmp/<name>``, all
    in one launch."""
    args = []
    for name, (stage, decay, wrap, clip) in jobs.items():
        args += [str(tmp / name), str(stage), decay, wrap, repr(clip)]
    _launch(tmp, JOB, *args)
    return {name: tmp / name for name in jobs}


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, Path]:
    return _jobs(
        tmp_path_factory.mktemp("ds"),
        {
            "z1": (1, "all", "plain", 0.0),
            "z2": (2, "all", "wrap", 0.0),
            "z2m": (2, "matrices", "plain", 0.0),
            "clip": (1, "all", "plain", 0.01),
            "clip2": (1, "all", "plain", 0.010000001),
        },
    )


def test_fragment_maps_resolve_every_parameter_of_the_flat_partition(captures):
    side = json.loads((captures["z1"] / "side.json").read_text())
    names = {s["name"] for s in side["sites"]}
    assert names == {
        "emb.weight",
        "norm.weight",
        "norm.bias",
        "fc.weight",
        "fc.bias",
        "fc2.weight",
        "fc2.bias",
    }
    # one flat fp32 partition: the slices tile it without overlap
    spans = sorted(
        tuple(int(x) for x in s["master"].split("[")[2].split("]")[0].split(":"))
        for s in side["sites"]
    )
    assert spans[0][0] == 0 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert side["optimizer"] == "torch.optim.adamw.AdamW" and side["steps"] == 3
    assert side["wrapper"] == "DeepSpeedZeroOptimizer"
    assert side["resolution_check"] == "safe_get_full_fp32_param agrees for all 7 whole parameters"


def test_mapping_pairs_by_init_bytes_through_a_wrapper_and_ties_by_name(captures):
    m = build_mapping(captures["z1"], captures["z2"])
    by_a = {p.a: p for p in m.pairs}
    assert len(m.pairs) == 7 and not m.unmapped, m.unmapped
    assert by_a["fc.weight"].b == "module.fc.weight"
    # each pair is settled by its init bytes; the normalised names confirm it
    assert any("sha256" in e for e in by_a["norm.bias"].evidence)
    assert by_a["fc.weight"].b_site.master.startswith("single_partition_of_fp32_groups[0][")


def test_zero1_and_zero2_agree_at_every_boundary(captures):
    t, _ = build_table(captures["z1"], captures["z2"])
    assert t.steps == 3 and t.first is None, t.first
    assert [r.verdict for r in t.rows] == ["match"] * 5
    assert verdict_line(t, "grads") == "deepspeed vs deepspeed boundary grads: match"


def test_weight_decay_groups_are_found_at_the_master_weights_and_named(captures):
    t, _ = build_table(captures["z1"], captures["z2m"])
    assert t.first is not None
    assert (t.first.step, t.first.boundary) == (0, "master_weights")
    rows = {r.boundary: r for r in t.rows}
    assert rows["outputs"].verdict == "differs" and rows["outputs"].first_step == 1
    assert rows["grads"].first_step == 1 and rows["moments"].first_step == 1
    assert t.policy is not None and t.policy.name == "optimizer setting 'weight_decay' per tensor"
    assert t.policy.explains_all
    assert sorted(t.policy.tensors) == ["fc.bias", "fc2.bias", "norm.bias", "norm.weight"]
    assert "differs (optimizer setting 'weight_decay' per tensor)" in markdown(t)


def test_clip_coefficients_a_rounding_apart_are_named_a_gradient_scale(captures):
    t, _ = build_table(captures["clip"], captures["clip2"])
    assert t.first is not None and (t.first.step, t.first.boundary) == (0, "grads")
    assert t.policy is not None
    assert t.policy.name == "gradient scale (clip coefficient or loss scale)", t.policy
    # without clipping on either side the same bytes are no gradient-scale difference
    t2, _ = build_table(captures["z1"], captures["clip"])
    assert t2.first is not None and t2.first.boundary == "grads"
    assert t2.policy is not None and t2.policy.name == "grads arithmetic with equal inputs"


def test_a_setting_held_differently_is_not_named_for_the_gradients_it_cannot_touch(
    captures, tmp_path
):
    """Two runs whose clip coefficients differ by a rounding, B's 1-D tensors recorded with
    another weight decay: the consumed gradients still differ by one scale first, and the
    optimizer setting, read only after they are consumed, is not what names them."""
    import shutil

    b = tmp_path / "b"
    shutil.copytree(captures["clip2"], b)
    side = json.loads((b / "side.json").read_text())
    for step in side["settings"].values():
        for name, held in step.items():
            if name.endswith("bias"):
                held["weight_decay"] = "float:0x0.0p+0"
    (b / "side.json").write_text(json.dumps(side))
    t, _ = build_table(captures["clip"], b)
    assert t.first is not None and (t.first.step, t.first.boundary) == (0, "grads")
    assert t.policy is not None and t.policy.kind == "gradient-scale", t.policy


def test_a_tensor_with_no_partner_is_listed_not_dropped(captures, tmp_path):
    import shutil

    import torch

    b = tmp_path / "b"
    shutil.copytree(captures["z1"], b)
    init = torch.load(b / "init.pt")
    init["fc.weight"] = init["fc.weight"] + 1  # no longer the same init bytes
    torch.save(init, b / "init.pt")
    m = build_mapping(captures["z1"], b)
    left = {(u.side, u.name) for u in m.unmapped}
    assert {("a", "fc.weight"), ("b", "fc.weight")} <= left and len(m.pairs) == 6


def test_a_directory_that_is_not_a_capture_is_one_input_error(tmp_path):
    (tmp_path / "side.json").write_text("{}")
    with pytest.raises(InputError, match="not a boundary capture"):
        build_mapping(tmp_path, tmp_path)


def test_cli_compare_writes_the_table_and_exits_by_verdict(captures, tmp_path):
    triage = [sys.executable, "-m", "triage_agent.cli.app"]
    same = subprocess.run(
        [*triage, "correspond", "compare", str(captures["z1"]), str(captures["z2"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert same.returncode == 0, same.stderr
    out = tmp_path / "t"
    diff = subprocess.run(
        [
            *triage,
            "correspond",
            "compare",
            str(captures["z1"]),
            str(captures["z2m"]),
            "--format",
            "md",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert diff.returncode == 1, diff.stderr
    assert (
        "deepspeed vs deepspeed boundary master_weights: differs (optimizer setting" in diff.stdout
    )
    assert json.loads((out / "table.json").read_text())["first"]["boundary"] == "master_weights"
    assert len(json.loads((out / "mapping.json").read_text())["pairs"]) == 7
    bad = subprocess.run(
        [*triage, "correspond", "compare", str(tmp_path), str(captures["z1"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr


MEGATRON_JOB = textwrap.dedent(
    """
    import sys
    import torch, deepspeed
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig
    from triage_agent.correspond.capture import attach_deepspeed
    # one rank uses no shared-memory allreduce: skip building DeepSpeed's op for it, which
    # takes minutes and waits on any other build of it
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False

    out, wrap = sys.argv[1], sys.argv[2]
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    cfg = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4,
                            use_cpu_initialization=True, bf16=True, params_dtype=torch.bfloat16,
                            hidden_dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(1234)
    gpt = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(),
                   vocab_size=128, max_sequence_length=32)
    model = Float16Module(cfg, gpt) if wrap == "wrap" else gpt
    cfg_ds = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 1},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
              "zero_allow_untested_optimizer": True, "steps_per_print": 10**9}
    engine, *_ = deepspeed.initialize(model=model, model_parameters=list(model.parameters()),
                                      config=cfg_ds)
    attach_deepspeed(out, engine).close()
    """
)


def test_megatron_gpt_parameters_pair_across_wrappers_by_bytes_and_names(tmp_path):
    """A real megatron-core GPT (built on the CPU) under two module trees: its LayerNorm
    weights all start at ones with one shape, so the init bytes alone cannot pair them and
    the normalised names must; nothing is left unmapped."""
    pytest.importorskip("megatron.core")
    _launch(tmp_path, MEGATRON_JOB, str(tmp_path / "plain"), "plain")
    _launch(tmp_path, MEGATRON_JOB, str(tmp_path / "wrap"), "wrap")
    m = build_mapping(tmp_path / "wrap", tmp_path / "plain")
    assert not m.unmapped, m.unmapped
    assert all(p.b == p.a.removeprefix("module.") for p in m.pairs)
    ones = [p for p in m.pairs if p.a.endswith("layernorm.weight")]
    assert len(ones) >= 4 and len({p.evidence[0] for p in ones}) == 1  # same init bytes
    assert all(p.evidence[2] == "normalised names equal" for p in m.pairs)
