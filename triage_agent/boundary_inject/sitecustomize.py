"""Start-up hook for a state-capture relaunch, run by the injected bootstrap's chaining (it
stands next on the path); all logic lives in triage_agent.boundary_capture."""

from triage_agent import boundary_capture as _triage_boundary

_triage_boundary.install()
_triage_boundary.chain_next()
