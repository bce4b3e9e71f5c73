"""The `triage` command line: thin typer wrappers over library functions."""
