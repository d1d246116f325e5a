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
export AIRFLOW__DATABASE__SQL_ALCHEMY_CONN := sqlite:///$(CURDIR)/var/airflow/airflow.db
export HF_HUB_OFFLINE := 1
export PYTHONWARNINGS := ignore

.PHONY: demo test test-celery setup system-deps venv model airflow-init standalone clean

demo: setup airflow-init
	@echo "== writing the demo corpus for $(DEMO_DATE)"
	$(BIN)/asr demo-corpus --date $(DEMO_DATE)
	@echo "== running the transcribe_daily DAG for $(DEMO_DATE) (log: var/demo-dag.log)"
	@$(BIN)/airflow dags test transcribe_daily $(DEMO_DATE) > var/demo-dag.log 2>&1 \
	  || { tail -n 60 var/demo-dag.log; exit 1; }
	@grep -E "state=|DagRun Finished|quarantined" var/demo-dag.log | tail -n 12 || true
	@echo "== status"
	$(BIN)/asr status --date $(DEMO_DATE)
	@echo "== search: ask not what your country"
	$(BIN)/asr search "ask not what your country"
	@echo "== search: guarantee"
	$(BIN)/asr search "guarantee"
	@echo "== search: policy number (agent AG-1002 only)"
	$(BIN)/asr search "policy number" --agent AG-1002
	@echo "== QA audit of $(DEMO_DATE) (the qa_audit_nightly DAG)"
	@$(BIN)/airflow dags test qa_audit_nightly $(DEMO_DATE) > var/demo-audit.log 2>&1 \
	  || { tail -n 60 var/demo-audit.log; exit 1; }
	$(BIN)/asr audit --date $(DEMO_DATE)

test: setup
	$(BIN)/python -m pytest

# Airflow on CeleryExecutor against the local PostgreSQL and Redis (about 3-4 minutes).
test-celery: setup
	$(BIN)/python -m pytest -m celery -s

setup: system-deps venv model

system-deps:
	@missing=""; for tool in ffmpeg ffprobe espeak-ng chromium; do command -v $$tool >/dev/null || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  echo "== installing ffmpeg, espeak-ng and chromium (apt; chromium drives the search page's browser test)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq ffmpeg espeak-ng chromium >/dev/null; \
	fi

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt constraints.txt pyproject.toml
	@echo "== creating $(VENV) (pinned requirements, CPU torch)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_QUIET) --upgrade pip 2> >(grep -v "is ignored" >&2)
	$(BIN)/pip install $(PIP_QUIET) -r requirements.txt -r requirements-dev.txt -c constraints.txt 2> >(grep -v "is ignored" >&2)
	$(BIN)/pip install $(PIP_QUIET) --no-deps -e . 2> >(grep -v "is ignored" >&2)
	touch $@

model: venv
	@$(BIN)/asr install-model

airflow-init: venv
	@mkdir -p var/airflow
	@$(BIN)/airflow db migrate > var/airflow/db-migrate.log 2>&1 || { tail -n 30 var/airflow/db-migrate.log; exit 1; }
	@$(BIN)/asr pools --apply > /dev/null

standalone: setup airflow-init
	$(BIN)/airflow standalone

clean:
	rm -rf var
