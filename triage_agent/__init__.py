"""bitwise-triage: find where and why two PyTorch training runs stop agreeing bit for bit."""

__version__ = "0.1.0"
