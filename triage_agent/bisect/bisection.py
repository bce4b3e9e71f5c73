"""``bisect_case``: the first commit that moves the bits, then the smallest change that does.

For runs whose source revisions differ (``runs.<x>.source``), in the repository the case
names (or another inside its source roots):

1. **Bisect** the first-parent chain from A's revision to B's. Each probe reruns B,
   uninstrumented, at one commit in a throwaway worktree and compares it with A over every
   step and rank. B's own revision is probed first (it must differ, or there is nothing
   to bisect), by run B's own baseline when that runs the same committed tree (a named
   package); A's is probed only when the search lands on the first commit. A commit that
   does not run is skipped. A bad merge is opened: its side branch is bisected by
   merging each side commit into the merge's first parent.
2. **Revert** the first bad commit alone in B. When that restores A, it is the answer.
3. Otherwise several commits interact. The search repeats on B's history with the
   culprits found so far reverted at every commit (the next commit whose addition moves
   the bits is the next culprit) until reverting the set restores A; then ddmin reduces
   the set to a 1-minimal one.
4. **Hunks**: inside each culprit, ddmin over its ``git diff`` hunks, the other culprits
   reverted, to a 1-minimal set.
5. **Proof**: B with exactly those hunks (or commits) reverted, rerun, must match A on
   every step; that rerun supports a hypothesis naming the hunks. Each hunk is also
   reverted alone and its outcome recorded.

Every probe is ledger evidence; a rerun call reads recorded probes back instead of
launching them (:mod:`.probe`). ``budget_s`` stops before a launch that would start after
it; Ctrl-C stops at once; both leave what was recorded, and the next call resumes.

Whether the new arithmetic is a bug or a valid numerical-policy change is for the reader:
the result shows each hunk's diff and says so.

Limits: the predicate assumes each run repeats bit for bit (the premise of the case; the
proof rerun checks it once); history is followed by first parents, a merge being one unit
in steps 2-5; revisions and the repository come from the case or the caller, never a
command.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError
from ..ledger import Ledger
from ..ledger_rules import BY_LATEST_TEST
from ..paths import contained, split_rev_range
from ..records import Case, Hypothesis, HypothesisStatus
from ..runs import require_relaunchable
from .history import Range, first_parent, open_range, open_repo, side_commits
from .model import (
    BisectProgress,
    BisectResult,
    CommitInfo,
    Hunk,
    HunkOutcome,
    Mode,
    ProbeResult,
    TreeSpec,
    reader_note,
)
from .probe import BudgetSpent, Prober
from .search import ddmin, first_bad, probes_left
from .worktree import Patches, place_in

PASSES = {"good": True, "bad": False}  # a skip is unresolved: ddmin treats it as not passing


def _target(
    case: Case,
    repo: str | Path | None,
    rev_range: str | None,
    extra_roots: list[Path] | None = None,
) -> tuple[Path, str, str]:
    """The repository and the two revisions, checked: roots, flag-like or missing revisions.
    ``extra_roots``: repositories the workflow made itself (in its workspace)."""
    a_src, b_src = case.run_a.source, case.run_b.source
    if rev_range is not None:
        a_rev, b_rev = split_rev_range(rev_range)
    elif a_src is None or b_src is None or not a_src.rev:
        raise InputError(
            "the case names no source revisions to bisect: give runs.a.source and "
            "runs.b.source (repo and rev), or a range A..B"
        )
    else:
        a_rev, b_rev = a_src.rev, b_src.rev or "HEAD"
    path = repo if repo is not None else (b_src.repo if b_src else None)
    if path is None:
        raise InputError("no repository to bisect: the case names none (runs.b.source.repo)")
    roots = [
        *case.source_roots,
        *(s.repo for s in (a_src, b_src) if s is not None),
        *map(str, extra_roots or []),
    ]
    try:
        where = contained(path, roots)
    except InputError as exc:
        raise InputError(f"repository {path} is outside the case's roots: {exc}") from None
    if repo is None and rev_range is None and a_src is not None and b_src is not None:
        ra, rb = open_repo(a_src.repo), open_repo(b_src.repo)
        if Path(ra.common_dir).resolve() != Path(rb.common_dir).resolve():
            raise InputError(
                f"runs A and B name different repositories ({a_src.repo}, {b_src.repo}): "
                "name the one to bisect and a range A..B in it"
            )
    return where, a_rev, b_rev


def _mode(case: Case, repo_path: str) -> Mode:
    """B runs inside the worktree when its working directory is a checkout of the
    repository (and the case names no package taken from it); otherwise the repository is
    a package it imports."""
    import git

    src = case.run_b.source
    if src is not None and src.package:
        return "pythonpath"
    repo = open_repo(repo_path)
    try:
        cwd_repo = git.Repo(case.run_b.cwd or ".", search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return "pythonpath"
    same = Path(cwd_repo.common_dir).resolve() == Path(repo.common_dir).resolve()
    return "source-dir" if same else "pythonpath"


def _note_dirty(case: Case, ledger: Ledger, mode: Mode) -> None:
    """Say so when B's checkout has uncommitted changes: no probe holds them."""
    if mode != "source-dir":
        return
    work = open_repo(case.run_b.cwd or ".")
    changed = [d.a_path for d in work.index.diff(None)] + work.untracked_files
    if changed:
        ledger.note(
            f"run B's checkout {work.working_tree_dir} has {len(changed)} uncommitted change(s) "
            f"({', '.join(changed[:5])}): every probe builds committed revisions in a "
            "throwaway worktree, so those changes are in no probe, and they are left as they are",
            level="warning",
        )


def baseline_tree(case: Case, rng: Range, mode: Mode) -> str | None:
    """B's revision when run B's own baseline runs exactly that committed tree: the package
    the case names, taken at B's revision from a throwaway checkout of this repository. Its
    probe is then the baseline the comparison has anyway, so B's endpoint costs no rerun.
    A baseline run in B's own checkout is not trusted for it: that tree can change under a
    cached baseline."""
    import git

    src = case.run_b.source
    if mode != "pythonpath" or src is None or not src.package or not src.rev:
        return None
    try:
        same = _same_repo(src.repo, rng.repo) and _sha(src.repo, src.rev) == rng.b
    except (git.GitError, InputError, ValueError):
        return None  # not provably the same tree: probed in a worktree of its own
    return rng.b if same else None


def _same_repo(a: str, b: str) -> bool:
    return Path(open_repo(a).common_dir).resolve() == Path(open_repo(b).common_dir).resolve()


def _sha(repo: str, rev: str) -> str:
    return open_repo(repo).commit(rev).hexsha


class Bisection:
    """The phases, sharing one prober and filling one result."""

    def __init__(self, prober: Prober, rng: Range, res: BisectResult) -> None:
        self.p, self.rng, self.res = prober, rng, res
        self.chain = rng.commits

    def _left(self, extra: int = 0) -> Callable[[int, int], None]:
        def set_left(n: int, commits: int) -> None:
            self.p.left, self.p.commits_left = n + extra, commits

        return set_left

    def without(self, units: list[CommitInfo]) -> ProbeResult:
        return self.p(run_tree(self.rng, units))

    # 1 ----------------------------------------------------------------------------------
    def first_bad(self) -> list[CommitInfo] | None:
        p, rng, res, chain = self.p, self.rng, self.res, self.chain
        p.phase, p.left = "bisect", 1 + probes_left(0, len(chain))
        p.commits_left = len(chain)
        end = p(TreeSpec(base=rng.b))
        if end.outcome == "good":
            raise InputError(
                f"run B at its own revision {rng.b_rev} ({rng.b[:10]}) matches run A on every "
                f"step in a throwaway worktree: nothing to bisect in {rng.a_rev}..{rng.b_rev} "
                "(the difference lies outside these commits: B's working tree, environment "
                "or launch)"
            )
        if end.outcome == "skip":
            raise InputError(
                f"run B does not run at its own revision {rng.b_rev} in a throwaway worktree: "
                f"{end.said}"
            )
        br = first_bad(
            0, len(chain), lambda i: p(TreeSpec(base=chain[i - 1].sha)).outcome, self._left()
        )
        start_unknown = False
        p.commits_left = br.hi - br.lo - 1
        if br.lo == 0:
            p.left = 1
            start = p(TreeSpec(base=rng.base))
            if start.outcome == "bad":
                res.status = "not-in-range"
                res.message = (
                    f"run B at run A's revision {rng.a_rev} already differs from run A "
                    f"({start.said}): the commits between them do not explain the difference "
                    "(look at the environment, the launch or the data instead)"
                )
                return None
            start_unknown = start.outcome == "skip"
        res.probes_to_first_bad = len(p.probes)
        skips = {q.tree.base for q in p.probes if q.outcome == "skip"}
        res.skipped = [c for c in chain if c.sha in skips]
        if not br.exact or start_unknown:
            res.candidates = chain[br.lo : br.hi]
            res.status = "ambiguous"
            return res.candidates
        unit = chain[br.hi - 1]
        res.first_bad_unit = res.first_bad = unit
        if unit.merge:
            res.first_bad = self._open_merge(unit)
            res.probes_to_first_bad = len(p.probes)
        return [unit]

    def _open_merge(self, merge: CommitInfo) -> CommitInfo:
        """The side commit that moves the bits, merged into the merge's first parent; the
        merge itself when only its own resolution does, or skips leave it open."""
        side = side_commits(self.rng.repo, merge)
        p1 = first_parent(open_repo(self.rng.repo), merge.sha)
        self.res.commits += side
        self.p.commits.update((c.sha, c) for c in side)
        br = first_bad(
            0,
            len(side) + 1,
            lambda j: self.p(TreeSpec(base=p1, merge=side[j - 1].sha)).outcome,
            self._left(),
        )
        return side[br.hi - 1] if br.exact and br.hi <= len(side) else merge

    # 2, 3 -------------------------------------------------------------------------------
    def minimal_commits(self, first: list[CommitInfo]) -> list[CommitInfo] | None:
        p, chain = self.p, self.chain
        p.phase, p.left = "revert", 1
        culprits = list(first)
        r = self.without(culprits)
        if len(first) == 1:
            self.res.revert_first_bad = r
        p.phase = "commits"
        while r.outcome == "bad":
            lo = max(c.index for c in culprits)
            if lo >= len(chain):
                return None

            def at(j: int, held: list[CommitInfo] = culprits) -> str:
                back = sorted((c for c in held if c.index <= j), key=lambda c: -c.index)
                tree = TreeSpec(base=chain[j - 1].sha, revert_commits=[c.sha for c in back])
                return p(tree).outcome

            br = first_bad(lo, len(chain), at, self._left(extra=1))
            culprits = culprits + chain[br.lo : br.hi]
            r = self.without(culprits)
        if r.outcome == "skip":
            # the set does not revert or run as a whole: reduce the whole tail instead
            culprits = chain[min(c.index for c in culprits) - 1 :]
        if len(culprits) > 1:
            p.left = len(culprits)
            culprits = ddmin(culprits, lambda s: PASSES.get(self.without(s).outcome))
        return sorted(culprits, key=lambda c: c.index)

    # 4 ----------------------------------------------------------------------------------
    def minimal_hunks(self, culprits: list[CommitInfo]) -> tuple[list[Hunk], TreeSpec]:
        p = self.p
        p.phase = "hunks"
        newest = sorted(culprits, key=lambda c: -c.index)
        chosen: dict[str, list[Hunk] | None] = {c.sha: None for c in culprits}

        def tree() -> TreeSpec:
            return TreeSpec(
                base=self.rng.b,
                revert_commits=[c.sha for c in newest if chosen[c.sha] is None],
                revert_hunks=[h.id for c in newest for h in chosen[c.sha] or []],
            )

        for c in culprits:
            hs = p.patches.hunks_of(c.sha)
            if len(hs) > 1:
                p.left = len(hs)

                def passes(sub: list[Hunk], sha: str = c.sha) -> bool | None:
                    chosen[sha] = sub
                    return PASSES.get(p(tree()).outcome)

                hs = ddmin(hs, passes)
                hs = _drop_whole_files(hs, passes)
            chosen[c.sha] = hs
        return [h for c in culprits for h in chosen[c.sha] or []], tree()

    # 5 ----------------------------------------------------------------------------------
    def prove(self, culprits: list[CommitInfo], hunks: list[Hunk], tree: TreeSpec) -> None:
        p, rng, res = self.p, self.rng, self.res
        ledger = p.ledger
        ids = sorted(h.id for h in hunks) or sorted(c.sha for c in culprits)
        hid = "H-" + hashlib.sha256(f"bisect|{rng.a}|{rng.b}|{ids}".encode()).hexdigest()[:10]
        repo = open_repo(rng.repo)
        placed = [
            h.model_copy(update={"location": place_in(repo, rng.b, h, p.patches)}) for h in hunks
        ]
        what = (
            f"{len(placed)} hunk(s) ({', '.join(h.location for h in placed)})"
            if placed
            else "commit(s) " + ", ".join(c.said() for c in culprits)
        )
        res.reader_note = reader_note(bool(placed), culprits)
        if hid not in ledger.state().hypotheses:
            ledger.put_hypothesis(
                Hypothesis(
                    id=hid,
                    statement=f"the change in {what} between {rng.a_rev} and {rng.b_rev} moves "
                    f"the bits: B with exactly that reverted matches A on every step; {res.reader_note}",
                    category="source-change",
                    rationale="bisection of "
                    f"{len(self.chain)} commit(s), then delta debugging over commits and hunks",
                )
            )
        p.phase, p.left = "proof", 1 + 2 * len(placed)
        res.proof = proof = p(tree, hypotheses=[hid])
        res.culprits = culprits
        res.hypothesis = hid
        if proof.outcome == "good":
            if ledger.state().hypotheses[hid].status != HypothesisStatus.supported:
                ledger.update_hypothesis(
                    hid,
                    status=HypothesisStatus.supported,
                    evidence=[proof.evidence_id],
                    reason=BY_LATEST_TEST,
                )
            res.status = "found"
        p.phase = "alone"
        res.hunks = [HunkOutcome(hunk=h) for h in placed]
        for k, h in enumerate(placed):
            p.left = 2 * len(placed) - k
            res.hunks[k].alone = p(TreeSpec(base=rng.b, revert_hunks=[h.id]))
        # Each hunk kept on its own (the set's others reverted): the first step it moves
        # says where the difference starts. With two hunks, each tree is the other's
        # "reverted alone" and is read back, not rerun; with one, it is B itself.
        p.phase = "effect"
        for k, h in enumerate(placed):
            p.left = len(placed) - k
            others = [i for i in tree.revert_hunks if i != h.id]
            res.hunks[k].kept = p(tree.model_copy(update={"revert_hunks": others}))
        res.hunks.sort(key=lambda o: o.first_effect)


def _conclusion(res: BisectResult) -> str:
    if res.status in ("not-in-range", "stopped") and res.message:
        return res.message
    parts = []
    if res.first_bad is not None:
        via = (
            f" (brought in by merge {res.first_bad_unit.said()})"
            if res.first_bad_unit and res.first_bad_unit.sha != res.first_bad.sha
            else ""
        )
        parts.append(
            f"First commit whose B run differs from A: {res.first_bad.said()}{via}, after "
            f"{res.probes_to_first_bad} probe(s) over {len(res.commits)} commit(s)."
        )
    elif res.candidates:
        parts.append(
            "Skipped commits leave the first bad commit among: "
            + ", ".join(c.said() for c in res.candidates)
            + "."
        )
    if res.revert_first_bad is not None:
        parts.append(f"Reverting it alone in B: {res.revert_first_bad.said}.")
    if res.proof is not None:
        what = (
            ", ".join(h.hunk.location for h in res.hunks)
            if res.hunks
            else ", ".join(c.said() for c in res.culprits)
        )
        if res.proof.outcome == "good":
            parts.append(
                f"A minimal set of {len(res.culprits)} commit(s)"
                + (f" and {len(res.hunks)} hunk(s) in them" if res.hunks else "")
                + f" ({what}): B with exactly those reverted matches A on every step and rank "
                f"({res.proof.evidence_id})."
            )
        else:
            parts.append(
                f"B with {what} reverted did not match A on its proof rerun "
                f"({res.proof.said}): the job may not repeat bit for bit; nothing is claimed."
            )
    elif res.status != "ambiguous":
        parts.append("No set of commits whose revert restores A was found.")
    if len(res.hunks) > 1 and all(h.kept is not None for h in res.hunks):
        parts.append(
            "Each hunk kept alone in B (the others reverted): "
            + "; ".join(f"{h.hunk.location} {h.kept.said}" for h in res.hunks)
            + "."
        )
        if res.hunks[0].first_effect < res.hunks[1].first_effect:
            parts.append(
                f"The difference starts at {res.hunks[0].hunk.location}: alone, it moves the "
                "bits at the earliest step."
            )
    if res.status == "found":
        parts.append(res.reader_note[0].upper() + res.reader_note[1:] + ".")
    return " ".join(parts)


def bisect_case(
    case: Case,
    ledger: Ledger,
    *,
    repo: str | Path | None = None,
    rev_range: str | None = None,
    hunks: bool = True,
    context: int = 3,
    extra_roots: list[Path] | None = None,
    budget_s: float | None = None,
    timeout_s: float | None = None,
    progress: Callable[[BisectProgress], None] | None = None,
    record: bool = True,
) -> BisectResult:
    """Bisect the case's source revisions to the first bad commit, then to a minimal set of
    commits and hunks whose revert makes B match A (see the module docstring).

    ``record``: the case is recorded in the ledger first; False for a case the workflow
    derived from the ledger's own (B run inside a repository it made), which the ledger
    does not hold as its case.

    ``repo`` and ``rev_range`` ('A..B') override the case's ``runs.b.source``; the
    repository must lie inside the case's source roots (or ``extra_roots``). ``context``:
    the lines of context around each hunk; 0 makes every change a hunk of its own. Bad input (no revisions, a
    revision that does not resolve or reads as a flag, a repository outside the roots, a
    range whose B end matches A) is a one-line InputError; what was recorded stays.
    """
    t0 = time.monotonic()
    path, a_rev, b_rev = _target(case, repo, rev_range, extra_roots)
    rng = open_range(path, a_rev, b_rev)
    for run in (case.run_a, case.run_b):
        require_relaunchable(run)
    if record:
        ledger.record_case(case)
    mode = _mode(case, rng.repo)
    git_repo = open_repo(rng.repo)
    _note_dirty(case, ledger, mode)
    prober = Prober(
        case,
        ledger,
        git_repo,
        mode=mode,
        commits={c.sha: c for c in rng.commits},
        patches=Patches(git_repo, context),
        timeout_s=min(timeout_s or case.timeout_s, case.timeout_s),
        deadline=t0 + budget_s if budget_s is not None else None,
        progress=progress,
    )
    prober.baseline_tree = baseline_tree(case, rng, mode)
    res = BisectResult(
        repo=rng.repo,
        mode=mode,
        a_rev=a_rev,
        b_rev=b_rev,
        a=rng.a,
        b=rng.b,
        status="first-bad",
        message="",
        commits=list(rng.commits),
    )
    run = Bisection(prober, rng, res)
    try:
        first = run.first_bad()
        if first is not None:
            culprits = run.minimal_commits(first)
            if culprits is not None:
                found, tree = run.minimal_hunks(culprits) if hunks else ([], None)
                run.prove(culprits, found, tree or run_tree(rng, culprits))
    except BudgetSpent as exc:
        res.status = "stopped"
        res.message = (
            f"stopped: {exc}; {len(prober.probes)} probe(s) recorded so far. Run the bisection "
            "again to resume: recorded probes are read back from the ledger, not rerun."
        )
        ledger.note(res.message, level="warning")
    finally:
        res.probes = list(prober.probes)
        res.reruns = prober.launched
        res.reused = prober.reused
        res.cached = prober.cached
        res.seconds = round(time.monotonic() - t0, 3)
    res.message = _conclusion(res)
    return res


def _drop_whole_files(hs: list[Hunk], passes: Callable[[list[Hunk]], bool | None]) -> list[Hunk]:
    """ddmin's set is 1-minimal: no single hunk can go. Hunks of one file are often coupled
    (a constant renamed, and each line that reads it): none can go alone, all can go
    together. Each file's hunks are tried out of the set together, one probe per file."""
    files = list(dict.fromkeys(h.file for h in hs))
    if len(files) < 2:
        return hs
    for file in files:
        rest = [h for h in hs if h.file != file]
        if rest and passes(rest):
            hs = rest
    return hs


def run_tree(rng: Range, culprits: list[CommitInfo]) -> TreeSpec:
    """B with whole commits reverted, newest first."""
    newest = sorted(culprits, key=lambda c: -c.index)
    return TreeSpec(base=rng.b, revert_commits=[c.sha for c in newest])
