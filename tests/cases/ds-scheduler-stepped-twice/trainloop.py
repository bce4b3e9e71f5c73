"""The job's training loops: one counts optimizer steps, the other passes over the corpus
epoch by epoch (the loop the job had before it moved to DeepSpeed). Both train through the
DeepSpeed engine, one micro-batch per step, and log the exact bits of the step's loss, the
learning rate it trained at and the gradient norm."""

import torch.nn.functional as F


def train_step(engine, tokens, labels):
    loss = F.cross_entropy(engine(tokens).float(), labels)
    engine.backward(loss)
    engine.step()
    return loss.detach()


def fit_steps(engine, sched, corpus, steps, log):
    for step in range(steps):
        tokens, labels = corpus.batch(step)
        lr = sched.get_last_lr()[0]
        loss = train_step(engine, tokens, labels)
        log.log(step, loss=loss, lr=lr, grad_norm=engine.get_global_grad_norm())


def fit_epochs(engine, sched, corpus, epochs, log):
    step = 0
    for epoch in range(epochs):
        for tokens, labels in corpus.epoch(epoch):
            lr = sched.get_last_lr()[0]
            loss = train_step(engine, tokens, labels)
            sched.step()
            log.log(step, loss=loss, lr=lr, grad_norm=engine.get_global_grad_norm())
            step += 1
