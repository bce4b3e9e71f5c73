"""The job's epoch loops over a DataLoader whose sampler is a DistributedSampler.

``fit``: train for a number of epochs.
``fit_and_evaluate``: the same training, with the held-out split scored after every epoch
and the epoch's mean training loss reported beside it.
"""

import torch
import torch.nn.functional as F

CLIP = 1.0


def train_step(model, opt, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    opt.step()
    return loss.detach(), norm


@torch.no_grad()
def evaluate(model, dataset) -> dict[str, float]:
    model.eval()
    x, y = dataset.tensors
    logits = model(x)
    stats = {
        "val_loss": F.cross_entropy(logits, y).item(),
        "val_acc": (logits.argmax(dim=1) == y).float().mean().item(),
    }
    model.train()
    return stats


def fit(model, opt, loader, epochs: int, log) -> None:
    step = 0
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss, norm = train_step(model, opt, x, y)
            log.log(step, loss=loss, grad_norm=norm)
            step += 1


def fit_and_evaluate(model, opt, loader, val_set, epochs: int, log) -> None:
    step = 0
    for epoch in range(epochs):
        model.train()
        losses = []
        for x, y in loader:
            loss, norm = train_step(model, opt, x, y)
            log.log(step, loss=loss, grad_norm=norm)
            losses.append(loss)
            step += 1
        stats = evaluate(model, val_set)
        train_loss = torch.stack(losses).mean().item()
        print(
            f"epoch {epoch}: train_loss {train_loss:.4f} "
            f"val_loss {stats['val_loss']:.4f} val_acc {stats['val_acc']:.3f}"
        )
