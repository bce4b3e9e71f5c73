"""The job's console log: every few steps one line with the step's loss and gradient norm.

With per-token reporting on, the line also restates the step's sentence-averaged loss per
target token, in nats and bits, with its perplexity: the numbers a language-modelling run is
usually compared by. The reporter only reads what the step hands it.
"""

import math

import torch


def token_stats(loss: torch.Tensor, n_tokens: int, n_seqs: int) -> dict[str, float]:
    """The sentence-averaged loss restated per target token."""
    per_tok = loss.detach()
    per_tok.mul_(n_seqs).div_(n_tokens)
    nats = per_tok.item()
    return {"tok_loss": nats, "bits_per_tok": nats / math.log(2.0), "ppl": math.exp(nats)}


class StepReporter:
    def __init__(self, every: int, per_token: bool) -> None:
        self.every = every
        self.per_token = per_token

    def __call__(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor,
                 n_tokens: int, n_seqs: int) -> None:
        if not self.every or (step + 1) % self.every:
            return
        parts = [f"step {step}", f"loss {loss.item():.4f}", f"grad_norm {float(grad_norm):.4f}"]
        if self.per_token:
            stats = token_stats(loss, n_tokens, n_seqs)
            parts += [f"{key} {value:.4f}" for key, value in stats.items()]
        print(" | ".join(parts), flush=True)
