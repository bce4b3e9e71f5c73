"""Typed errors of the comparator. All are InputError: the CLI exits 2 and names file:line."""

from ..errors import InputError


class MalformedTraceError(InputError):
    """A trace line is not valid JSON or does not match its schema (message names file:line)."""


class SchemaVersionError(InputError):
    """A trace was written with a schema version this reader does not understand."""


class FormatDetectionError(InputError):
    """The format of a path could not be recognised, or was named wrongly."""


class IncompatibleRunsError(InputError):
    """The two runs cannot be compared as given (e.g. no rank in common)."""


class RayUnavailableError(InputError):
    """``--ray`` cannot be used: Ray is not installed, or the cluster cannot be reached."""


class RankFailuresError(InputError):
    """Ranks a worker could not read or compare (the message names each rank and its file),
    or whose worker died."""
