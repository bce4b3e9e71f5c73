"""The fix the ground truth applies: the epoch loop leaves the schedule to the engine, which
already steps it inside engine.step(), so the learning rate advances once per optimizer
step, as in the step loop."""

from trainloop import train_step


def fit_epochs(engine, sched, corpus, epochs, log):
    step = 0
    for epoch in range(epochs):
        for tokens, labels in corpus.epoch(epoch):
            lr = sched.get_last_lr()[0]
            loss = train_step(engine, tokens, labels)
            log.log(step, loss=loss, lr=lr, grad_norm=engine.get_global_grad_norm())
            step += 1
