"""capture_trace of a run launched as two commands (save, then resume) over a window only
the second reaches, through a real client over stdio: no warning about the first command's
window, one run-level warning when no command reaches it, and whether the traced bits equal
the untraced baseline's (unknown until a baseline is recorded)."""

from __future__ import annotations

from mcp import Client
from test_mcp_support import run_async, stdio_params

JOB = """import sys
import torch
from triage_agent.metrics import MetricLog

out, last, save, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(8, 4)
step, resumed = 0, None
if resume != "-":
    ck = torch.load(resume)
    net.load_state_dict(ck["net"])
    opt.load_state_dict(ck["opt"])
    resumed = ck["step"]
    step = resumed + 1
with MetricLog(out, rank=0, resumed_from=resumed) as log:
    while step <= last:
        loss = net(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.log(step, loss=loss.detach())
        step += 1
if save != "-":
    torch.save({"net": net.state_dict(), "opt": opt.state_dict(), "step": last}, save)
"""

TOML = """
[case]
name = "two-commands"
source_roots = ["src"]

[runs.a]
metrics = "{out}"
cwd = "src"
launch = [["{python}", "train.py", "{out}", "5", "-", "-"]]

[runs.b]
metrics = "{out}"
cwd = "src"
launch = [
  ["{python}", "train.py", "{out}", "2", "{out}/ck.pt", "-"],
  ["{python}", "train.py", "{out}", "5", "-", "{out}/ck.pt"],
]
"""


def test_mcp_capture_of_a_saved_and_resumed_run_warns_of_the_run_and_compares_bits(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(JOB)
    (tmp_path / "triage.toml").write_text(TOML)
    window = {"run": "b", "first_step": 4, "last_step": 4, "level": "module"}

    async def go():
        async with Client(stdio_params(tmp_path), read_timeout_seconds=600) as c:
            before = await c.call_tool("capture_trace", window)
            await c.call_tool("confirm_mismatch", {"relaunch": True})
            after = await c.call_tool("capture_trace", {**window, "level": "op"})
            never = await c.call_tool("capture_trace", {**window, "first_step": 8, "last_step": 9})
            return before, after, never

    before, after, never = run_async(go)
    for r in (before, after, never):
        assert not r.is_error, r.content
    b, a, n = before.structured_content, after.structured_content, never.structured_content
    # only the resumed command reaches step 4: nothing said of the one that saved
    assert b["warnings"] == [], b["warnings"]
    assert b["bits_equal_untraced"] is None and "no untraced baseline" in b["bits_said"]
    assert a["warnings"] == [], a["warnings"]
    assert a["bits_equal_untraced"] is True, a["bits_said"]
    # a window no command reaches is said once, of the run
    assert n["warnings"] == ["no process of the 2 commands wrote a trace of steps 8-9"], n[
        "warnings"
    ]
