"""The steps a search for who moved a generator traces."""

from types import SimpleNamespace

from triage_agent.workflow.moves import draw_window


def _sit(origin_step: int, common: list[int]):
    return SimpleNamespace(
        trace=SimpleNamespace(origin=SimpleNamespace(step=origin_step)),
        rep=SimpleNamespace(diff=SimpleNamespace(common_steps=common)),
    )


def test_a_draw_in_a_step_is_searched_over_that_step_and_the_one_before():
    assert draw_window(_sit(5, [0, 1, 2, 3, 4, 5, 6])) == (4, 5)


def test_a_draw_made_during_initialisation_is_searched_over_the_first_step():
    # the capture refuses a window that starts before initialisation; the first step's
    # trace holds initialisation's events
    assert draw_window(_sit(-1, [0, 1, 2])) == (0, 0)


def test_a_resumed_run_is_not_searched_before_its_first_step():
    assert draw_window(_sit(-1, [7, 8, 9])) == (7, 7)
    assert draw_window(_sit(7, [7, 8, 9])) == (7, 7)
