"""Replacements of DeepSpeed calls that align one policy of B to Megatron's where DeepSpeed
has no config key for it. Each is applied as a recorded ``replace`` intervention through the
injected bootstrap (:mod:`triage_agent.policies`), so B's source is never edited; each
calls the original (the patch keeps it as ``__wrapped__``) and changes only the one policy
it names.

- ``megatron_decay_groups`` replaces ``deepspeed.initialize``: the parameters it is handed
  are regrouped by Megatron's classic default rule (no weight decay for biases and
  1-D tensors, ``megatron.core.optimizer.get_standard_config_overrides``), every other
  group setting kept. DeepSpeed decays every parameter it is handed as one group.
- ``megatron_clip_coefficient`` replaces ``DeepSpeedZeroOptimizer.unscale_and_clip_grads``:
  the clip coefficient formed as Megatron forms it without Apex or Transformer Engine
  (``clip_grad_by_total_norm_fp32``): the fp32 norm squared in fp32, its root taken in
  double, ``max_norm / (norm + 1e-6)`` in double, one multiply of each gradient when it is
  below 1. DeepSpeed forms ``(norm + 1e-6) / max_norm`` in fp32, clamps it at 1 and
  multiplies by its reciprocal. The norm itself stays DeepSpeed's.
- ``megatron_clip`` replaces the same call with Megatron's whole clip: that coefficient,
  from the norm decomposed as Megatron decomposes it without Apex or TE
  (``local_multi_tensor_l2_norm``): one fp32 norm per parameter's gradient, in the order of
  Megatron's default parameter groups (decayed tensors, then biases and 1-D tensors, each
  in model order), their norm taken over a CPU tensor. Computed once per step, at the first
  group's call, from that group's fp32 partition and the later groups' reduced gradients;
  world size 1 only (a rank's partition is not the whole gradient).
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel

from .model import Policy, SideMeta


class Aligner(BaseModel):
    target: str
    replacement: str
    governs: str
    kind: str
    setting: str | None = None
    needs_clip: bool = False

    def applies(self, policy: Policy, b: SideMeta) -> bool:
        return (
            b.framework == "deepspeed"
            and policy.kind == self.kind
            and (self.setting is None or policy.setting == self.setting)
            and (not self.needs_clip or bool(b.clip))
        )


ALIGNERS = [
    Aligner(
        target="deepspeed:initialize",
        replacement="triage_agent.correspond.aligners:megatron_decay_groups",
        governs="the weight-decay set: Megatron's default groups (no decay for biases, 1-D tensors)",
        kind="setting",
        setting="weight_decay",
    ),
    Aligner(
        target="deepspeed.runtime.zero.stage_1_and_2:DeepSpeedZeroOptimizer.unscale_and_clip_grads",
        replacement="triage_agent.correspond.aligners:megatron_clip_coefficient",
        governs="the clip coefficient's form: Megatron's max_norm / (norm + 1e-6), in double",
        kind="gradient-scale",
        needs_clip=True,
    ),
    Aligner(
        target="deepspeed.runtime.zero.stage_1_and_2:DeepSpeedZeroOptimizer.unscale_and_clip_grads",
        replacement="triage_agent.correspond.aligners:megatron_clip",
        governs="the clip: Megatron's norm decomposition and coefficient form",
        kind="gradient-scale",
        needs_clip=True,
    ),
]


def megatron_exempt(name: str, param: Any) -> bool:
    """Megatron's classic rule: a bias or a 1-D tensor gets no weight decay."""
    return len(param.shape) == 1 or name.endswith(".bias")


def regroup(model: Any, model_parameters: Any) -> list[dict]:
    """The groups split by :func:`megatron_exempt`, the exempt part with weight decay 0."""
    names = {id(p): n for n, p in model.named_parameters()}
    given = list(model_parameters if model_parameters is not None else model.parameters())
    groups = given if given and isinstance(given[0], dict) else [{"params": given}]
    out: list[dict] = []
    for g in groups:
        rest = {k: v for k, v in g.items() if k != "params"}
        params = list(g["params"])
        decay = [p for p in params if not megatron_exempt(names.get(id(p), ""), p)]
        exempt = [p for p in params if megatron_exempt(names.get(id(p), ""), p)]
        if decay:
            out.append({**rest, "params": decay})
        if exempt:
            out.append({**rest, "params": exempt, "weight_decay": 0.0})
    return out


def megatron_decay_groups(*args: Any, **kwargs: Any) -> Any:
    import deepspeed

    original = deepspeed.initialize.__wrapped__
    bound = inspect.signature(original).bind(*args, **kwargs)
    model = bound.arguments.get("model")
    if model is not None:
        bound.arguments["model_parameters"] = regroup(
            model, bound.arguments.get("model_parameters")
        )
    return original(*bound.args, **bound.kwargs)


def _flat(grad_groups_flat: list) -> list:
    return [g for x in grad_groups_flat for g in (x if isinstance(x, list) else [x])]


def _megatron_scale(self: Any, grads: list, norm: float) -> None:
    """Unscale, then ``max_norm / (norm + 1e-6)`` in double and one multiply below 1."""
    if self.loss_scale != 1.0:
        for g in grads:
            g.data.mul_(1.0 / self.loss_scale)
    if self.clip_grad > 0.0:
        coeff = self.clip_grad / (norm + 1.0e-6)
        if coeff < 1.0:
            for g in grads:
                g.data.copy_(g.data * coeff)


def megatron_clip_coefficient(self: Any, grad_groups_flat: list, total_norm: Any) -> None:
    if self.clip_grad == 0.0 and self.loss_scale == 1.0:
        return
    import torch

    # Megatron's norm: the fp32 norm squared in fp32, the root taken in double
    squared = (torch.as_tensor(total_norm, dtype=torch.float32) / self.loss_scale) ** 2.0
    _megatron_scale(self, _flat(grad_groups_flat), squared.item() ** 0.5)


def _megatron_norm(self: Any, first: Any) -> float:
    """Megatron's grad norm over every group's gradients, at the first group's call."""
    import torch

    per: list[tuple[bool, Any]] = []
    for i, group in enumerate(self.bit16_groups):
        for k, lp in enumerate(group):
            if i == 0:
                a = lp._hp_mapping.hp_fragment_address
                g = first.reshape(-1).narrow(0, a.start, a.numel)
            elif self.averaged_gradients[i] is None:
                raise RuntimeError(f"group {i}'s gradients are gone before group 0 is clipped")
            else:
                g = self.averaged_gradients[i][k].float()
            per.append((megatron_exempt("", lp), g))
    grads = [g for exempt, g in per if not exempt] + [g for exempt, g in per if exempt]
    l2 = [[torch.norm(g) for g in grads]]
    reduced = torch.norm(torch.tensor(l2))
    squared = torch.tensor([float(reduced)], dtype=torch.float, device=first.device) ** 2.0
    return squared.item() ** 0.5


def megatron_clip(self: Any, grad_groups_flat: list, total_norm: Any) -> None:
    if self.clip_grad == 0.0 and self.loss_scale == 1.0:
        return
    grads = _flat(grad_groups_flat)
    if grads and grads[0] is self.single_partition_of_fp32_groups[0].grad:
        self._megatron_clip_norm = _megatron_norm(self, grads[0]) / self.loss_scale
    _megatron_scale(self, grads, self._megatron_clip_norm)
