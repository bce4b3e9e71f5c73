"""Per-rank comparisons on worker processes and on Ray merge into the serial result."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_compare_support import run_compare_cli
from test_mcp_support import make_relaunch_workspace, run_async

from triage_agent.cli.compare_cmd import bare_option_value
from triage_agent.compare import compare_runs, load_runs
from triage_agent.compare.distributed import (
    Chunk,
    Executor,
    RankJob,
    compare_chunk,
    compare_native_distributed,
    compare_paths,
)
from triage_agent.compare.errors import MalformedTraceError, RankFailuresError
from triage_agent.compare.executors import ProcessPool
from triage_agent.compare.synth import SynthSpec, event_lines, write_pair
from triage_agent.errors import InputError
from triage_agent.trace_format import trace_filename

WORLD = 12
PY = sys.executable


def _world(root: Path, world: int = WORLD, events: int = 600) -> tuple[Path, Path]:
    """A run pair with every kind of rank: one origin rank, receivers (no origin on the
    rank), identical ranks, a rank whose B runs a stray optimizer step and an extra op, a
    rank torn at its tail in B, and a rank whose B file is missing (ranks 8 and 10)."""
    for r in range(world):
        kw: dict = {}
        if r == 3:
            kw = {"diverge_at": 400}
        elif r == 5:
            kw = {"update_at": [120], "insert_at": [200], "delete_at": [260]}
        elif r % 2:
            kw = {"receive_at": 450}
        write_pair(SynthSpec(events=events, steps=3, rank=r, world_size=world, **kw), root)
    a, b = root / "run_a", root / "run_b"
    if world > 10:
        torn = b / trace_filename(8)
        torn.write_bytes(torn.read_bytes()[:-40])  # a rank that crashed mid-write
        (b / trace_filename(10)).unlink()
    return a, b


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> tuple[Path, Path]:
    return _world(tmp_path_factory.mktemp("world"))


@pytest.fixture(scope="module")
def serial(world):
    return compare_runs(*load_runs(*world))


def test_serial_fixture_holds_every_kind_of_rank(serial):
    # the equality tests below mean something only if the serial result has all of these
    s = serial.summary
    assert s.origin_ranks == [3]
    assert s.unmatched_first_ranks == [5]
    assert s.outside_scope_ranks == [1, 7, 9, 11]
    assert s.unpaired_ranks == [10]
    assert 0 in s.identical_ranks and 8 in s.incomplete_ranks  # torn: equal as far as it goes
    assert not serial.complete
    assert any("torn last line" in w for w in serial.warnings)
    assert any("rank 10: no trace file in run B" in w for w in serial.warnings)
    r3 = serial.ranks[3]
    assert r3.origin is not None and r3.origin.a is not None and r3.origin.a.index == 400
    assert serial.ranks[1].first_receiver is not None and serial.ranks[1].first_receiver.producers
    assert [c.kind for c in serial.ranks[5].candidates][:2] == ["extra", "extra"]


def test_workers_result_equals_serial(world, serial):
    res, stats = compare_native_distributed(*world, Executor(workers=2))
    assert res == serial
    assert res.model_dump_json() == serial.model_dump_json()
    assert stats.backend == "processes" and stats.slots == 2 and stats.chunks > 2
    # how the chunks fall on the two workers depends on which one starts first
    assert 1 <= stats.worker_processes <= 2 and stats.worker_peak_rss_mb > 10


def test_workers_result_equals_serial_for_chosen_ranks(world, serial):
    res = compare_paths(*world, ranks=[3, 5, 10], executor=Executor(workers=2))
    assert [r.rank for r in res.ranks] == [3, 5, 10]
    assert res.ranks == [serial.ranks[3], serial.ranks[5], serial.ranks[10]]
    # only the chosen ranks' files are read: rank 8's torn tail is not among the warnings
    assert not any("torn" in w for w in res.warnings)
    assert res.warnings == ["rank 10: no trace file in run B; not compared"]


def test_ray_local_result_equals_serial(world, serial):
    pytest.importorskip("ray", reason="ray is not installed (pip install bitwise-triage[ray])")
    res, stats = compare_native_distributed(*world, Executor(ray="local", workers=2))
    assert res.model_dump_json() == serial.model_dump_json()
    assert stats.backend == "ray" and stats.slots == 2
    assert stats.worker_processes >= 1
    import ray

    assert not ray.is_initialized()  # the local cluster started for it is shut down


_HEAD = """
import logging, sys, ray
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
         object_store_memory=128 << 20)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
ray.shutdown()
"""


@pytest.fixture(autouse=True)
def _environ_put_back():
    """``ray.init`` in this process sets variables (RAY_AUTH_MODE=token, ...) that every
    later subprocess would inherit: a cluster started by another test then refuses them."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_ray_existing_cluster_at_address_equals_serial(world, serial, tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (pip install bitwise-triage[ray])")
    # the cluster and its client start from the user's environment, not from what an
    # in-process ray.init of an earlier test left behind; the cluster ray.init starts asks
    # for token authentication, so its client says so, as a user's would
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_AUTH_MODE"] = "token"
    head = subprocess.Popen(
        [PY, "-c", _HEAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        address = head.stdout.readline().strip()
        assert ":" in address, address
        out = tmp_path / "r.json"
        proc = subprocess.run(
            [PY, "-m", "triage_agent.cli.app", "compare", *map(str, world)]
            + ["--ray", address, "-f", "json", "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 1, proc.stderr  # diverged
        assert json.loads(out.read_text()) == json.loads(serial.model_dump_json())
    finally:
        head.stdin.close()
        head.wait(timeout=60)


def _blocked_ray(argv: list[str]) -> subprocess.CompletedProcess:
    """The CLI in a process where ``import ray`` fails as it does when Ray is absent."""
    code = textwrap.dedent(
        f"""
        import sys
        class NoRay:
            def find_spec(self, name, path=None, target=None):
                if name == "ray" or name.startswith("ray."):
                    raise ModuleNotFoundError("No module named 'ray'", name="ray")
        sys.meta_path.insert(0, NoRay())
        sys.argv = ["triage", *{argv!r}]
        from triage_agent.cli.app import main
        main()
        """
    )
    return subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)


def test_ray_missing_is_a_one_line_error_that_says_how_to_install(world):
    proc = _blocked_ray(["compare", *map(str, world), "--ray"])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "pip install bitwise-triage[ray]" in lines[0]
    # the blocker is honest: without --ray the same process compares (diverged, exit 1)
    assert _blocked_ray(["compare", *map(str, world), "--workers", "2"]).returncode == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ray_unreachable_cluster_is_a_one_line_error(world):
    pytest.importorskip("ray", reason="ray is not installed (pip install bitwise-triage[ray])")
    port = _free_port()  # closed again: nothing listens there
    t0 = time.monotonic()
    proc = subprocess.run(
        [PY, "-m", "triage_agent.cli.app", "compare", *map(str, world), "--ray"]
        + [f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and time.monotonic() - t0 < 60
    assert proc.stderr.strip().splitlines() == [
        f"error: cannot reach the Ray cluster at 127.0.0.1:{port}: Connection refused"
    ]


def test_ray_address_where_something_else_listens_times_out_with_one_line(world):
    pytest.importorskip("ray", reason="ray is not installed (pip install bitwise-triage[ray])")
    code = textwrap.dedent(
        f"""
        import socket, sys
        from triage_agent.compare import executors
        executors.CONNECT_TIMEOUT_S = 4
        srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
        sys.argv = ["triage", "compare", {str(world[0])!r}, {str(world[1])!r},
                    "--ray", "127.0.0.1:%d" % srv.getsockname()[1]]
        from triage_agent.cli.app import main
        main()
        """
    )
    t0 = time.monotonic()
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and time.monotonic() - t0 < 40
    last = proc.stderr.strip().splitlines()[-1]
    assert "no Ray cluster answered within 4 s" in last and "Traceback" not in proc.stderr


def test_ray_address_that_is_a_path_says_how_to_write_the_option(world, monkeypatch, capsys):
    code, _, err = run_compare_cli(monkeypatch, capsys, "--ray", *world)
    assert code == 2 and "not a Ray address" in err and "--ray=ADDRESS" in err


def test_bare_ray_option_means_a_local_cluster():
    assert bare_option_value(["a", "b", "--ray"], "--ray", "local") == ["a", "b", "--ray=local"]
    assert bare_option_value(["a", "--ray", "--workers", "2", "b"], "--ray", "local") == [
        "a",
        "--ray=local",
        "--workers",
        "2",
        "b",
    ]
    assert bare_option_value(["a", "b", "--ray", "h:1"], "--ray", "x") == ["a", "b", "--ray", "h:1"]
    assert bare_option_value(["--", "--ray"], "--ray", "x") == ["--", "--ray"]


def test_cli_workers_prints_what_serial_prints(world, monkeypatch, capsys):
    serial = run_compare_cli(monkeypatch, capsys, *world, "-f", "json")
    workers = run_compare_cli(monkeypatch, capsys, *world, "-f", "json", "--workers", "2")
    assert serial[0] == workers[0] == 1  # diverged
    assert serial[1] == workers[1]
    table = run_compare_cli(monkeypatch, capsys, *world, "--workers", "2")
    assert table[0] == 1 and "origins on ranks [3]" in table[1]


def _corrupt(path: Path, line: int) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1][:30] + "\n"
    path.write_text("".join(lines))


def test_workers_name_every_rank_they_could_not_read(tmp_path, monkeypatch, capsys):
    a, b = _world(tmp_path, world=6, events=200)
    _corrupt(b / trace_filename(2), 50)
    _corrupt(b / trace_filename(4), 60)
    with pytest.raises(MalformedTraceError) as ser:
        compare_runs(*load_runs(a, b))
    with pytest.raises(RankFailuresError) as dist:
        compare_paths(a, b, executor=Executor(workers=2))
    msg = str(dist.value)
    assert msg.startswith("2 of 6 rank(s) could not be compared: rank 2 on ")
    assert str(ser.value) in msg  # the serial reader's own file:line message
    assert f"{b / trace_filename(4)}:60" in msg and "\n" not in msg
    code, _, err = run_compare_cli(monkeypatch, capsys, a, b, "--workers", "2")
    assert code == 2 and "Traceback" not in err and "rank 4 on " in err


def test_worker_reports_a_file_it_cannot_see_for_that_rank(tmp_path):
    a, _ = write_pair(SynthSpec(events=50, rank=1, world_size=2), tmp_path)
    gone = str(tmp_path / "elsewhere" / trace_filename(1))
    job = RankJob(1, str(a / trace_filename(1)), gone)
    out = compare_chunk(Chunk((job,), 2, None, False))
    (r,) = out.ranks
    assert r.result is None and r.error is not None
    assert r.error.startswith(f"rank 1 on {socket.gethostname()}: {gone}: No such file")


def test_a_worker_that_dies_is_reported_with_its_ranks():
    got = []
    died = pytest.raises(RankFailuresError, match="a worker process died .* before ranks 4-7")
    with died, ProcessPool(1) as pool:
        pool.map(os._exit, [3], got.append, lambda _: "ranks 4-7")
    assert got == []


def _descendants(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    kids: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = map(int, line.split())
        kids.setdefault(pp, []).append(p)
    todo, seen = [pid], set()
    while todo:
        for k in kids.get(todo.pop(), []):
            seen.add(k)
            todo.append(k)
    return seen


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ctrl_c_stops_the_workers(tmp_path):
    # ranks whose every event differs are decoded whole: seconds of work per worker
    for r in range(24):
        write_pair(SynthSpec(events=8000, rank=r, world_size=24, receive_at=0), tmp_path)
    proc = subprocess.Popen(
        [PY, "-m", "triage_agent.cli.app", "compare", "--workers", "2"]
        + [str(tmp_path / "run_a"), str(tmp_path / "run_b")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # a shell that starts jobs in the background leaves SIGINT ignored in them, and the
        # ignore would be inherited: the command gets SIGINT as a terminal's job would
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    workers: set[int] = set()
    while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
        time.sleep(0.2)
        workers = {
            p
            for p in _descendants(proc.pid)
            if "multiprocessing" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
        }
    assert len(workers) >= 2, "the workers never started"
    time.sleep(1.0)
    assert proc.poll() is None, "finished before it could be interrupted: make the work larger"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and time.monotonic() - t0 < 15
    assert "Traceback" not in err
    time.sleep(0.5)
    assert not [p for p in workers if _alive(p)]


def test_other_formats_are_refused_with_workers():
    bridge = Path(__file__).parent / "fixtures" / "compare" / "bridge"
    a, b = bridge / "run_a", bridge / "run_b"
    assert compare_paths(a, b).status == "diverged"  # serially they compare
    with pytest.raises(InputError, match="bridge traces are compared in one process"):
        compare_paths(a, b, executor=Executor(workers=2))


def test_mcp_compare_with_workers_returns_the_serial_result(tmp_path):
    from mcp import Client

    from mcp_server.security import Workspace
    from mcp_server.server import build_server

    root = make_relaunch_workspace(tmp_path)
    ta, tb = _world(root / "traces", world=4)
    ws = Workspace(root)

    async def go():
        async with Client(build_server(ws)) as c:
            args = {"trace_a": str(ta), "trace_b": str(tb)}
            one = await c.call_tool("first_divergence", args)
            two = await c.call_tool("first_divergence", {**args, "workers": 2})
            bad = await c.call_tool("first_divergence", {**args, "ray": "--oops"})
            return one, two, bad

    one, two, bad = run_async(go)
    assert not one.is_error and not two.is_error, two.content
    assert one.structured_content == two.structured_content
    assert one.structured_content["cross_rank"]["origin_ranks"] == [3]
    assert bad.is_error and "not a Ray address" in bad.content[0].text


def test_synth_writes_exactly_what_json_dumps_writes():
    spec = SynthSpec(events=400, steps=3, diverge_at=300, insert_at=[5], update_at=[9])
    lines = [*event_lines(spec, "a"), *event_lines(spec.model_copy(update={"receive_at": 7}), "b")]
    assert all(json.dumps(json.loads(line)) == line for line in lines)


@pytest.mark.parametrize("escape", [False, True])
def test_producers_found_by_byte_search_equal_those_found_by_decoding_every_event(tmp_path, escape):
    from test_compare_support import ev, write_trace

    from triage_agent.compare.producers import find_producers
    from triage_agent.compare.reader import read_rank_file

    evs = [
        ev(0, "aten::mm", ["w"], ["aa11"]),  # the producer of input 0
        ev(1, "aten::add", ["aa11"], ["bb22"]),  # holds the digest, only among its inputs
        ev(2, "aten::mm", ["aa11"], ["aa11"], scope="n"),  # a later producer: this one wins
        ev(3, "aten::gelu", ["cc33"], ["dd44"], caller="c:\\run\\train.py:9" if escape else None),
        ev(4, "aten::mul", ["aa11", "ee55", "bb22"], ["ff66"]),  # the receiver
    ]
    path = write_trace(tmp_path, evs)
    fast, _ = read_rank_file(path)  # native file: searched byte-wise
    slow, _ = read_rank_file(path, strict=True)  # decoded: every event looked at
    assert type(fast).__name__ == "FileRankStream" and type(slow).__name__ == "MemoryRankStream"
    for stream in (fast, slow):
        assert list(stream.may_contain("aa11", 0, 4)) == (
            [3, 2, 1, 0] if escape or stream is slow else [2, 1, 0]
        )
    got = [find_producers(s, s.event(4), [0, 1, 2], "a", 0, path) for s in (fast, slow)]
    assert got[0] == got[1]
    p0, p1, p2 = got[0]
    assert p0.event is not None and p0.event.index == 2 and p0.output == 0
    assert p1.event is None and p1.searched == 4  # nothing wrote ee55: the whole window
    assert p2.event is not None and p2.event.index == 1
