"""One base exception for the project; the CLI maps it to an exit code, MCP to a tool error."""


class TriageError(Exception):
    """A problem the user can act on. The message is one line and says what to do."""

    exit_code = 2


class ConfigError(TriageError):
    """triage.toml or a flag is invalid."""


class LedgerError(TriageError):
    """The evidence ledger is unreadable or corrupted."""


class InputError(TriageError):
    """A file, path, revision or argument given by the user cannot be used."""


class PathEscapeError(InputError):
    """A path resolves outside the directories it is allowed to touch."""
