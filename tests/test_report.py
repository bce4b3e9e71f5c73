"""The reviewer's report, rendered by a real headless Chromium."""

import shutil
import subprocess

from PIL import Image
from test_ledger_support import add_evidence

from triage_agent.evidence_data import RerunData
from triage_agent.ledger import Ledger
from triage_agent.metrics import MetricLog
from triage_agent.records import (
    Case,
    Classification,
    Evidence,
    EvidenceKind,
    EvidenceResult,
    Hypothesis,
    HypothesisStatus,
    RunSpec,
    Verdict,
)
from triage_agent.report import write_report
from triage_agent.workflow import confirm_mismatch

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _ledger_with_verdict(tmp_path) -> Ledger:
    for name, bump in (("a", 0.0), ("b", 2**-30)):
        log = MetricLog(tmp_path / name, rank=0)
        for s in range(12):
            log.log(s, loss=1.0 / (s + 1) + (bump if s >= 7 else 0.0), grad_norm=0.5)
        log.close()
    case = Case(
        run_a=RunSpec(name="a", metrics=str(tmp_path / "a")),
        run_b=RunSpec(name="b", metrics=str(tmp_path / "b")),
    )
    ledger = Ledger(tmp_path / "ws")
    ledger.set_case(case)
    confirm_mismatch(case, ledger)
    h = ledger.put_hypothesis(
        Hypothesis(statement="a <dangerous> & odd statement", category="casts")
    )
    ev = add_evidence(
        ledger, h.id, EvidenceResult.supported, summary="bits lost", argv=["python", "r.py"]
    )
    ledger.update_hypothesis(h.id, status=HypothesisStatus.supported)
    ledger.set_verdict(
        Verdict(
            hypothesis=h.id,
            classification=Classification.policy_difference,
            statement="VERDICT-TEXT-42",
            evidence=[ev.id],
        )
    )
    return ledger


def test_report_markdown_holds_verdict_plot_and_commands(tmp_path):
    paths = write_report(_ledger_with_verdict(tmp_path), tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "VERDICT-TEXT-42" in md and "python r.py" in md
    assert "first differing step is 7" in md
    assert paths.plot is not None and "metric_distance.png" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert "&lt;dangerous&gt;" in html and "<dangerous>" not in html


def test_report_html_renders_verdict_and_plot_in_chromium(tmp_path):
    assert CHROMIUM is not None, "Debian's chromium is needed: `make test` installs it"
    paths = write_report(_ledger_with_verdict(tmp_path), tmp_path / "out")
    url = f"file://{paths.html}"
    dom = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'prof1'}",
            "--virtual-time-budget=3000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "VERDICT-TEXT-42" in dom
    assert 'data-loaded="1"' in dom, "the plot image did not load"
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'prof2'}",
            "--window-size=1200,1600",
            f"--screenshot={shot}",
            url,
        ],
        capture_output=True,
        timeout=120,
    )
    img = Image.open(shot).convert("L")
    assert img.size == (1200, 1600)
    lo, hi = img.getextrema()
    assert lo < 80 and hi > 200, "the page rendered blank"


def test_report_says_what_the_verdict_rests_on_and_lists_the_interventions(tmp_path):
    ledger = _ledger_with_verdict(tmp_path)
    st = ledger.state()
    hid = st.verdict.hypothesis
    for changed, first, result in (
        ("set OMP_NUM_THREADS=1", 0, EvidenceResult.refuted),
        ("policy deterministic", None, EvidenceResult.supported),
    ):
        ledger.add_evidence(
            Evidence(
                hypotheses=[hid],
                kind=EvidenceKind.rerun,
                result=result,
                summary=changed,
                argv=["python", "train.py", ";", "python", "resume.py", "--dir", "a b"],
                data=RerunData(
                    changed=[changed], applied_to="b", first_step=first, common_steps=12
                ),
            )
        )
    write_report(ledger, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "backed by a reproducer only" in md  # the verdict's chain cites no rerun
    assert "| set OMP_NUM_THREADS=1 | b | first differs at step 0 |" in md
    assert "| policy deterministic | b | all 12 steps match |" in md
    # two launches are two command lines, each quoted for a shell, never one ';' line
    assert "python train.py\npython resume.py --dir 'a b'" in md
    html = (tmp_path / "out" / "report.html").read_text()
    assert "id='discriminator'" in html and "all 12 steps match" in html


def test_an_old_ledgers_advice_dict_is_rendered_as_sentences(tmp_path):
    ledger = _ledger_with_verdict(tmp_path)
    ledger.set_verdict(
        Verdict(
            classification=Classification.unknown,
            statement="no cause",
            next_action='{"steps":"start the window before step 2: x","level":"capture ops"}',
        )
    )
    write_report(ledger, tmp_path / "out")
    md = (tmp_path / "out" / "report.md").read_text()
    assert "- next action: Start the window before step 2: x. Capture ops." in md
    assert '{"steps"' not in md
    assert '{"steps"' not in (tmp_path / "out" / "report.html").read_text()


def test_ledger_view_names_the_step_confirm_mismatch_found_without_a_stage_marker(tmp_path):
    from triage_agent.ledger_view import to_markdown

    ledger = _ledger_with_verdict(tmp_path)  # confirmed through confirm_mismatch alone
    assert not any(s.get("stage") == "confirm" for s in ledger.state().stages)
    md = to_markdown(ledger.state())
    assert "first mismatching step 7" in md
    assert "not yet found" not in md
