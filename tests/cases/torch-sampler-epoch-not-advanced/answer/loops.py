"""The fix the ground truth applies: the loop with per-epoch validation tells the sampler
which epoch it is before the epoch's iterator is made, as the plain loop does. Without it the
DistributedSampler stays at epoch 0 and shuffles every epoch with the same seed, so every
epoch visits the batches in epoch 0's order."""

import torch
from loops import evaluate, train_step


def fit_and_evaluate(model, opt, loader, val_set, epochs, log):
    step = 0
    for epoch in range(epochs):
        model.train()
        loader.sampler.set_epoch(epoch)
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
