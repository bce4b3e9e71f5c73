"""picolm: the model and optimizer set-up of our small language-model job.

    from picolm import model, optim

0.5: a model says which of its parameters decay (TinyLM.optim_groups), chosen by what they
are rather than by how they are named; optim.build_optimizer asks the model.
"""

__version__ = "0.5.0"
