"""Start-up hook for traced commands; all logic lives in triage_agent.fingerprint.inject.bootstrap."""

from triage_agent.fingerprint.inject import bootstrap as _triage_bootstrap

_triage_bootstrap.main()
