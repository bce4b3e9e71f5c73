"""The job's trainer: the model's optimizer, the per-process setup, one training step, and
the checkpoint it writes and continues from.

The backbone learns at a tenth of the head's rate. Rather than a second parameter group,
setup() puts a hook on each backbone parameter that scales its gradient as backward
produces it, so the clipping and the optimizer both see the gradient actually applied.
"""

import torch
import torch.nn.functional as F

BACKBONE_GRAD_SCALE = 0.1


def scale_backbone_grad(grad: torch.Tensor) -> torch.Tensor:
    return grad * BACKBONE_GRAD_SCALE


class Trainer:
    def __init__(self, model: torch.nn.Module, lr: float = 0.05, max_norm: float = 1.0) -> None:
        self.model = model
        self.max_norm = max_norm
        self.opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
        self.setup()

    def setup(self) -> None:
        """Ready the model for training: train mode, the backbone's gradient scaling."""
        self.model.train()
        for p in self.model.backbone.parameters():
            p.register_hook(scale_backbone_grad)

    def train_step(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loss = F.cross_entropy(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.opt.step()
        return loss.detach(), norm

    def save_checkpoint(self, path: str, step: int) -> None:
        torch.save(
            {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "step": step},
            path,
        )

    def load_checkpoint(self, path: str) -> int:
        """Bring the model and the optimizer back; the step the checkpoint was taken after."""
        state = torch.load(path)
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.setup()  # the loaded model, readied for training again
        return int(state["step"])
