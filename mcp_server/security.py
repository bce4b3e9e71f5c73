"""The workspace a server may touch, and the checks every tool argument passes through.

Why: the MCP client is an AI assistant acting on untrusted text. Whatever it asks for, the
server must only read and write inside the directories a person chose when starting it:

- the workspace directory (``--workspace``, default the current directory), and
- the ``source_roots`` of the case file named at start (``--case``, or ``triage.toml`` in
  the workspace). Cases opened or created later through tools cannot widen these roots:
  their paths must already lie inside them.

One exception, for reading only: the installed source of the frameworks the open case's
scripts import (DeepSpeed, Megatron, ...; the packages ``triage run`` scans too) may be
read by tools that only read (the scan), never written to.

Every path is resolved (symlinks included) before the containment check, so ``..`` and a
symlink pointing out both fail. Git revisions go through ``check_rev`` (nothing that starts
with ``-``) and must resolve to a commit in the named repository; they are resolved by
GitPython in-process, never by a shell. Commands are never taken from tool arguments: a
run's launch argv comes only from the case file the server was started with.

Limits: containment is checked when a tool is called; a file swapped for a symlink between
the check and its use (a race by someone who can already write into the workspace) is out
of scope.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from pydantic import BaseModel, Field

from triage_agent.config import CONFIG_NAME, load_case
from triage_agent.errors import InputError, PathEscapeError, TriageError
from triage_agent.ledger import Ledger
from triage_agent.paths import check_rev, contained
from triage_agent.records import Case

log = logging.getLogger("triage-mcp")

# Bounds shared by the input models: big enough for real use, small enough that one
# request cannot make the server read or hold an unbounded amount.
MAX_PATH_CHARS = 4096
MAX_TEXT_CHARS = 20_000
MAX_NAME_CHARS = 200
MAX_LIST_ITEMS = 500
# Text that goes back to the client (logs, Markdown) is cut to this many characters.
MAX_OUTPUT_CHARS = 200_000


def cap_text(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Cut ``text`` to ``limit`` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]"


class WorkspaceInfo(BaseModel):
    root: str = Field(description="the workspace directory, resolved")
    allowed_roots: list[str] = Field(description="every directory a path argument may point into")
    read_only_roots: list[str] = Field(
        default_factory=list,
        description="installed source of the frameworks the open case imports: scans may "
        "read it, nothing writes to it",
    )
    ledger: str = Field(description="the evidence ledger file")
    case_file: str | None = Field(description="the case file the server was started with")
    launch_trusted: bool = Field(
        description="whether run launch commands may be used (only from the startup case file)"
    )


class Workspace:
    """Where one server instance lives: its roots, its case and its ledger.

    Thread-safe for the state it holds (the current case); the ledger itself serialises
    appends with a file lock, so tools running in worker threads may append concurrently.
    """

    def __init__(self, root: str | Path, case_file: str | Path | None = None):
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise InputError(f"workspace {root} is not a directory")
        self._lock = threading.Lock()
        self.case_file: Path | None = None
        trusted: Case | None = None
        if case_file is not None:
            self.case_file = contained(self.absolute(case_file), [self.root])
            trusted = load_case(self.case_file)
        elif (self.root / CONFIG_NAME).is_file():
            self.case_file = self.root / CONFIG_NAME
            trusted = load_case(self.case_file)
        self.roots: list[Path] = [self.root]
        if trusted is not None:
            # A person wrote this file and named it at start: its source roots are trusted.
            self.roots += [Path(r).resolve() for r in trusted.source_roots]
        self._trusted_case = trusted
        self._case = trusted
        ws = Path(trusted.workspace) if trusted else self.root / ".triage"
        self.ledger = Ledger(self.path(ws))
        self.path(self.ledger.path)  # a ledger file linked outside would take every append
        if self._case is None:
            recorded = self.ledger.state().case
            if recorded is not None:
                try:
                    self.check_case(recorded)
                    self._case = recorded
                except TriageError as exc:
                    # Recorded under wider roots: keep it in the ledger, do not act on it.
                    log.warning("the ledger's case is not opened: %s", exc)

    # -- paths -------------------------------------------------------------------------------
    def absolute(self, p: str | Path) -> Path:
        try:
            q = Path(p).expanduser()
        except RuntimeError:  # '~name' of no such user: not a path anyone can mean
            raise InputError(f"invalid path {str(p)[:80]!r}: no such home directory") from None
        return q if q.is_absolute() else self.root / q

    def _resolve(self, p: str | Path, roots: list[Path], must_exist: bool) -> Path:
        s = str(p)
        if not s or "\x00" in s or len(s) > MAX_PATH_CHARS:
            raise InputError(f"invalid path {s[:80]!r}: empty, too long, or holds a NUL byte")
        try:
            resolved = contained(self.absolute(p), roots)
            exists = resolved.exists()
        except (OSError, ValueError) as exc:  # a name too long, a loop of links
            raise InputError(f"invalid path {s[:80]!r}: {exc.strerror or exc}") from None
        if must_exist and not exists:
            raise InputError(f"path {p} does not exist")
        return resolved

    def _tree(self, p: str | Path, roots: list[Path], must_exist: bool) -> Path:
        root = self._resolve(p, roots, must_exist)
        if root.is_dir():
            for d, _dirs, files in os.walk(root):
                for name in files:
                    f = Path(d) / name
                    if f.is_symlink():
                        self._resolve(f, roots, False)
        return root

    def path(self, p: str | Path, *, must_exist: bool = False) -> Path:
        """Resolve ``p`` (relative to the workspace) and require it inside an allowed root."""
        return self._resolve(p, self.roots, must_exist)

    def tree(self, p: str | Path, *, must_exist: bool = True) -> Path:
        """``path()``, and for a directory, every symlinked file below it must resolve inside
        the allowed roots too: a scan or a trace load reads the files of a directory, so one
        link to /etc/shadow inside a contained directory would otherwise leak it."""
        return self._tree(p, self.roots, must_exist)

    def framework_roots(self) -> list[Path]:
        """The installed packages of the frameworks the open case's scripts import, as
        ``triage run`` finds them: readable by scans, never writable."""
        case = self.case
        if case is None:
            return []
        from triage_agent.workflow.stage1 import framework_paths

        return [Path(p).resolve() for p in framework_paths(case)]

    def read_path(self, p: str | Path, *, must_exist: bool = False) -> Path:
        """``path()`` for an argument that is only read: the framework roots are allowed too."""
        return self._resolve(p, [*self.roots, *self.framework_roots()], must_exist)

    def read_tree(self, p: str | Path, *, must_exist: bool = True) -> Path:
        """``tree()`` for a directory that is only read: the framework roots are allowed too."""
        return self._tree(p, [*self.roots, *self.framework_roots()], must_exist)

    def output_dir(self, name: str) -> Path:
        """A directory under the ledger's where a tool writes; it and every symlinked file in
        it must stay inside the roots (a link would redirect the write)."""
        return self.tree(self.ledger.workspace / name, must_exist=False)

    def rel(self, p: str | Path) -> str:
        """How a path is shown to the client: workspace-relative when inside it."""
        q = Path(p).resolve()
        return str(q.relative_to(self.root)) if q.is_relative_to(self.root) else str(q)

    # -- revisions ---------------------------------------------------------------------------
    def rev(self, repo: str | Path, rev: str) -> str:
        """Validate ``rev`` and resolve it to a commit id in ``repo`` (a contained path)."""
        import git
        from gitdb.exc import BadName, BadObject

        check_rev(rev)
        repo_path = self.path(repo, must_exist=True)
        try:
            r = git.Repo(repo_path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise InputError(f"{repo} is not inside a git repository") from None
        try:
            # GitPython's rev_parse is pure Python: no subprocess sees the revision.
            return r.commit(rev).hexsha
        except (BadName, BadObject, ValueError, IndexError) as exc:
            raise InputError(f"revision {rev!r} does not resolve in {repo}: {exc}") from None

    # -- the case ----------------------------------------------------------------------------
    @property
    def case(self) -> Case | None:
        with self._lock:
            return self._case

    def require_case(self) -> Case:
        case = self.case
        if case is None:
            raise InputError(
                "no case is open: call open_case (a triage.toml in the workspace) or create_case"
            )
        return case

    def _check_case_paths(self, case: Case) -> None:
        for run in (case.run_a, case.run_b):
            for p in (run.metrics, run.trace_dir, run.cwd):
                if p is not None:
                    self.path(p)
            if run.source is not None:
                self.path(run.source.repo)
        for p in [*case.source_roots, *case.scan_paths, case.correspondence_map]:
            if p is not None:
                self.path(p)
        if Path(case.workspace).resolve() != self.ledger.workspace.resolve():
            raise PathEscapeError(
                f"the case's workspace {case.workspace} is not this server's ledger directory "
                f"{self.ledger.workspace}: start the server with that case instead"
            )

    def check_case(self, case: Case, *, from_startup_file: bool = False) -> None:
        """Refuse a case that names a path outside the allowed roots, or that brings launch
        commands without coming from the file a person named when starting the server."""
        self._check_case_paths(case)
        if not from_startup_file and any(r.launch for r in (case.run_a, case.run_b)):
            raise InputError(
                "this case declares launch commands; they are accepted only from the case file "
                "the server was started with (--case or triage.toml in the workspace)"
            )

    def adopt(self, case: Case, *, from_startup_file: bool = False) -> Case:
        """Make ``case`` current (after ``check_case``)."""
        self.check_case(case, from_startup_file=from_startup_file)
        with self._lock:
            self._case = case
        return case

    def require_hypotheses(self, ids: list[str]) -> None:
        """Evidence may only name hypotheses the ledger holds."""
        self.ledger.require_hypotheses(ids)

    def require_launch(self) -> Case:
        """The open case, if its launch commands may be run (they came from the startup file)."""
        case = self.require_case()
        if not self.launch_trusted():
            raise InputError(
                "launching needs the case file the server was started with (--case or "
                "triage.toml in the workspace): call open_case without a path"
            )
        return case

    def launch_trusted(self) -> bool:
        case = self.case
        return case is not None and self._trusted_case is not None and case == self._trusted_case

    def info(self) -> WorkspaceInfo:
        return WorkspaceInfo(
            root=str(self.root),
            allowed_roots=[str(r) for r in self.roots],
            read_only_roots=[str(r) for r in self.framework_roots()],
            ledger=str(self.ledger.path),
            case_file=str(self.case_file) if self.case_file else None,
            launch_trusted=self.launch_trusted(),
        )
