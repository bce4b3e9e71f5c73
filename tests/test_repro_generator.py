"""Template parameters, the generator, the template listing and the CLI around them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from reproducers.generator import generate, list_templates, parse_params_arg, recorded
from reproducers.params import TEMPLATES, ReproducerOutput, validate_params
from triage_agent.errors import InputError
from triage_agent.ledger import Ledger, sha256_file
from triage_agent.records import Case, Finding, ReproducerSpec, RunSpec

SPEC_PARAMS = {
    "optimizer_init": {"zero_stage", "dtype", "optimizer"},
    "cast_roundtrip": {"low_dtype", "n"},
    "reduction_order": {"world_size", "backend", "dtype"},
    "op_repeatability": {"op", "device", "repeats", "deterministic"},
    "rng_resume": {"zero_stage"},
    "async_lifetime": {"device"},
    "empty_contribution": {"world_size", "function"},
    "rng_advance": {"function", "args", "kwargs", "calls", "seed", "paths"},
}


def test_templates_match_the_agreed_names_and_params():
    assert set(TEMPLATES) == set(SPEC_PARAMS)
    for name, params in SPEC_PARAMS.items():
        assert set(TEMPLATES[name].params_model.model_fields) == params


@pytest.mark.parametrize("name", sorted(SPEC_PARAMS))
def test_params_every_field_has_a_default(name):
    model = validate_params(name, {})
    assert set(model.model_dump()) == SPEC_PARAMS[name]


@pytest.mark.parametrize(
    ("name", "params", "needle"),
    [
        ("cast_roundtrip", {"bogus": 1}, "'bogus'"),
        ("cast_roundtrip", {"low_dtype": "int8"}, "'low_dtype'"),
        ("reduction_order", {"world_size": 1}, "'world_size'"),
        ("op_repeatability", {"op": "not_an_op"}, "not_an_op"),
        ("empty_contribution", {"function": "os.system; rm"}, "'function'"),
        ("optimizer_init", {"zero_stage": "one"}, "'zero_stage'"),
        ("rng_advance", {"function": "evaluate.pick_subset"}, "'function'"),
        ("rng_advance", {"function": "os:system; rm"}, "'function'"),
        ("rng_advance", {"calls": 0}, "'calls'"),
    ],
)
def test_params_invalid_is_one_line_input_error(name, params, needle):
    with pytest.raises(InputError) as exc:
        validate_params(name, params)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_params_unknown_template():
    with pytest.raises(InputError, match="unknown reproducer template 'nope'"):
        validate_params("nope", {})


def test_generate_is_content_addressed(tmp_path):
    a = generate(ReproducerSpec(template="cast_roundtrip", params={"n": 8}), tmp_path)
    b = generate(
        {"template": "cast_roundtrip", "params": {"n": 8, "low_dtype": "bfloat16"}}, tmp_path
    )
    c = generate(ReproducerSpec(template="cast_roundtrip", params={"n": 9}), tmp_path)
    assert a.id == b.id != c.id
    assert a.id == "R-" + sha256_file(tmp_path / "reproducers" / f"{a.id}.py")[:16]
    assert json.loads((tmp_path / "reproducers" / f"{a.id}.params.json").read_text())["params"] == {
        "low_dtype": "bfloat16",
        "n": 8,
    }


def test_generate_import_dirs_default_to_the_case_and_must_be_directories(tmp_path):
    (tmp_path / "job" / "src").mkdir(parents=True)
    (tmp_path / "job" / "notes.txt").write_text("")
    case = Case(
        run_a=RunSpec(name="a", cwd=str(tmp_path / "job")),
        run_b=RunSpec(name="b", cwd=str(tmp_path / "job")),
        source_roots=[str(tmp_path / "job"), str(tmp_path / "job" / "src")],
    )
    ws = tmp_path / "ws"
    filled = generate({"template": "rng_advance"}, ws, case=case)
    assert filled.params["paths"] == [str(tmp_path / "job"), str(tmp_path / "job" / "src")]
    given = generate({"template": "rng_advance", "params": {"paths": [str(tmp_path)]}}, ws, case)
    assert given.params["paths"] == [str(tmp_path)] and given.id != filled.id
    assert generate({"template": "rng_advance"}, ws).params["paths"] == []
    with pytest.raises(InputError, match="import path .*notes.txt is not a directory"):
        generate(
            {"template": "rng_advance", "params": {"paths": [str(tmp_path / "job" / "notes.txt")]}},
            ws,
        )


def test_generate_invalid_params_writes_nothing(tmp_path):
    with pytest.raises(InputError):
        generate({"template": "cast_roundtrip", "params": {"n": -1}}, tmp_path)
    assert not (tmp_path / "reproducers").exists()


@pytest.mark.parametrize("name", sorted(SPEC_PARAMS))
def test_generated_program_is_standalone(tmp_path, name):
    gen = generate({"template": name}, tmp_path)
    tree = ast.parse((tmp_path / "reproducers" / f"{gen.id}.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert not imported & {"_common", "reproducers", "triage_agent"}
    params_assign = [
        n
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "PARAMS"
    ]
    assert len(params_assign) == 1
    assert ast.literal_eval(params_assign[0].value) == gen.params


def test_generate_from_finding_records_it_in_the_ledger(tmp_path):
    ledger = Ledger(tmp_path)
    finding = Finding(
        probe_id="p",
        category="casts",
        file="x.py",
        line_start=1,
        line_end=2,
        reproducer=ReproducerSpec(template="cast_roundtrip", params={"low_dtype": "float16"}),
    )
    gen = generate(finding, tmp_path, ledger=ledger)
    generate(finding, tmp_path, ledger=ledger)  # same id: recorded once
    known = recorded(ledger)
    assert list(known) == [gen.id]
    assert known[gen.id].finding == finding.id
    assert known[gen.id].sha256 == sha256_file(tmp_path / "reproducers" / f"{gen.id}.py")


def test_generate_from_finding_without_template(tmp_path):
    finding = Finding(probe_id="p", category="casts", file="x.py", line_start=1, line_end=1)
    with pytest.raises(InputError, match="names no reproducer template"):
        generate(finding, tmp_path)


def test_list_templates_describes_every_template():
    rows = {r["template"]: r for r in list_templates()}
    assert set(rows) == set(SPEC_PARAMS)
    for name, row in rows.items():
        assert set(row["params"]) == SPEC_PARAMS[name]
        assert row["tests"] and row["supported_means"]


def test_parse_params_arg(tmp_path):
    assert parse_params_arg('{"n": 3}') == {"n": 3}
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"template": "cast_roundtrip", "params": {"n": 5}}))
    assert parse_params_arg(str(f)) == {"n": 5}
    with pytest.raises(InputError, match="not valid JSON"):
        parse_params_arg("{n: 3}")
    with pytest.raises(InputError, match="neither"):
        parse_params_arg(str(tmp_path / "missing.json"))


def test_output_model_rejects_extra_fields():
    with pytest.raises(ValueError):
        ReproducerOutput.model_validate(
            {
                "schema": "triage.reproducer/1",
                "template": "t",
                "status": "ok",
                "compared": "x",
                "extra": 1,
            }
        )


def _triage(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "triage_agent.cli.app", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_list_json_and_generate(tmp_path):
    res = _triage("reproduce", "list", "--format", "json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert {t["template"] for t in json.loads(res.stdout)["templates"]} == set(SPEC_PARAMS)
    res = _triage("reproduce", "generate", "cast_roundtrip", "--params", '{"n": 16}', cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rid = res.stdout.splitlines()[0]
    assert (tmp_path / ".triage" / "reproducers" / f"{rid}.py").is_file()
    assert rid in recorded(Ledger(tmp_path / ".triage"))


@pytest.mark.parametrize(
    "args",
    [
        ("reproduce", "generate", "nope"),
        ("reproduce", "generate", "cast_roundtrip", "--params", '{"bogus": 1}'),
        ("reproduce", "generate", "cast_roundtrip", "--params", "[1]"),
        ("reproduce", "launch", "R-0123456789abcdef"),
    ],
)
def test_cli_bad_input_is_one_line_error(tmp_path, args):
    res = _triage(*args, cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error:")
    assert "Traceback" not in res.stderr
