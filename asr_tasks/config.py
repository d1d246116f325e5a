"""Settings in one place: defaults, overridden by a YAML file, overridden by env vars.

The YAML file is ``include/config.yaml`` unless ``ASR_CONFIG`` names another one;
every field can be overridden by ``ASR_<FIELD>`` (``ASR_CHUNK_MAX_SECONDS=20``).
Relative paths are resolved against the project root, so the same settings work
from the CLI, from Airflow workers and from tests.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, ValidationError, field_validator
from pydantic.dataclasses import dataclass

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_FILE = PROJECT_ROOT / "include" / "config.yaml"
ENV_PREFIX = "ASR_"
# The Airflow Asset that transcribe_daily updates once a day is indexed (one event per call date).
TRANSCRIPTS_ASSET_URI = "asr://transcripts/daily"


# The choices of the settings that have a fixed set of them; validated whenever Settings are made.
StoreBackend = Literal["local", "minio"]
IndexBackend = Literal["sqlite", "elasticsearch"]
EsRefresh = Literal["wait_for", "true", "false"]
EnglishStemmer = Literal["porter", "hunspell"]
EngineName = Literal["ctranslate2", "transformers"]
ModelFamily = Literal["whisper", "qwen3_asr"]
Device = Literal["cpu", "cuda"]
ComputeType = Literal["default", "auto", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16",
                      "bfloat16", "float32"]
ReadyCheck = Literal["quiet", "marker"]


@dataclass(frozen=True, config=ConfigDict(extra="forbid"))
class Settings:
    """Every setting, typed: a value of the wrong type or outside its choices fails when Settings are made."""

    # storage
    store_backend: StoreBackend = "local"
    store_root: str = "var/store"
    recordings_bucket: str = "recordings"
    recordings_prefix: str = "calls"
    artefacts_bucket: str = "asr-artefacts"
    work_dir: str = "var/tmp"
    # MinIO (store_backend "minio"); inside Airflow tasks the connection minio_conn_id wins when it exists
    minio_endpoint: str = "localhost:9000"
    minio_access_key: str = ""
    minio_secret_key: str = ""
    minio_secure: bool = True
    minio_ca_bundle: str | None = None
    minio_region: str | None = None
    minio_conn_id: str | None = "asr_minio"
    store_retries: int = 5
    store_retry_backoff_seconds: float = 0.5
    # ledger: one row per recording version and its state
    ledger_url: str = "sqlite:///var/ledger.sqlite"
    # index
    index_backend: IndexBackend = "sqlite"
    index_path: str = "var/index.sqlite"
    # Elasticsearch (index_backend "elasticsearch"): API key, or user and password; TLS verified against es_ca_certs
    es_url: str = "http://localhost:9200"
    es_api_key: str | None = None
    es_username: str | None = None
    es_password: str | None = None
    es_ca_certs: str | None = None
    es_index_prefix: str = "asr"
    es_analyzer: str = "cjk"
    es_english_stemmer: EnglishStemmer = "porter"
    es_refresh: EsRefresh = "wait_for"
    es_request_timeout_seconds: float = 30.0
    es_max_retries: int = 5
    es_retry_backoff_seconds: float = 1.0
    # audio intake
    sample_rate: int = 16000
    max_duration_seconds: float = 6 * 3600.0
    max_size_bytes: int = 4 * 1024**3
    loudness_normalize: bool = True
    loudness_target_lufs: float = -23.0
    loudness_true_peak_db: float = -2.0
    loudness_two_pass_min_seconds: float = 60.0
    channel_speakers: dict[str, str] = field(
        default_factory=lambda: {"0": "agent", "1": "customer"}
    )
    mono_speaker: str = "mixed"
    # VAD
    vad_threshold: float = 0.5
    vad_min_silence_ms: int = 300
    vad_speech_pad_ms: int = 200
    chunk_max_seconds: float = 30.0
    chunk_overlap_seconds: float = 0.5
    # ASR
    engine: EngineName = "ctranslate2"
    model_dir: str = "var/models/whisper-base"
    device: Device = "cpu"
    compute_type: ComputeType = "int8"
    cpu_threads: int = 0
    language: str | None = None
    beam_size: int = 5
    shard_max_recordings: int = 500
    shard_max_bytes: int = 2 * 1024**3
    preprocess_workers: int = 0
    model_family: ModelFamily = "whisper"
    batch_size: int = 4
    pack_windows: bool = True
    pack_gap_seconds: float = 1.0
    max_tokens_per_second: float = 10.0
    # per language (its code) where it differs from max_tokens_per_second (bench/token_rates.py measures them)
    language_tokens_per_second: dict[str, str] = field(default_factory=lambda: {"zh": "12", "yue": "12"})
    # GPUs: the pool has gpu_count x streams_per_gpu slots; a task locks one (GPU, stream) under device_lock_dir
    gpu_count: int = 1
    streams_per_gpu: int = 1
    device_lock_dir: str = "var/locks"
    device_wait_seconds: float = 600.0
    # post-processing: steps per language ("*": any other) in order; word lists under include/
    postprocess_steps: dict[str, str] = field(
        default_factory=lambda: {"zh": "t2s,fillers,terms,itn", "en": "fillers,terms,itn", "*": "terms"}
    )
    fillers_file: str = "include/fillers.yaml"
    terms_dir: str = "include/terms"
    terms_as_hotwords: bool = True
    # quality gate: Great Expectations suites as JSON
    expectations_dir: str = "include/expectations"
    # Airflow
    gpu_pool: str = "gpu"
    # Celery queues (CeleryExecutor): preprocessing and indexing on default_queue, transcription on gpu_queue
    default_queue: str = "default"
    gpu_queue: str = "gpu"
    task_retries: int = 3
    retry_delay_seconds: int = 30
    max_retry_delay_seconds: int = 600
    dag_start_date: str = "2026-01-01"
    dag_catchup: bool = False
    dag_max_active_runs: int = 4
    # when a day's recordings are complete: "quiet" (no upload for ready_quiet_seconds after the day) or "marker"
    ready_check: ReadyCheck = "quiet"
    ready_marker: str = "_READY"
    ready_quiet_seconds: float = 0.0
    sensor_poke_seconds: float = 300.0
    sensor_timeout_seconds: float = 43200.0
    # QA audit
    qa_rules_dir: str = "include/qa_rules"
    search_url: str = "http://localhost:8091/"

    @field_validator("postprocess_steps")
    @classmethod
    def _known_steps(cls, table: dict[str, str]) -> dict[str, str]:
        from asr_tasks.postprocess import check_steps

        check_steps(table)
        return table

    def path(self, name: str) -> Path:
        """A path-valued setting, resolved against the project root."""
        value = Path(getattr(self, name))
        return value if value.is_absolute() else PROJECT_ROOT / value

    def speaker_for_channel(self, channel: int) -> str:
        return self.channel_speakers.get(str(channel), f"channel{channel}")

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class ConfigError(ValueError):
    """A setting that cannot be parsed; the message names the source."""


def _coerce(name: str, raw: Any, default: Any, annotation: str, source: str) -> Any:
    if raw is None:
        if "None" in annotation:
            return None
        raise ConfigError(f"{source}: {name} may not be empty")
    try:
        if isinstance(default, bool):
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ValueError(f"not a boolean: {raw!r}")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, dict):
            value = json.loads(raw) if isinstance(raw, str) else raw
            if not isinstance(value, dict):
                raise ValueError("expected a mapping")
            return {str(k): str(v) for k, v in value.items()}
        text = str(raw)
        return None if "None" in annotation and text.lower() in {"", "none", "null", "auto"} else text
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: bad value for {name}: {exc}") from exc


def load_settings(config_file: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None) -> Settings:
    """Build settings from defaults, the YAML file and the environment."""
    env = dict(os.environ if env is None else env)
    path = Path(config_file or env.get("ASR_CONFIG") or DEFAULT_CONFIG_FILE)
    from_file: dict[str, Any] = {}
    if path.exists():
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of settings")
        from_file = loaded
    elif config_file or env.get("ASR_CONFIG"):
        raise ConfigError(f"{path}: config file not found")

    defaults = Settings()
    known = {f.name: f for f in dataclasses.fields(Settings)}
    unknown = sorted(set(from_file) - set(known))
    if unknown:
        raise ConfigError(f"{path}: unknown settings {', '.join(unknown)}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, f in known.items():
        default = getattr(defaults, name)
        annotation = str(f.type)
        if name in from_file:
            values[name] = _coerce(name, from_file[name], default, annotation, str(path))
            sources[name] = str(path)
        env_name = ENV_PREFIX + name.upper()
        if env_name in env:
            values[name] = _coerce(name, env[env_name], default, annotation, f"env {env_name}")
            sources[name] = f"env {env_name}"
    try:
        return dataclasses.replace(defaults, **values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else "?"
            problems.append(f"{sources.get(name, 'settings')}: bad value for {name}: {values.get(name)!r}: "
                            f"{error['msg']}")
        raise ConfigError("; ".join(problems)) from exc


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once; tests call ``get_settings.cache_clear()``)."""
    return load_settings()
