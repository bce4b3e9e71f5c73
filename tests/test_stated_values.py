"""What a launch's text states, and the texts a flag hands the job."""

import pytest

from triage_agent.errors import InputError
from triage_agent.interventions import describe, parse_intervention
from triage_agent.records import RunSpec
from triage_agent.stated_values import NOT_STATED, as_stated, flag_texts, misread, stated
from triage_agent.workflow.stated_flags import flag_values


def test_a_text_states_a_value_in_the_type_it_was_turned_into():
    assert stated("false", True) is False and stated("Yes", False) is True
    assert stated("0", 3) == 0 and stated("0.25", 1.0) == 0.25
    assert stated("adamw", 1.0) is NOT_STATED and stated("maybe", True) is NOT_STATED
    assert stated("1.5", 2) is NOT_STATED  # an int is not what "1.5" states


def test_a_value_is_misread_only_when_its_text_states_another():
    assert misread("false", True) and misread("0", 100) and misread("0.0", 0.1)
    assert not misread("false", False) and not misread("0.10", 0.1)
    assert not misread("cosine", 3)  # a choice's name, not a value


def test_a_flag_hands_its_values_and_the_values_of_its_overrides():
    run = RunSpec(
        name="b",
        metrics="{out}",
        launch=[["python", "t.py", "--set", "a.lr=0.05", "--set", "a.nesterov=false", "--x=1"]],
    )
    assert flag_values(run, "--set") == ["a.lr=0.05", "a.nesterov=false"]
    assert flag_values(run, "--x") == ["1"]
    assert flag_texts(flag_values(run, "--set")) == [
        "a.lr=0.05",
        "0.05",
        "a.nesterov=false",
        "false",
    ]


def test_as_stated_returns_what_the_text_states_where_it_is_handed_it():
    def coerce(text, like):
        return type(like)(text)

    fixed = as_stated(coerce, "false")
    assert coerce("false", False) is True and fixed("false", False) is False
    assert fixed("true", False) is True  # another text: the function as it is


def test_the_intervention_names_the_function_and_the_text():
    iv = parse_intervention("as-stated config:coerce=false")
    assert (iv.target, iv.text) == ("config:coerce", "false")
    assert "returning what the text 'false' states" in describe(iv)
    with pytest.raises(InputError, match="as-stated pkg.module:Qualified.name=TEXT"):
        parse_intervention("as-stated config:coerce")
