"""picolm: the model and optimizer set-up of our small language-model job."""

__version__ = "0.4.0"
