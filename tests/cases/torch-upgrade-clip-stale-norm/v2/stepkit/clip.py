"""Gradient clipping by the total norm of all gradients."""

import torch


def total_norm(grads: list[torch.Tensor], norm_type: float = 2.0) -> torch.Tensor:
    """The norm of the per-tensor norms: the norm of all gradients as one vector."""
    return torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g, norm_type) for g in grads]), norm_type
    )


class GradClipper:
    """Scales gradients in place so that their total norm stays at most max_norm.

    The total norm moves little from one step to the next, so the coefficient comes from
    the norm measured at the previous call, and this call's norm is measured in the same
    loop that scales: one pass over the gradients instead of two. The first call, with no
    norm yet, measures it first."""

    def __init__(
        self,
        max_norm: float,
        norm_type: float = 2.0,
        eps: float = 1e-6,
        error_if_nonfinite: bool = False,
    ) -> None:
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.eps = eps
        self.error_if_nonfinite = error_if_nonfinite
        self._norm: torch.Tensor | None = None

    @property
    def last_norm(self) -> torch.Tensor | None:
        """The total norm before clipping at the last call (None before the first)."""
        return self._norm

    def clip_(self, grads: list[torch.Tensor]) -> torch.Tensor:
        """Clip grads in place; return their total norm before clipping."""
        if self._norm is None:
            self._norm = total_norm(grads, self.norm_type)
        coef = torch.clamp(self.max_norm / (self._norm + self.eps), max=1.0)
        norms = []
        for g in grads:
            norms.append(torch.linalg.vector_norm(g, self.norm_type))
            g.mul_(coef)
        norm = torch.linalg.vector_norm(torch.stack(norms), self.norm_type)
        if self.error_if_nonfinite and not torch.isfinite(norm):
            raise RuntimeError(f"the total gradient norm is {norm.item()}")
        self._norm = norm
        return norm
