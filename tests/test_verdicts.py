"""Read verdicts: the fitted verdict models, their file, the modes, and the formulas.

The fast tests need no model. The ``slow`` ones use the real parts: the shipped verdict
file, the MiniLM embedder from its wheel and the embedded judge through transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from offline_scorer import create_answer_relevancy_scorer, create_answer_similarity_scorer
from offline_scorer._exceptions import ConfigurationError, ModelLoadError
from offline_scorer.judges._cards import DEFAULT_MODEL, card_for, get_model_card
from offline_scorer.scorers._answer_relevancy import expected_relevancy_score, relevancy_score
from offline_scorer.scorers._features import similarity_features, similarity_features_aliases
from offline_scorer.scorers._modes import ModeOptions, resolve_modes
from offline_scorer.scorers._similarity_score import (
    expected_similarity_score,
    similarity_score,
)
from offline_scorer.scorers._split import reference_groups, split_answer
from offline_scorer.scorers._summaries import relevancy_summary, similarity_summary
from offline_scorer.scorers._verdicts import (
    RELEVANCY_LABELS,
    SIMILARITY_LABELS,
    GateCondition,
    GatedModel,
    LogisticModel,
    _load,
    load_verdict_models,
)
from offline_scorer.testing import FakeJudge

ROOT = Path(__file__).resolve().parent.parent
CARD = get_model_card("smollm2-135m-instruct")


# ------------------------------------------------------------------ the shipped file


def test_verdict_file_is_plain_json_and_its_checksum_is_verified() -> None:
    assert CARD.verdicts is not None
    path = ROOT / "models" / CARD.verdicts.file
    text = path.read_text(encoding="utf-8")
    json.loads(text)  # plain JSON: no pickle, no code
    models = load_verdict_models(CARD)
    assert models is not None and models.sha256 == CARD.verdicts.sha256
    assert models.models.relevancy.classes and models.models.similarity.classes
    with pytest.raises(ModelLoadError, match="do not match the sha256"):
        _load("tampered", CARD.verdicts.file, "0" * 64)


def test_a_missing_verdict_file_is_a_clear_error() -> None:
    with pytest.raises(ModelLoadError, match="missing from the installation"):
        _load("someone", "no-such.verdicts.json", "0" * 64)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=20, max_size=20))
def test_verdict_probabilities_sum_to_one(values: list[float]) -> None:
    models = load_verdict_models(CARD)
    assert models is not None
    for model, labels in (
        (models.models.relevancy, RELEVANCY_LABELS),
        (models.models.similarity, SIMILARITY_LABELS),
    ):
        features = dict(zip(model.features, values, strict=False))
        probabilities = model.probabilities(features)
        assert set(probabilities) == set(labels)
        assert abs(sum(probabilities.values()) - 1) < 1e-3
        assert all(0 <= p <= 1 for p in probabilities.values())


def _one_feature_model(feature: str, weight: float) -> LogisticModel:
    """A two-label logistic model on one raw feature (mean 0, scale 1)."""
    return LogisticModel(
        kind="logistic",
        classes=["no", "yes"],
        features=[feature],
        means=[0.0],
        scales=[1.0],
        weights=[[0.0], [weight]],
        intercepts=[0.0, 0.0],
        l2=1.0,
    )


def test_a_gated_model_sends_each_verdict_to_the_model_its_conditions_pick() -> None:
    gated = GatedModel(
        kind="gated",
        when=[
            GateCondition(feature="min_tokens", at_least=4),
            GateCondition(feature="len_ratio", at_least=-0.5, at_most=0.5),
        ],
        model=_one_feature_model("cos", 4.0),  # sentences: the cosine decides
        otherwise=_one_feature_model("cos", -4.0),  # anything else: the reverse
    )
    assert gated.features == ["cos", "min_tokens", "len_ratio"]
    sentences = {"cos": 1.0, "min_tokens": 6.0, "len_ratio": 0.1}
    assert gated.probabilities(sentences)["yes"] > 0.98
    for outside in ({"min_tokens": 3.0}, {"len_ratio": 0.7}, {"len_ratio": -0.6}):
        assert gated.probabilities(sentences | outside)["yes"] < 0.02, outside
    # the ends of a range are inside it
    assert gated.probabilities(sentences | {"min_tokens": 4.0, "len_ratio": 0.5})["yes"] > 0.98
    with pytest.raises(ValidationError, match="same classes"):
        GatedModel(
            kind="gated",
            when=[GateCondition(feature="min_tokens", at_least=4)],
            model=_one_feature_model("cos", 1.0),
            otherwise=_one_feature_model("cos", 1.0).model_copy(update={"classes": ["a", "b"]}),
        )
    with pytest.raises(ValidationError, match="at least 1 item"):
        GatedModel(kind="gated", when=[], model=gated.model, otherwise=gated.otherwise)


def test_a_gate_condition_can_ask_for_any_of_several() -> None:
    """``any_of``: at least one of its conditions holds (short sentences go to the sentence
    model like long texts do); a condition is a range or a list, never both or neither."""
    either = GateCondition(
        any_of=[
            GateCondition(feature="min_tokens", at_least=5),
            GateCondition(feature="sentence_words", at_least=3),
        ]
    )
    gated = GatedModel(
        kind="gated",
        when=[either, GateCondition(feature="ref_list", at_most=0)],
        model=_one_feature_model("cos", 4.0),
        otherwise=_one_feature_model("cos", -4.0),
    )
    assert gated.features == ["cos", "min_tokens", "sentence_words", "ref_list"]
    base = {"cos": 1.0, "ref_list": 0.0}
    assert gated.holds(base | {"min_tokens": 6.0, "sentence_words": 0.0})
    assert gated.holds(base | {"min_tokens": 4.0, "sentence_words": 4.0})
    assert not gated.holds(base | {"min_tokens": 4.0, "sentence_words": 0.0})
    assert not gated.holds(base | {"min_tokens": 6.0, "sentence_words": 6.0, "ref_list": 1.0})
    assert gated.probabilities(base | {"min_tokens": 4.0, "sentence_words": 4.0})["yes"] > 0.98
    assert gated.probabilities(base | {"min_tokens": 4.0, "sentence_words": 0.0})["yes"] < 0.02
    with pytest.raises(ValidationError, match="exactly one of: a feature"):
        GateCondition(feature="min_tokens", any_of=[GateCondition(feature="x", at_least=1)])
    with pytest.raises(ValidationError, match="exactly one of: a feature"):
        GateCondition(at_least=1)
    with pytest.raises(ValidationError, match="no range of its own"):
        GateCondition(any_of=[GateCondition(feature="x", at_least=1)], at_most=2)
    with pytest.raises(ValidationError, match="at least 1 item"):
        GateCondition(any_of=[])


def test_a_gated_model_may_hold_a_gated_model() -> None:
    """The 0.5B card's similarity: past its item limits one model, within them a second
    gate (whole sentences to one model, anything else to another); each verdict reaches
    the model the gates pick, and the file's JSON round-trips."""
    inner = GatedModel(
        kind="gated",
        when=[GateCondition(feature="sentence_words", at_least=3)],
        model=_one_feature_model("cos", 4.0),
        otherwise=_one_feature_model("cos", -4.0),
    )
    outer = GatedModel(
        kind="gated",
        when=[GateCondition(feature="reference_words", at_most=39)],
        model=inner,
        otherwise=_one_feature_model("read", 4.0),
    )
    assert outer.features == ["cos", "sentence_words", "read", "reference_words"]
    short = {"cos": 1.0, "read": -1.0, "reference_words": 10.0}
    assert outer.probabilities(short | {"sentence_words": 4.0})["yes"] > 0.98
    assert outer.probabilities(short | {"sentence_words": 0.0})["yes"] < 0.02
    assert outer.probabilities(short | {"reference_words": 60.0})["yes"] < 0.02
    again = GatedModel.model_validate(json.loads(outer.model_dump_json()))
    assert again == outer
    assert isinstance(again.model, GatedModel)
    with pytest.raises(ValidationError, match="same classes"):
        GatedModel(
            kind="gated",
            when=outer.when,
            model=inner,
            otherwise=_one_feature_model("cos", 1.0).model_copy(update={"classes": ["a", "b"]}),
        )


def test_sentence_words_counts_only_when_both_sides_end_as_sentences() -> None:
    """Two short sentences ("It is not a good idea." / "It's not a good idea.") are told
    from a short answer taken from a text ("June 24, 1983") by how they end."""
    short = similarity_features("It is not a good idea.", "It's not a good idea.", cos=0.96)
    assert short["min_tokens"] == 4
    assert short["sentence_words"] == short["min_tokens"]
    phrase = similarity_features("June 24, 1983", "Holiday Road was released in 1983.")
    assert phrase["sentence_words"] == 0
    assert similarity_features("Take a look at this:", "Look at these: ")["sentence_words"] > 0
    assert similarity_features('He said "no."', "He refused.")["sentence_words"] > 0
    # against every alias, as min_tokens: a short alternative that is no sentence counts
    aliases = ["The first year of school begins then.", "before the first year"]
    answer = "It happens before the first year begins."
    assert similarity_features(aliases[0], answer)["sentence_words"] > 0
    assert similarity_features_aliases(aliases, answer)["sentence_words"] == 0


def test_min_tokens_is_the_shorter_sides_word_count() -> None:
    """The feature a gate tells two whole sentences from a short answer by."""
    paraphrase = similarity_features(
        "Paris is the capital of France.", "The capital of France is Paris.", cos=0.95
    )
    bare = similarity_features("A spider has eight legs.", "Eight.", cos=0.6)
    assert paraphrase["min_tokens"] >= 4
    assert bare["min_tokens"] == 1
    assert similarity_features("", "Eight.")["min_tokens"] == 0


def test_min_tokens_counts_the_shortest_alias_and_a_list_reference_is_marked() -> None:
    """A reference with a short alternative is a short answer, whichever alias matched best;
    a reference that is a list ("A/B/C", kept whole) is not a sentence."""
    answer = '"Rip It Up" is a song by the post-punk band Orange Juice.'
    aliases = ["Scottish post-punk band Orange Juice", "Orange Juice"]
    assert similarity_features(aliases[0], answer)["min_tokens"] == 5
    assert similarity_features_aliases(aliases, answer)["min_tokens"] == 2
    assert similarity_features("Tony Hightower as Frank/Palmer Williams", answer)["ref_list"] == 1
    assert similarity_features(aliases[0], answer)["ref_list"] == 0


def test_swap_rest_is_how_much_a_name_swapped_pair_shares_besides_the_names() -> None:
    """A pair that says the same thing of another entity shares all the rest: 1; two bare
    names share nothing else: 0; a pair without a swapped name: 0."""
    milan = similarity_features("Rome is the capital of Italy.", "The capital of Italy is Milan.")
    assert (milan["name_swap"], milan["swap_rest"]) == (1.0, 1.0)
    names_only = similarity_features("George Washington", "Abraham Lincoln")
    assert (names_only["name_swap"], names_only["swap_rest"]) == (1.0, 0.0)
    paraphrase = similarity_features(
        "Paris is the capital of France.", "The capital of France is Paris."
    )
    assert (paraphrase["name_swap"], paraphrase["swap_rest"]) == (0.0, 0.0)
    partly = similarity_features(
        "Rome is the capital of Italy.", "Milan is the largest city of Italy."
    )
    assert partly["name_swap"] == 1.0 and 0.0 < partly["swap_rest"] < 1.0


# ------------------------------------------------------------------ formulas


@given(st.lists(st.sampled_from(RELEVANCY_LABELS), min_size=1, max_size=12))
def test_expected_relevancy_on_hard_labels_is_the_reference_formula(labels: list[str]) -> None:
    one_hot = [{label: float(label == chosen) for label in RELEVANCY_LABELS} for chosen in labels]
    assert expected_relevancy_score(one_hot) == relevancy_score(labels)


@given(
    st.lists(st.sampled_from(SIMILARITY_LABELS), min_size=1, max_size=12),
    st.integers(0, 6),
)
def test_expected_similarity_on_hard_labels_is_the_reference_formula(
    labels: list[str], extra: int
) -> None:
    one_hot = [{label: float(label == chosen) for label in SIMILARITY_LABELS} for chosen in labels]
    assert expected_similarity_score(one_hot, extra_units=extra) == similarity_score(
        labels, extra_units=extra
    )


def test_reference_numbers_on_hard_labels() -> None:
    assert relevancy_score(["yes", "unsure", "no"]) == 0.43
    assert similarity_score(["exact", "exact", "missing"]) == 0.63
    assert similarity_score(["semantic", "partial"], extra_units=1) == 0.45


# ------------------------------------------------------------------ modes


def test_the_embedded_card_reads_verdicts_and_other_judges_generate() -> None:
    embedded = resolve_modes("relevancy", card_for(DEFAULT_MODEL), ModeOptions())
    assert (embedded.verdicts, embedded.scoring, embedded.extraction) == (
        "read",
        "expected",
        "split",
    )
    assert embedded.models is not None
    fake = resolve_modes("relevancy", None, ModeOptions())
    assert (fake.verdicts, fake.scoring, fake.extraction, fake.models) == (
        "generate",
        "hard",
        "model",
        None,
    )
    raw = resolve_modes("similarity", None, ModeOptions(verdicts="read"))
    assert raw.verdicts == "read" and raw.models is None  # the judge's own label reads


def test_bad_modes_are_refused_with_the_option_named() -> None:
    with pytest.raises(ConfigurationError, match="scoring='expected' needs verdict"):
        create_answer_relevancy_scorer(judge=FakeJudge(), scoring="expected")
    with pytest.raises(ConfigurationError, match="verdicts"):
        create_answer_similarity_scorer(verdicts="sample")  # type: ignore[arg-type]


def test_options_record_the_resolved_modes() -> None:
    scorer = create_answer_similarity_scorer()
    options = scorer.options_dict()
    assert (options["verdicts"], options["scoring"], options["extraction"]) == (
        "read",
        "expected",
        "split",
    )


# ------------------------------------------------------------------ reasons


def test_the_reason_lead_states_read_verdicts_and_leaves_generated_ones_alone() -> None:
    read = {"probabilities": {"yes": 0.9, "unsure": 0.05, "no": 0.05}}
    verdicts = [{"result": "yes", **read}, {"result": "no", **read}]
    assert relevancy_summary(verdicts, "en") == (
        "1 of 2 statements answer the question, 1 is off the topic"
    )
    assert relevancy_summary(verdicts[1:], "fr") == (
        "0 affirmation sur 1 répond à la question, 1 est hors sujet"
    )
    assert relevancy_summary([{"result": "yes", "reason": "judge's own"}], "en") == ""
    analysis = {
        "matches": [{"match_type": "exact", **read}, {"match_type": "missing", **read}],
        "extra_in_output": ["x"],
    }
    assert similarity_summary(analysis, "en") == (
        "1 of 2 reference facts is in the answer, 1 is missing, the answer adds 1 other statement"
    )


# ------------------------------------------------------------------ splitter


def test_splitter_keeps_sentences_and_numbers_whole() -> None:
    assert split_answer("Dr. Smith measured 3.5 kg. It rained!") == [
        "Dr. Smith measured 3.5 kg.",
        "It rained!",
    ]
    assert split_answer("   ") == []
    assert reference_groups("Paris / City of Light") == [["Paris", "City of Light"]]
    assert reference_groups(None, ["Andy Dwyer", "Andy"]) == [["Andy Dwyer", "Andy"]]


# ------------------------------------------------------------------ real parts


@pytest.mark.slow
def test_fit_tool_reproduces_the_shipped_slice_number_for_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The fit tool, rerun today on the file's slice, writes the numbers the file holds.

    Its ``main`` runs in this process, as ``python -m tools.fit_verdicts --check-slice``
    runs it: the same code and numbers, without a second interpreter importing torch and
    loading the sentence embedder again (the session's shared embedder serves it).
    """
    train = ROOT.parent / "shared" / "train-data"
    if not (train / "INDEX.md").is_file():  # CI and the dev machine have it beside the clone
        pytest.skip(f"the training pool is not at {train}: the slice cannot be refitted here")
    from tools.fit_verdicts import main

    shipped = ROOT / "models" / "smollm2-135m-instruct.verdicts.json"
    # Features, classes and structure exactly; numbers to 1e-3 of their size: the solver
    # stops at its tolerance, and an AVX-512 processor's arithmetic moves the sixth digit of
    # a few coefficients against the AVX2 one that wrote the file.
    status = main(["--check-slice", "--rel", "1e-3"])
    printed = capsys.readouterr()
    assert status == 0, printed.out + printed.err
    assert f"the same to 0.001 of each number to {shipped}" in printed.out, printed.out


def without_reason(scorer):  # type: ignore[no-untyped-def]
    """Scores and verdicts do not depend on the reason step; dropping it keeps tests short."""
    scorer.steps.pop("generate_reason", None)
    return scorer


def demo_rows() -> dict[str, dict[str, str]]:
    """The demo's rows that come with an answer, by id."""
    path = ROOT / "offline_scorer" / "demo_data.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {row["id"]: row for row in rows if row.get("output")}


@pytest.mark.slow
def test_read_verdicts_rank_the_demo_right_and_do_not_depend_on_the_batch() -> None:
    relevancy = without_reason(create_answer_relevancy_scorer())
    similarity = without_reason(create_answer_similarity_scorer())
    rows = demo_rows()
    runs = [{k: v for k, v in row.items() if k != "id"} for row in rows.values()]
    rel = dict(zip(rows, relevancy.run_batch(runs), strict=True))
    sim = dict(zip(rows, similarity.run_batch(runs), strict=True))
    # On every demo question the right or on-topic answer scores above the wrong one.
    assert sim["city-right"].score > sim["city-wrong"].score
    assert sim["capital-right"].score > sim["city-wrong"].score
    assert sim["egg-on-topic"].score > sim["egg-off-topic"].score
    assert rel["egg-on-topic"].score > rel["egg-off-topic"].score
    assert rel["capital-right"].score > rel["egg-off-topic"].score
    for result in rel.values():
        for verdict in result.analyze_step_result["results"]:
            assert abs(sum(verdict["probabilities"].values()) - 1) < 1e-3
    for result in sim.values():
        for match in result.analyze_step_result["matches"]:
            assert abs(sum(match["probabilities"].values()) - 1) < 1e-3
    for key, run in zip(rows, runs, strict=True):  # alone == inside the batch, every digit
        alone_rel = relevancy.run(**run)
        alone_sim = similarity.run(**run)
        assert alone_rel.analyze_step_result == rel[key].analyze_step_result
        assert alone_rel.score == rel[key].score
        assert alone_sim.analyze_step_result == sim[key].analyze_step_result
        assert alone_sim.score == sim[key].score


def test_the_embedded_card_tells_a_paraphrase_from_a_wrong_capital() -> None:
    """The real-judge issue's obvious pairs on the embedded card: two short sentences go to
    its sentence-pair model, which reads a reordered sentence as a match and a swapped name
    as a miss (one model over both gave 0.54, 0.42 and 0.43)."""
    similarity = without_reason(create_answer_similarity_scorer())
    paraphrase, milan, person = similarity.run_batch(
        [
            {
                "input": "What is the capital of France?",
                "output": "The capital of France is Paris.",
                "ground_truth": "Paris is the capital of France.",
            },
            {
                "input": "What is the capital of Italy?",
                "output": "The capital of Italy is Milan.",
                "ground_truth": "Rome is the capital of Italy.",
            },
            {
                "input": "Who was the first president of the United States?",
                "output": "Abraham Lincoln was the first president of the United States.",
                "ground_truth": "George Washington was the first president of the United States.",
            },
        ]
    )
    assert paraphrase.score >= 0.85
    assert milan.score <= 0.35
    assert person.score <= 0.35


@pytest.mark.slow
def test_raw_label_reads_from_a_real_forward_pass(judge) -> None:  # type: ignore[no-untyped-def]
    """A judge without a fitted verdict model can opt into its own label probabilities."""
    from offline_scorer.judges._cards import card_weights_path

    weights = card_weights_path(CARD)
    assert weights is not None
    scorer = without_reason(
        create_answer_relevancy_scorer(model=str(weights), verdicts="read", scoring="expected")
    )
    runs = [{"input": r["input"], "output": r["output"]} for r in list(demo_rows().values())[:3]]
    batch = scorer.run_batch(runs)
    for result in batch:
        assert result.error is None, result.error
        verdicts = result.analyze_step_result["results"]
        assert verdicts and all(abs(sum(v["probabilities"].values()) - 1) < 1e-3 for v in verdicts)
    alone = scorer.run(**runs[1])
    assert alone.analyze_step_result == batch[1].analyze_step_result


@pytest.mark.slow
def test_every_case_completes_with_read_verdicts_and_a_reason_that_states_the_score(
    judge,  # type: ignore[no-untyped-def]
) -> None:
    from cases import RELEVANCY_CASES, SIMILARITY_CASES

    for factory, cases in (
        (create_answer_relevancy_scorer, RELEVANCY_CASES),
        (create_answer_similarity_scorer, SIMILARITY_CASES),
    ):
        scorer = factory(judge=judge)
        assert scorer.options_dict()["verdicts"] == "read"
        runs = [dict(case, run_id=name) for name, case in cases.items()]
        for result in scorer.run_batch(runs):
            assert result.status == "scored", (result.run_id, result.error)
            assert 0 <= result.score <= 1
            shown = f"{result.score:.2f}".rstrip("0").rstrip(".")
            summary = (
                relevancy_summary(result.analyze_step_result["results"], "en")
                if "results" in result.analyze_step_result
                else similarity_summary(result.analyze_step_result, "en")
            )
            # The reason opens with the verdicts themselves: it cannot contradict them.
            lead = f"The score is {shown} because {summary}".rstrip()
            assert result.reason.startswith(lead), result.reason
            assert result.analyze_prompt is None  # no judge call for read verdicts
