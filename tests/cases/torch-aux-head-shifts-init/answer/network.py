"""The fix the ground truth applies: the classifier is built first, so its layers draw their
initial weights from the global generator exactly as a job without the probe does, and the
probe head is built afterwards under a forked generator state, so its draws shift nothing
the job draws later either. Same modules, same shapes; only the order of the draws moves."""

import network
import torch


def create_model(features, classes, probe_targets=0, width=48):
    net = network.Classifier(features, classes, width=width)
    probe = None
    if probe_targets:
        with torch.random.fork_rng(devices=[]):
            probe = network.ProbeHead(width, probe_targets)
    return net, probe
