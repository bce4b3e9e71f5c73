"""The fix the ground truth applies: the probe's loss goes through the engine's backward like
the classifier's, so DeepSpeed divides it by the gradient accumulation steps (and runs its
backward prologue and epilogue around it) as it does when the loss is added to the
classifier's. It is handed to the micro-batch's one engine.backward: in DeepSpeed 0.19.8 a
second engine.backward in the same micro-batch is no fix under ZeRO-2, whose epilogue at the
accumulation boundary rebuilds the averaged gradients from the last backward alone."""

from probe import probe_loss


def backward_with_probe(engine, loss, feats, target):
    aux = probe_loss(engine.module, feats, target)
    engine.backward(loss + aux)
    return aux.detach()
