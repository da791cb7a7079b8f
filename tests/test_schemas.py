"""What the constraint lets the judge write, validation accepts.

A constrained judge writes the JSON text that Outlines' regex of the schema admits; the
scorer then validates the decoded value with pydantic against the same schema. Any string
the first admits and the second rejects is a failed run that no model could avoid (found on
a real row: a statement with a quoted name, written as an escaped quote).

Real parts: Outlines' own schema-to-regex compiler (``outlines_core``, as the judge calls
it, compact whitespace), the scorers' own preprocess schemas, pydantic. No model is needed:
the property is about the two readings of one schema. The last test compiles real indexes
for the embedded model's tokenizer.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from outlines_core.json_schema import build_regex_from_schema
from pydantic import TypeAdapter, create_model

from offline_scorer import TransformersJudge
from offline_scorer.judges._keys import schema_text
from offline_scorer.judges.transformers._constraint import SchemaCompiler
from offline_scorer.scorers._answer_relevancy import statements_schema
from offline_scorer.scorers._answer_similarity import units_schema
from offline_scorer.scorers._common import text_item


def constraint_regex(schema: dict[str, Any]) -> str:
    """The regex the judge's constraint is built from (compact JSON, as in the judge)."""
    return build_regex_from_schema(json.dumps(schema), "")


@pytest.mark.parametrize("source", ["no underscore here", "snake_case in the source"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_item_the_constraint_admits_validates(source: str, data: st.DataObject) -> None:
    item = TypeAdapter(text_item(source))
    written = data.draw(st.from_regex(constraint_regex(item.json_schema()), fullmatch=True))
    value = json.loads(written)
    assert item.validate_python(value) == value


def test_a_quoted_word_is_written_plain_not_escaped() -> None:
    units = units_schema(2, 1, True)
    regex = constraint_regex(units.model_json_schema())
    escaped = (
        '{"output_units":["Jojo is a kangaroo called \\"Joey\\"."],'
        '"ground_truth_units":["A kangaroo."]}'
    )
    assert re.fullmatch(regex, escaped) is None  # the judge cannot write it ...
    plain = escaped.replace('\\"', "'")
    assert re.fullmatch(regex, plain)  # ... it writes this, which validates
    assert units.model_validate_json(plain).model_dump()["output_units"] == [
        "Jojo is a kangaroo called 'Joey'."
    ]
    statements = statements_schema(3)
    regex = constraint_regex(statements.model_json_schema())
    assert re.fullmatch(regex, '{"statements":["A \\\\ B."]}') is None
    assert re.fullmatch(regex, '{"statements":["A / B."]}')


def test_the_compiler_keeps_only_its_most_recently_used_indexes(judge: TransformersJudge) -> None:
    """With generated verdicts every similarity run has a schema of its own (it names the
    run's units), so an unbounded store grew by an index per run (about 15 MB each for the
    1.5B card's vocabulary)."""
    compiler = SchemaCompiler(judge.load().tokenizer, max_indexes=2)
    first, second, third = (
        schema_text(create_model(f"Run{n}", unit=(Literal[f"unit of run {n}"], ...)))
        for n in range(3)
    )
    kept_first = compiler.index_for(first)
    compiler.index_for(second)
    assert compiler.index_for(first) is kept_first  # reused, and now the most recent
    compiler.index_for(third)  # evicts the least recently used: the second
    assert (compiler.kept_count, compiler.compiled_count) == (2, 3)
    assert compiler.index_for(first) is kept_first
    compiler.index_for(second)  # compiled again
    assert (compiler.kept_count, compiler.compiled_count) == (2, 4)
