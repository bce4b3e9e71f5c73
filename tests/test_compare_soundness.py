"""An event is an origin only when its recorded inputs are all it reads; an op whose inputs are
the other run's in another order says so. Judged on pairs of events as the reader decodes
them, and on a real traced job whose optimizer reads a learning rate that differs."""

from __future__ import annotations

from pathlib import Path

from triage_agent.compare.classify import judge_pair
from triage_agent.compare.model import Ev


def _ev(kind: str, name: str, ins: tuple, outs: tuple, **meta) -> Ev:
    return Ev(
        index=0,
        seq=0,
        step=3,
        kind=kind,
        name=name,
        scope="AdamW",
        call=0,
        phase="optimizer",
        caller=None,
        inputs=ins,
        outputs=outs,
        dump=None,
        meta=meta,
        line=1,
    )


def _judge(ea: Ev, eb: Ev):
    return judge_pair(ea, eb, 0, Path("a"), Path("b"), True)


def test_an_update_recorded_without_its_gradient_is_not_an_origin():
    a = _ev("optimizer", "w", ("p", "m"), ("p1",), inputs=["param", "exp_avg"])
    b = _ev("optimizer", "w", ("p", "m"), ("p2",), inputs=["param", "exp_avg"])
    d = _judge(a, b)
    assert d.role == "observed"
    assert [lab.code for lab in d.labels] == ["inputs-incomplete"]
    assert "gradient" in d.labels[0].message


def test_an_update_whose_hyper_parameters_differ_received_its_difference():
    hyper_a = {"lr": "0.01", "weight_decay": "0.1", "state.step": "3"}
    hyper_b = {**hyper_a, "state.step": "4"}
    a = _ev("optimizer", "w", ("p", "g"), ("p1",), inputs=["param", "grad"], hyper=hyper_a)
    b = _ev("optimizer", "w", ("p", "g"), ("p2",), inputs=["param", "grad"], hyper=hyper_b)
    d = _judge(a, b)
    assert d.role == "observed" and "state.step 3 vs 4" in d.labels[0].message
    # the same hyper-parameters and the gradient recorded: equal inputs, different outputs
    b2 = _ev("optimizer", "w", ("p", "g"), ("p2",), inputs=["param", "grad"], hyper=hyper_a)
    assert _judge(a, b2).role == "origin"


def test_an_op_reading_the_other_runs_inputs_in_another_order_is_labelled_so():
    a = _ev("op", "aten::stack", ("x", "y", "z"), ("s1",))
    b = _ev("op", "aten::stack", ("y", "x", "z"), ("s2",))
    d = _judge(a, b)
    assert d.role == "receiver"
    assert "permuted-inputs" in [lab.code for lab in d.labels]
    c = _ev("op", "aten::stack", ("x", "q", "z"), ("s2",))
    assert "permuted-inputs" not in [lab.code for lab in _judge(a, c).labels]


def _call(index: int, call: int, caller: str | None, phase: str = "forward") -> Ev:
    return Ev(
        index=index,
        seq=index,
        step=3,
        kind="module",
        name="Net",
        scope="",
        call=call,
        phase=phase,
        caller=caller,
        inputs=(f"x{index}",),
        outputs=(f"y{index}",),
        dump=None,
        meta={},
        line=index + 1,
    )


def test_an_extra_call_of_a_module_is_paired_by_the_line_that_made_it():
    from triage_agent.compare.align import Alignment, align_gap

    # A: the training forward and its backward; B: a validation forward first, then the same
    a = [_call(0, 0, "/a/train.py:36"), _call(1, 1, None, "backward")]
    b = [
        _call(0, 0, "/b/evaluate.py:13"),
        _call(1, 1, "/b/train.py:36"),
        _call(2, 2, None, "backward"),
    ]
    out = Alignment()
    align_gap(a, b, out, 2, 3)
    assert [(pa.index, pb.index) for pa, pb in out.pairs] == [(0, 1), (1, 2)]
    assert [e.caller for e, _ in out.only_b] == ["/b/evaluate.py:13"]


def test_without_call_sites_repeated_calls_pair_by_position():
    from triage_agent.compare.align import Alignment, align_gap

    a = [_call(0, 0, None), _call(1, 1, None, "backward")]
    b = [_call(0, 0, None), _call(1, 1, None), _call(2, 2, None, "backward")]
    out = Alignment()
    align_gap(a, b, out, 2, 3)
    assert [(pa.index, pb.index) for pa, pb in out.pairs] == [(0, 0), (1, 1)]
