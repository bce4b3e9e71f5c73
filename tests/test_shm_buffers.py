"""Dead DeepSpeed shm buffers are told from live ones and removed around every launch."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reproducers.launcher import EnvPolicy, run_argv
from triage_agent.runs import free_port
from triage_agent.shm_buffers import PREFIX, SHM_DIR, clear_dead_buffers, dead_buffers

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc")

# Holds one buffer by an open descriptor and another only by a mapping (descriptor closed).
HOLDER = """
import mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
m_fd = os.open(sys.argv[2], os.O_RDWR)
m = mmap.mmap(m_fd, 4096)
os.close(m_fd)
print("holding", flush=True)
time.sleep(600)
"""


def _buffer(d: Path, name: str) -> Path:
    p = d / f"{PREFIX}{name}"
    p.write_bytes(b"\0" * 4096)
    return p


def test_buffers_held_by_descriptor_or_mapping_are_live(tmp_path):
    by_fd, by_map, dead = (_buffer(tmp_path, n) for n in ("fd", "map", "dead"))
    (tmp_path / "unrelated").write_bytes(b"x")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(by_fd), str(by_map)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert dead_buffers(tmp_path) == [dead]
        assert clear_dead_buffers(tmp_path) == (1, 4096)
        assert by_fd.exists() and by_map.exists() and not dead.exists()
    finally:
        holder.kill()
        holder.wait()
    assert dead_buffers(tmp_path) == [by_fd, by_map]
    assert (tmp_path / "unrelated").exists()


@pytest.mark.skipif(shutil.which("deepspeed") is None, reason="deepspeed launcher not on PATH")
def test_a_real_deepspeed_cpu_job_leaves_its_buffers_and_the_launcher_removes_them(tmp_path):
    script = tmp_path / "init.py"
    script.write_text(
        textwrap.dedent(
            """
            import glob, os, deepspeed, torch
            deepspeed.init_distributed(dist_backend="gloo")
            t = torch.ones(4)
            deepspeed.comm.all_reduce(t)
            port, rank = os.environ["MASTER_PORT"], os.environ["RANK"]
            mine = glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_*_{port}_{rank}")
            os.write(1, f"sum {t.tolist()} buffers {len(mine)}\\n".encode())  # one write
            deepspeed.comm.barrier()
            torch.distributed.destroy_process_group()  # no gloo thread left at exit
            """
        )
    )
    port = free_port()
    argv = [shutil.which("deepspeed"), "--num_gpus=2", f"--master_port={port}", str(script)]
    out = run_argv(argv, tmp_path, EnvPolicy().build(), timeout_s=300)
    assert out.returncode == 0, Path(out.stderr_path).read_text()[-2000:]
    # each rank saw its own buffer in /dev/shm while it ran...
    assert Path(out.stdout_path).read_text().count("sum [2.0, 2.0, 2.0, 2.0] buffers 1\n") == 2
    # ...and none is left once the launch returns (removed by this launch, or by another
    # triage launch on the machine that found them dead first)
    assert list(SHM_DIR.glob(f"{PREFIX}*_{port}_*")) == []
