# The Airflow image of the production stack: Airflow 3.3.2 on Python 3.11, ffmpeg, and the
# project with its pinned requirements. TORCH_VARIANT picks the torch build: "cpu" for the
# api-server, scheduler, dag-processor, triggerer and CPU workers, a CUDA build for the GPU
# workers (docker-compose.yaml builds both):
#   docker build -t asr-airflow:0.1.0 .
#   docker build --build-arg TORCH_VARIANT=cu128 -t asr-airflow-gpu:0.1.0 .
FROM apache/airflow:slim-3.3.2-python3.11

USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends ffmpeg \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/asr \
 && chown airflow:0 /opt/asr

USER airflow
ARG TORCH_VARIANT=cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1
WORKDIR /opt/asr

# The tested set of packages; only torch's local version follows TORCH_VARIANT (+cpu, +cu128, ...).
COPY --chown=airflow:0 requirements.txt requirements-transformers.txt constraints.txt ./
RUN sed -E "s/^torch==([^+]+).*/torch==\1+${TORCH_VARIANT}/" constraints.txt > /tmp/constraints.txt \
 && pip install --no-cache-dir -r requirements.txt -r requirements-transformers.txt -c /tmp/constraints.txt \
      --extra-index-url "${TORCH_INDEX_URL}/${TORCH_VARIANT}" \
 && rm /tmp/constraints.txt

# Installed in place (editable), so the project root is /opt/asr: include/, dags/ and relative
# settings resolve there. The models are not in the image: they are mounted read-only at /models.
COPY --chown=airflow:0 pyproject.toml README.md ./
COPY --chown=airflow:0 asr_tasks ./asr_tasks
COPY --chown=airflow:0 dags ./dags
COPY --chown=airflow:0 plugins ./plugins
COPY --chown=airflow:0 include ./include
RUN pip install --no-cache-dir --no-deps -e . \
 && mkdir -p /opt/asr/var /opt/airflow/auth
