# Two commands for a new user: `make demo` (set up + run the daily DAG on a
# synthetic day + search) and `make test`. Everything lands under var/ and .venv/.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_DATE ?= 2026-11-27
PIP_QUIET := -q --disable-pip-version-check

export AIRFLOW_HOME := $(CURDIR)/var/airflow
export AIRFLOW__CORE__DAGS_FOLDER := $(CURDIR)/dags
export AIRFLOW__CORE__PLUGINS_FOLDER := $(CURDIR)/plugins
export AIRFLOW__CORE__LOAD_EXAMPLES := False
export AIRFLOW__CORE__EXECUTOR := LocalExecutor
# timeout: how long a process waits for another's write to the SQLite file (Python's default, 5 s, is short
# for a scheduler, a DAG processor and tasks writing at once on two cores).
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN := sqlite:///$(CURDIR)/var/airflow/airflow.db?timeout=60
export HF_HUB_OFFLINE := 1
export PYTHONWARNINGS := ignore

.PHONY: demo test test-celery lint docs setup test-setup system-deps test-system-deps venv test-venv test-services model \
	airflow-init standalone standalone-stop clean

demo: setup airflow-init
	@echo "== writing the demo corpus for $(DEMO_DATE)"
	@$(BIN)/asr demo-corpus --date $(DEMO_DATE)
	@echo "== running the transcribe_daily DAG for $(DEMO_DATE) (log: var/demo-dag.log)"
	@$(BIN)/airflow dags test transcribe_daily $(DEMO_DATE) > var/demo-dag.log 2>&1 \
	  || { tail -n 60 var/demo-dag.log; exit 1; }
	@echo "== status"
	@$(BIN)/asr status --date $(DEMO_DATE)
	@echo "== search: ask not what your country"
	@$(BIN)/asr search "ask not what your country"
	@echo "== search: guarantee"
	@$(BIN)/asr search "guarantee"
	@echo "== search: policy number (agent AG-1002 only)"
	@$(BIN)/asr search "policy number" --agent AG-1002
	@echo "== QA audit of $(DEMO_DATE) (the qa_audit_nightly DAG)"
	@$(BIN)/airflow dags test qa_audit_nightly $(DEMO_DATE) > var/demo-audit.log 2>&1 \
	  || { tail -n 60 var/demo-audit.log; exit 1; }
	@$(BIN)/asr audit --date $(DEMO_DATE)
	@echo "== the call page of the stereo call (start the page with: $(BIN)/asr ui)"
	@$(BIN)/asr search "minimum deposit" --limit 1 --urls
	@echo "== progress of $(DEMO_DATE)"
	@$(BIN)/asr progress --from $(DEMO_DATE) --to $(DEMO_DATE) --by day

test: setup test-setup
	$(BIN)/python -m pytest

# ruff (F, B, SIM) over the code, mypy over the library (settings in pyproject.toml).
lint: test-venv
	$(BIN)/ruff check asr_tasks dags plugins
	$(BIN)/mypy

# docs/ as a MkDocs site (mkdocs.yml) in var/site/; --strict: a broken link or anchor, or a page outside the nav, fails it.
# NO_MKDOCS_2_WARNING: mkdocs-material's notice about its successor, printed on every build, is not a build warning.
docs: export NO_MKDOCS_2_WARNING := 1
docs: $(VENV)/.installed-docs
	$(BIN)/mkdocs build --strict

# Airflow on CeleryExecutor against PostgreSQL and Redis servers the tests start: a DAG run, a backfill with a fault (about 4-5 minutes).
test-celery: setup test-setup
	$(BIN)/python -m pytest -m celery -s

setup: system-deps venv model

# What the tests need beyond the demo: the dev and transformers requirements (torch), the servers' Debian
# packages, the Elasticsearch distribution (mvn) and the MinIO server (go install), cached under var/test-services/.
test-setup: test-system-deps test-venv test-services

# Debian packages, installed when one of their commands or files is missing: apt-get install <packages>.
apt_install = SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO apt-get update -qq \
	&& DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(1) >/dev/null

system-deps:
	@missing=""; for tool in ffmpeg ffprobe espeak-ng; do command -v $$tool >/dev/null || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  echo "== installing ffmpeg and espeak-ng (apt)"; $(call apt_install,ffmpeg espeak-ng); \
	fi

test-system-deps:
	@missing=""; for tool in chromium redis-server openssl; do command -v $$tool >/dev/null || missing=1; done; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing=1; \
	[ -f /usr/share/hunspell/en_US.dic ] || missing=1; \
	[ -f /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || missing=1; \
	if [ -n "$$missing" ]; then \
	  echo "== installing chromium and CJK fonts, PostgreSQL, Redis and the en_US hunspell dictionary (apt; test servers and browser)"; \
	  $(call apt_install,chromium fonts-noto-cjk postgresql redis-server hunspell-en-us openssl); \
	fi
	@for tool in mvn go java; do command -v $$tool >/dev/null || { echo "$$tool is missing: the test servers need Maven, Go and a JDK 21+"; exit 1; }; done

venv: $(VENV)/.installed

# The embedded default's packages only: no torch, no transformers.
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	@echo "== creating $(VENV) (pinned requirements)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_QUIET) --upgrade pip 2> >(grep -v "is ignored" >&2)
	$(BIN)/pip install $(PIP_QUIET) -r requirements.txt -c constraints.txt 2> >(grep -v "is ignored" >&2)
	$(BIN)/pip install $(PIP_QUIET) --no-deps -e . 2> >(grep -v "is ignored" >&2)
	touch $@

test-venv: $(VENV)/.installed-test

# The site's two packages alone: `make docs` needs neither the test servers nor torch.
$(VENV)/.installed-docs: $(VENV)/.installed requirements-docs.txt constraints.txt
	$(BIN)/pip install $(PIP_QUIET) -r requirements-docs.txt -c constraints.txt 2> >(grep -v "is ignored" >&2)
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-dev.txt requirements-docs.txt requirements-transformers.txt \
  constraints.txt
	@echo "== adding the test and transformers requirements to $(VENV) (torch from PyPI: a CUDA build, several GB)"
	$(BIN)/pip install $(PIP_QUIET) -r requirements.txt -r requirements-dev.txt -r requirements-transformers.txt \
	  -c constraints.txt 2> >(grep -v "is ignored" >&2)
	touch $@

test-services: test-venv
	@$(BIN)/python tests/services.py prepare

model: venv
	@$(BIN)/asr install-model

airflow-init: venv
	@mkdir -p var/airflow
	@$(BIN)/airflow db migrate > var/airflow/db-migrate.log 2>&1 || { tail -n 30 var/airflow/db-migrate.log; exit 1; }
	@$(BIN)/asr pools --apply > /dev/null

# Airflow on this machine (include/airflow/standalone.py): scheduler, DAG processor, triggerer and API server,
# one LocalExecutor worker per core, every port on 127.0.0.1. One Ctrl-C, or `make standalone-stop` from another
# terminal, stops every process it started (exec: the script is make's child and gets make's SIGTERM too).
standalone: setup airflow-init
	exec $(BIN)/python include/airflow/standalone.py

standalone-stop:
	@$(BIN)/python include/airflow/standalone.py stop

clean:
	rm -rf var
