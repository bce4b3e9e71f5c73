"""One probe per module; each defines ``PROBE``. Fixtures: ``probes/fixtures/<module>.*``."""
