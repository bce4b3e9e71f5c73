"""One probe per module; each defines ``PROBE``. Fixtures: ``probes/fixtures/<probe-id>.*``."""
