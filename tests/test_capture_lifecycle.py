"""What a closed tracer leaves behind: nothing that patches code imported later."""

import subprocess
import sys

import pytest

_IMPORT_AFTER = """
import sys
from triage_agent.fingerprint import CaptureConfig, Tracer
tr = Tracer(CaptureConfig(out_dir=sys.argv[1], level="module"), auto_steps=True).install()
if sys.argv[2] == "close":
    tr.close()
import deepspeed.runtime.engine as e
cls = e.DeepSpeedEngine
finders = [type(f).__name__ for f in sys.meta_path if "triage" in type(f).__module__]
print(hasattr(cls, "_triage_patched"), hasattr(cls.step, "__wrapped__"), finders)
"""


@pytest.mark.parametrize("close", [True, False], ids=["closed", "open"])
def test_deepspeed_imported_after_close_is_not_patched(tmp_path, close):
    r = subprocess.run(
        [sys.executable, "-c", _IMPORT_AFTER, str(tmp_path), "close" if close else "open"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    patched, wrapped, finders = r.stdout.strip().splitlines()[-1].split(" ", 2)
    if close:
        assert (patched, wrapped, finders) == ("False", "False", "[]")
    else:  # the open tracer does patch it: the closed case is not passing by accident
        assert (patched, wrapped) == ("True", "True") and "_PatchOnImport" in finders
