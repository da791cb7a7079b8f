"""Reports of an evaluation: results JSONL, summary JSON, JUnit XML and the HTML report."""
