"""The job's line that spells a checkpoint's keys or a file's name, read from its source."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from triage_agent.source_literals import listing_site, name_site


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_listing_site_finds_the_one_literal_with_exactly_those_keys(tmp_path):
    trainer = _write(
        tmp_path,
        "trainer.py",
        """
        class Trainer:
            def checkpointed(self):
                return {
                    "model": self.model,
                    "optimizer": self.opt,
                    "data": self.data,
                }

            def metrics(self):
                return {"model": 1, "loss": 2}
        """,
    )
    other = _write(tmp_path, "ckpt.py", "def write(items):\n    return {k: v for k, v in items}\n")
    assert listing_site(["data", "model", "optimizer"], [trainer, other]) == f"{trainer}:4"
    assert listing_site(["model", "loss"], [trainer, other]) == f"{trainer}:11"
    # a subset or a superset of a literal's keys is not that literal
    assert listing_site(["model", "optimizer"], [trainer, other]) is None
    # one key names no place: too common a spelling
    assert listing_site(["model"], [trainer]) is None


def test_listing_site_reads_dict_calls_and_refuses_two_spellings(tmp_path):
    a = _write(tmp_path, "a.py", "X = dict(model=1, opt=2)\n")
    assert listing_site(["model", "opt"], [a]) == f"{a}:1"
    b = _write(tmp_path, "b.py", "Y = {'model': 0, 'opt': 0}\n")
    assert listing_site(["model", "opt"], [a, b]) is None


def test_name_site_matches_a_file_name_an_f_string_can_produce(tmp_path):
    io = _write(
        tmp_path,
        "ckptio.py",
        """
        def ckpt_name(step):
            return f"ckpt-epoch{step // 6}.pt"

        def log_name(step):
            return f"log-{step}.txt"

        def anything(x):
            return f"{x}"
        """,
    )
    assert name_site("ckpt-epoch0.pt", [io]) == f"{io}:3"
    assert name_site("log-12.txt", [io]) == f"{io}:6"
    # an f-string with no fixed text could produce any name: it names none
    assert name_site("weights.bin", [io]) is None
    # the whole name must be produced, not a part of it
    assert name_site("old-ckpt-epoch0.pt.bak", [io]) is None


def test_name_site_reads_format_and_percent_templates(tmp_path):
    io = _write(
        tmp_path,
        "names.py",
        """
        def snap(k):
            return "snap_{:03d}.bin".format(k)

        def shard(r):
            return "shard-%02d.pt" % r

        def plain():
            return "{}".format(1)
        """,
    )
    assert name_site("snap_007.bin", [io]) == f"{io}:3"
    assert name_site("shard-01.pt", [io]) == f"{io}:6"
    assert name_site("7", [io]) is None


def test_job_sources_are_the_jobs_own_modules_not_installed_packages(tmp_path):
    _write(tmp_path, "helper.py", "VALUE = 1\n")
    _write(
        tmp_path,
        "main.py",
        """
        import json, sys
        import helper
        import torch
        from triage_agent.source_literals import job_sources
        print(json.dumps(job_sources()))
        """,
    )
    out = subprocess.run(
        [sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    names = sorted(Path(p).name for p in __import__("json").loads(out.stdout))
    assert names == ["helper.py", "main.py"]
