"""Start-up hook for a state-capture or write-watch relaunch: Python's own when the launch
injects nothing else, else run by the injected bootstrap's chaining (it stands next on the
path); all logic lives in triage_agent.boundary_capture and triage_agent.workflow.write_recorder."""

import os as _os

from triage_agent import boundary_capture as _triage_boundary

_triage_boundary.install()
if _os.environ.get("TRIAGE_WRITE_WATCH"):
    from triage_agent.workflow import write_recorder as _triage_writes

    _triage_writes.install()
_triage_boundary.chain_next()
