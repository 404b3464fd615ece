"""The offline judge grades an answer to a figure question by what the calculator could compute, not by how its
sentences look."""
from agent.models.financials import Computation, Fact, Input
from agent.models.research import Answer, Evaluation, ResearchPlan
from agent.providers.llm.extractive_figures import COMPUTED, NOT_COMPUTED, grade_figure
from agent.providers.llm.roles import EvaluateRequest


def _req(question: str, computations: list[Computation], sources=("10k",)) -> EvaluateRequest:
    plan = ResearchPlan(reasoning="r", tickers=["QFI"], data_sources=list(sources), is_valid=True)
    return EvaluateRequest(question=question, plan=plan, answer=Answer(text="- a [10K1]"), scope="QFI:10k",
                           evidence=[], markers={}, computations=computations)


def _ev() -> Evaluation:
    return Evaluation(completeness_score=100, specificity_score=100, accuracy_score=100, clarity_score=90, is_sufficient=True)


def _fact(year: int) -> Fact:
    return Fact(concept="revenue", label="Net sales", statement="income", fiscal_year=year, value=1.0, scale=1e6)


def _computation(found: bool) -> Computation:
    inputs = [Input(name="operating_income", fiscal_year=2023, fact=_fact(2023)),
              Input(name="revenue", fiscal_year=2023, fact=_fact(2023) if found else None)]
    return Computation(label="Operating margin", formula="operating income / revenue", value=0.26 if found else None,
                       inputs=inputs, missing=[] if found else ["revenue FY2023"])


def test_a_complete_computation_is_graded_as_strong_evidence():
    ev = grade_figure(_req("What is QFI's FY2023 operating margin?", [_computation(True)]), _ev())
    assert ev.completeness_score == COMPUTED[0] and ev.is_sufficient


def test_a_missing_input_lowers_the_grade_and_is_named():
    ev = grade_figure(_req("What is QFI's FY2023 operating margin?", [_computation(False)]), _ev())
    assert ev.completeness_score < COMPUTED[0] and not ev.is_sufficient
    assert any("revenue FY2023" in m for m in ev.missing_info)
    assert ev.overall_confidence < _ev().overall_confidence


def test_a_figure_question_answered_without_a_computation_is_weak():
    ev = grade_figure(_req("What is QFI's FY2023 operating margin?", []), _ev())
    assert ev.completeness_score == NOT_COMPUTED[0] and not ev.is_sufficient
    assert ev.overall_confidence < 0.5


def test_an_answer_read_from_sentences_is_never_graded_as_certain():
    from agent.providers.llm.extractive_figures import FROM_PROSE

    for req in (_req("What are QFI's main risks?", []),
                # a question answered from the calls alone is not graded by the statements
                _req("What is QFI's FY2023 operating margin?", [], sources=("earnings_transcripts",))):
        ev = grade_figure(req, _ev())
        assert (ev.completeness_score, ev.accuracy_score) == FROM_PROSE and ev.specificity_score == 100
        assert ev.overall_confidence < grade_figure(_req("What is QFI's FY2023 operating margin?", [_computation(True)]),
                                                    _ev()).overall_confidence


def test_a_yes_no_question_answered_with_neither_is_not_complete():
    from agent.providers.llm.extractive_figures import UNANSWERED_YES_NO, grade_yes_no

    req = _req("Is QFI a capital-intensive business?", [])
    ev = grade_yes_no(req, _ev())
    assert ev.completeness_score == UNANSWERED_YES_NO[0] and not ev.is_sufficient
    answered = req.model_copy(update={"answer": Answer(text="No: the capex ratio fell [10K1]\n- more [10K1]")})
    assert grade_yes_no(answered, _ev()) == _ev()
    assert grade_yes_no(_req("What is QFI's revenue?", []), _ev()) == _ev()  # not a yes/no question
    assert ev.overall_confidence < 0.5
