"""The job's training code: the step implementations the launcher picks by name."""
