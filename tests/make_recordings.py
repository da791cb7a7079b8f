"""Record real judge answers for the replay tests (run after changing prompts, schemas or
anything that changes what the judge is asked, such as the extraction fact check).

    .venv/bin/python tests/make_recordings.py

Writes tests/recordings/scorers.json (the judge answers) and tests/recordings/expected.json
(the scores and reasons those answers give), both read by tests/test_replay_scorers.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cases import RELEVANCY_CASES, SIMILARITY_CASES  # noqa: E402

from offline_scorer import (  # noqa: E402
    RecordingJudge,
    TransformersJudge,
    create_answer_relevancy_scorer,
    create_answer_similarity_scorer,
)


def main() -> None:
    recording = HERE / "recordings" / "scorers.json"
    recording.unlink(missing_ok=True)
    judge = RecordingJudge(TransformersJudge(), recording)
    expected: dict[str, dict[str, object]] = {}
    # The replay tests pin the reference's procedure: the judge writes statements, units and
    # verdicts (the embedded card's default reads verdicts and calls the judge only for reasons).
    generated = {"verdicts": "generate", "extraction": "model"}
    for scorer, cases in (
        (create_answer_relevancy_scorer(judge=judge, **generated), RELEVANCY_CASES),
        (create_answer_similarity_scorer(judge=judge, **generated), SIMILARITY_CASES),
    ):
        runs = [dict(case, run_id=name) for name, case in cases.items()]
        for result in scorer.run_batch(runs):
            expected[f"{scorer.id}/{result.run_id}"] = {
                "status": result.status,
                "score": result.score,
                "reason": result.reason,
                "error": result.error,
            }
    (HERE / "recordings" / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(json.dumps(expected, indent=1))


if __name__ == "__main__":
    main()
