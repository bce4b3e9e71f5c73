"""'Explains' is a relation between a hypothesis (category and site) and one trace event:
op names are parsed and compared whole, so near-miss names explain nothing."""

import pytest
from test_workflow_support import event_ref

from triage_agent.records import Finding
from triage_agent.workflow.classify import EventSite, explains, parse_op


def _op(name: str, scope: str = "blocks.0", caller: str | None = None, kind: str = "op"):
    ref = event_ref(name, scope=scope, step=2, index=3, line=4, kind=kind, caller=caller)
    return EventSite.of(ref)


def test_parse_op_splits_namespace_op_and_overload():
    op = parse_op("aten::add_.Tensor")
    assert (op.namespace, op.op, op.overload, op.base) == ("aten", "add_", "Tensor", "add")
    assert parse_op("aten::addmm").base == "addmm"
    assert parse_op("aten::__and__.Tensor").base == "__and__"
    assert parse_op("not an op name") is None


@pytest.mark.parametrize(
    "name",
    [
        "aten::addmm",
        "aten::index_add_",
        "aten::constant_pad_nd",
        "aten::reflection_pad2d",
        "aten::slice.Tensor",
        "aten::addcmul_",
        "aten::baddbmm",
        "aten::_foreach_addcdiv_.ScalarList",
    ],
)
def test_cast_and_accumulation_do_not_explain_near_miss_names(name):
    site = _op(name)
    assert not explains("casts", [], site), name
    assert not explains("accumulation", [], site), name


@pytest.mark.parametrize(
    ("category", "name"),
    [
        ("accumulation", "aten::add_.Tensor"),
        ("accumulation", "aten::sum.dim_IntList"),
        ("accumulation", "aten::div_.Scalar"),
        ("casts", "aten::_to_copy"),
        ("casts", "aten::copy_"),
        ("rng-state", "aten::bernoulli_.float"),
        ("rng-state", "aten::native_dropout"),
        ("nondeterminism", "aten::index_add_"),
        ("nondeterminism", "aten::scatter_add_"),
    ],
)
def test_each_category_explains_the_ops_of_its_kind(category, name):
    assert explains(category, [], _op(name))


@pytest.mark.parametrize(
    ("name", "scope"),
    [("aten::slice.Tensor", "embed.padding"), ("aten::mul.Tensor", "head.add_norm")],
)
def test_a_scope_name_is_no_op_name(name, scope):
    site = _op(name, scope=scope)
    assert not explains("casts", [], site)
    assert not explains("accumulation", [], site)


def test_random_and_atomic_families_do_not_bleed_into_each_other():
    assert not explains("rng-state", [], _op("aten::index_add_"))
    assert not explains("nondeterminism", [], _op("aten::bernoulli_.float"))
    # 'rand' is a family member only as a whole name: an op that merely contains it is not
    assert not explains("rng-state", [], _op("aten::grid_sampler_2d"))
    assert not explains("rng-state", [], _op("aten::operand_like"))


def test_kinds_and_modules():
    assert explains("collectives", [], _op("all_reduce", kind="collective"))
    assert not explains("collectives", [], _op("aten::add_.Tensor"))
    assert explains("optimizer-init", [], _op("0.weight", scope="AdamW", kind="optimizer"))
    assert not explains("optimizer-init", [], _op("Linear", kind="module"))
    assert explains("rng-state", [], _op("Dropout", scope="drop", kind="module"))
    assert not explains("rng-state", [], _op("Linear", kind="module"))
    # module-level origins are narrowed to ops before casts or accumulation are judged
    assert not explains("casts", [], _op("Linear", kind="module"))
    assert not explains("environment", [], _op("aten::add_.Tensor"))


def test_a_finding_explains_an_event_called_from_its_own_lines():
    f = Finding(
        probe_id="p",
        category="accumulation",
        file="trainlib/accumulate.py",
        line_start=10,
        line_end=12,
    )
    at = _op("0.weight", scope="SGD", kind="optimizer", caller="/x/y/trainlib/accumulate.py:11")
    near = _op("0.weight", scope="SGD", kind="optimizer", caller="/x/y/trainlib/accumulate.py:30")
    other = _op("0.weight", scope="SGD", kind="optimizer", caller="/x/y/trainlib/data.py:11")
    # a category that predicts no optimizer event still explains one at its own site
    assert explains("rng-state", [f], at)
    assert not explains("rng-state", [f], near)
    assert not explains("rng-state", [f], other)
