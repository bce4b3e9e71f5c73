"""What a launch's text states, and what the job's own code made of it.

A flag or override arrives as text (``--set nesterov=false``), and the job's code turns it
into a value. When the runs differ by such a text and the text restates what the other run
already has, the two runs should agree; that they do not says the conversion made another
value than the text states. Two pieces, both injected into a run's processes:

- ``follow`` (the patch file's ``follow``): until the first module forward, every call of a
  function in the job's own files that is handed one of the followed texts as an argument,
  and what it returned, when that is a bool, int or float. The report is written beside the
  job's metrics (``.triage-follow.json``).
- ``as-stated`` (a :class:`~triage_agent.policies.FunctionPatch` mode): the function runs as
  it is, and where one of its arguments is the text, the value the text states (in the type
  the function returned) is returned instead. That it makes every step match proves the
  conversion is where the difference is made.

Limits: a text copied into another string before it is converted (``"x=" + text``) is not
followed; a conversion inside a library (argparse's ``type=``) is not the job's own and is
not recorded.
"""

from __future__ import annotations

from typing import Any

from .job_frames import JobFiles, profile_until_first_forward
from .metrics_reports import BesideMetrics

REPORT = ".triage-follow.json"
NOT_STATED: Any = object()
_TRUE = {"true", "yes", "on", "1", "y", "t"}
_FALSE = {"false", "no", "off", "0", "n", "f"}


def stated(text: str, like: Any) -> Any:
    """The value ``text`` states in the type of ``like`` (bool, int, float), else NOT_STATED."""
    t = text.strip()
    try:
        if isinstance(like, bool):
            low = t.lower()
            return True if low in _TRUE else False if low in _FALSE else NOT_STATED
        if isinstance(like, int):
            return int(t)
        if isinstance(like, float):
            return float(t)
    except ValueError:
        return NOT_STATED
    return NOT_STATED


def misread(text: str, value: Any) -> bool:
    """Whether ``value`` is not what ``text`` states (a text that states nothing in the
    value's type is not misread: it may name a choice, not a value)."""
    s = stated(text, value)
    return s is not NOT_STATED and (type(s) is not type(value) or s != value)


def flag_texts(values: list[str]) -> list[str]:
    """The texts a flag's values hand the job: each value, and the part after ``=`` of an
    override ``KEY=VALUE``."""
    out: list[str] = []
    for v in values:
        for t in (v, v.partition("=")[2] if "=" in v else ""):
            if t and t not in out:
                out.append(t)
    return out


class _Follower:
    def __init__(self, texts: list[str]) -> None:
        self.texts = set(texts)
        self._job = JobFiles()
        self.open: dict[int, str] = {}
        self.seen: set[tuple[str, int, str]] = set()
        self.report = BesideMetrics(REPORT)
        self.report.report = {"texts": sorted(self.texts), "conversions": []}

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            if not self._job(frame.f_code.co_filename):
                return
            text = next(
                (v for v in frame.f_locals.values() if isinstance(v, str) and v in self.texts),
                None,
            )
            if text is not None:
                self.open[id(frame)] = text
        elif event == "return" and id(frame) in self.open:
            text = self.open.pop(id(frame))
            if not isinstance(arg, bool | int | float):
                return
            code = frame.f_code
            key = (code.co_filename, frame.f_lineno, text)
            if key in self.seen:
                return
            self.seen.add(key)
            self.report.report["conversions"].append(
                {
                    "target": f"{frame.f_globals.get('__name__', '?')}:"
                    f"{getattr(code, 'co_qualname', code.co_name)}",
                    "file": code.co_filename,
                    "line": frame.f_lineno,
                    "text": text,
                    "value": repr(arg),
                    "misread": misread(text, arg),
                }
            )
            self.report.write()


def install(texts: list[str], pending: dict[str, list[Any]]) -> None:
    """Follow ``texts`` from now until the first module forward."""
    follower = _Follower(texts)
    profile_until_first_forward(follower.profile, follower.report.write, pending)


def as_stated(original: Any, text: str) -> Any:
    """``original`` run as it is; where it is handed ``text``, the value the text states."""
    import functools

    @functools.wraps(original)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if any(isinstance(a, str) and a == text for a in (*args, *kwargs.values())):
            s = stated(text, out)
            if s is not NOT_STATED:
                return s
        return out

    return wrapped
