"""tinyjob: the model and optimizer set-up of our small classification job."""

__version__ = "0.7.0"
