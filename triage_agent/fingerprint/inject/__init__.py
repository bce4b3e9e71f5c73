"""Injection into unmodified training commands: this directory is prepended to PYTHONPATH.

Python imports ``sitecustomize`` at start-up in every process of the command (the launcher,
each rank); ours reads the capture settings from the JSON file named by
``TRIAGE_CAPTURE_CONFIG`` and hands over to :mod:`.bootstrap`.
"""

from pathlib import Path

INJECT_DIR = Path(__file__).resolve().parent
