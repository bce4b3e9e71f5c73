"""stepkit: the small training-step helpers our jobs share.

    from stepkit import Trainer
    trainer = Trainer(model, optimizer, max_grad_norm=1.0)
    grad_norm = trainer.train_step(loss)

0.7: clipping is a GradClipper object the Trainer keeps (its last_norm is there for
logging); it replaces the clip_by_total_norm function.
"""

from .clip import GradClipper, total_norm
from .trainer import Trainer

__version__ = "0.7.0"
__all__ = ["GradClipper", "Trainer", "total_norm"]
