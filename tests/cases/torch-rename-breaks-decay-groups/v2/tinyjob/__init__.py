"""tinyjob: the model and optimizer set-up of our small classification job.

    from tinyjob import model, optim
"""

__version__ = "0.8.0"
