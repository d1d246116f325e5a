"""Settings in sections, one per part: defaults, overridden by a YAML file, overridden by env vars.

The YAML file is ``include/config.yaml`` unless ``ASR_CONFIG`` names another one;
it has one mapping per section (``storage:``, ``index:``, ...), and a key may also
stand at the top level, since every key is unique across sections. Every key can
be overridden by ``ASR_<KEY>`` (``ASR_CHUNK_MAX_SECONDS=20``). Everything is
validated when it loads: an unknown key, a wrong type or a value outside its
choices fails with the source, the key, the value and what is allowed. Each part
of the library receives its own section; only the pipeline and the DAGs, which
wire the parts together, see the whole. Relative paths are resolved against the
project root, so the same settings work from the CLI, from Airflow workers and
from tests.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from dataclasses import field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import yaml
from pydantic import ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic.dataclasses import dataclass

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG_FILE = PROJECT_ROOT / "include" / "config.yaml"
ENV_PREFIX = "ASR_"
# The Airflow Asset that transcribe_daily updates once a day is indexed (one event per call date).
TRANSCRIPTS_ASSET_URI = "asr://transcripts/daily"
# Values of an optional setting, given as text (env), that mean "not set".
NONE_WORDS = {"", "none", "null", "auto"}


# Post-processing steps (``text.postprocess`` runs them) and the languages that have an ITN.
POSTPROCESS_STEPS = ("t2s", "fillers", "terms", "itn")
ITN_LANGUAGES = ("en", "zh")
# Settings that moved or went: where a file or the environment still names them, the load fails and says so.
MOVED = {
    "quality.search_url": "web.search_url",
    "quality.qa_rules_dir": "audit.qa_rules_dir",
}
GONE = {
    "sample_rate": "audio is always decoded to 16 kHz, the rate the VAD and the models are made for; remove it",
    "minio_public_url": "browsers no longer fetch audio from MinIO: the search app serves every byte, so that "
                        "each request is logged; remove it",
    "loudness_two_pass_min_seconds": "every recording's channels get one linear gain from one BS.1770 measurement, "
                                     "whatever their length; remove it",
}

def regular_expression(pattern: str) -> str:
    """A setting's pattern, refused at start-up (with why) when it is not a regular expression."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from exc
    return pattern


# The choices of the settings that have a fixed set of them; validated whenever a section is made.
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
AttnImplementation = Literal["sdpa", "eager", "flash_attention_2"]
GenerationCache = Literal["dynamic", "static"]

_STRICT = ConfigDict(extra="forbid")


class _Section:
    """What every section can do with its own values."""

    def path(self, name: str) -> Path:
        """A path-valued setting of this section, resolved against the project root."""
        value = Path(getattr(self, name))
        return value if value.is_absolute() else PROJECT_ROOT / value


@dataclass(frozen=True, config=_STRICT)
class StorageSettings(_Section):
    """Object storage: where recordings arrive and work products are kept, and when a day is complete."""

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
    # when a day's recordings are complete: "quiet" (no upload for ready_quiet_seconds after the day) or "marker"
    ready_check: ReadyCheck = "quiet"
    ready_marker: str = "_READY"
    ready_quiet_seconds: float = 0.0
    # the run of a day also takes recordings that arrived late for this many days before it
    resense_days: int = 1
    # "bucket/prefix" -> days a recording is kept (by its call date); the longest matching prefix wins; none: kept
    retention_days: dict[str, int] = field(default_factory=dict)
    retention_batch: int = 200  # recordings erased per batch of the retention DAG
    erase_source: bool = True  # an erasure also removes the recording (and its sidecar) from its bucket
    # MinIO's object locking (records/locking.py): every object of a recording kept until its retention ends
    # (governance: an erasure through the product may end it early; compliance: nobody may) and under MinIO's
    # legal hold while one of the product's holds covers it; the access log's anchors kept anchor_retention_days
    object_lock: bool = False
    object_lock_mode: Literal["governance", "compliance"] = "governance"
    anchor_retention_days: int = 3653
    # the Ed25519 key signing the anchors, outside the ledger's database: made on first use, or a mounted secret
    anchor_key_file: str = "var/keys/access-log-anchor.pem"
    anchor_public_key_file: str | None = None  # none: anchor_key_file + ".pub"
    # the shape a sidecar's agent_id and customer_id must have to be kept (a whole match); a value of another
    # shape (a phone number, a card, a name) is not stored anywhere. The default: 1-64 letters, digits and
    # ._:- with at least one letter, or a number of at most 6 digits; a longer number (a phone, an account,
    # a card) is refused: a bank whose ids are long numbers declares their shape (C\d{8}, say).
    party_id_pattern: str = r"(?=[^A-Za-z]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9._:-]{0,63}|\d{1,6}"

    @field_validator("party_id_pattern")
    @classmethod
    def _party_pattern(cls, pattern: str) -> str:
        return regular_expression(pattern)

    @field_validator("retention_days")
    @classmethod
    def _retention_rules(cls, rules: dict[str, int]) -> dict[str, int]:
        for where, days in rules.items():
            if "/" not in where or not where.split("/", 1)[0]:
                raise ValueError(f"{where!r}: a retention rule names bucket/prefix (e.g. recordings/calls/)")
            if days < 1:
                raise ValueError(f"{where!r}: {days} days; a recording is kept at least one day")
        return rules

    @field_validator("retention_batch", "anchor_retention_days")
    @classmethod
    def _positive_batch(cls, batch: int) -> int:
        if batch < 1:
            raise ValueError(f"{batch}: at least one")
        return batch

    @field_validator("object_lock")
    @classmethod
    def _lockable(cls, lock: bool, info: ValidationInfo) -> bool:
        backend = info.data.get("store_backend")
        if lock and backend != "minio":
            raise ValueError(f"the {backend} store cannot lock objects (a folder has no write-once retention or "
                             "legal hold); object locking needs store_backend: minio")
        return lock


@dataclass(frozen=True, config=_STRICT)
class LedgerSettings(_Section):
    """The ledger: one row per recording version and its state."""

    ledger_url: str = "sqlite:///var/ledger.sqlite"
    erasure_key_file: str = ""  # signs erasure tokens: a mounted secret; "": made beside the ledger (erasure.py)


@dataclass(frozen=True, config=_STRICT)
class IndexSettings(_Section):
    """The search view: an SQLite FTS5 file or Elasticsearch."""

    index_backend: IndexBackend = "sqlite"
    index_path: str = "var/index.sqlite"
    # Elasticsearch (index_backend "elasticsearch"): API key, or user and password; TLS verified against es_ca_certs
    es_url: str = "http://localhost:9200"
    es_api_key: str | None = None
    es_username: str | None = None
    es_password: str | None = None
    es_ca_certs: str | None = None
    es_index_prefix: str = "asr"
    es_analyzer: str = "standard"
    es_english_stemmer: EnglishStemmer = "porter"
    es_refresh: EsRefresh = "wait_for"
    es_request_timeout_seconds: float = 30.0
    es_max_retries: int = 5
    es_retry_backoff_seconds: float = 1.0


@dataclass(frozen=True, config=_STRICT)
class AudioSettings(_Section):
    """Audio intake, loudness, channels and the VAD that cuts speech into chunks."""

    max_duration_seconds: float = 6 * 3600.0
    max_size_bytes: int = 4 * 1024**3
    max_channels: int = 8
    loudness_normalize: bool = True
    loudness_target_lufs: float = -23.0
    loudness_true_peak_db: float = -2.0
    channel_speakers: dict[str, str] = field(default_factory=lambda: {"0": "agent", "1": "customer"})
    mono_speaker: str = "mixed"
    vad_threshold: float = 0.5
    vad_min_silence_ms: int = 300
    vad_speech_pad_ms: int = 200
    chunk_max_seconds: float = 30.0
    chunk_overlap_seconds: float = 0.5

    def speaker_for_channel(self, channel: int) -> str:
        return self.channel_speakers.get(str(channel), f"channel{channel}")


@dataclass(frozen=True, config=_STRICT)
class AsrSettings(_Section):
    """The engine: model, device, decoding and packing; everything fixed when a model loads."""

    engine: EngineName = "ctranslate2"
    model_dir: str = "var/models/whisper-base"
    model_family: ModelFamily = "whisper"
    # Qwen3-ForcedAligner weights (local folder) that give Qwen3-ASR's words their times; "": no word times
    aligner_dir: str = ""
    device: Device = "cpu"
    compute_type: ComputeType = "int8"
    cpu_threads: int = 0
    language: str | None = None
    beam_size: int = 5
    batch_size: int = 4
    pack_windows: bool = True
    pack_gap_seconds: float = 1.0
    # transformers engine: the attention kernels of every model it loads; flash_attention_2 needs flash-attn and CUDA
    attn_implementation: AttnImplementation = "sdpa"
    # transformers engine, Qwen3-ASR: "static" preallocates the KV cache and compiles the decoding step (CUDA only)
    generation_cache: GenerationCache = "dynamic"
    max_tokens_per_second: float = 10.0
    # per language (its code) where it differs from max_tokens_per_second (bench/token_rates.py measures them)
    language_tokens_per_second: dict[str, float] = field(default_factory=lambda: {"zh": 12.0, "yue": 12.0})
    # GPUs: gpu_count x streams_per_gpu slots; a task locks one (GPU, stream) under device_lock_dir
    # speech per engine call of a transcription task, written when done: the most a crash costs
    checkpoint_speech_seconds: float = 1800.0
    gpu_count: int = 1
    streams_per_gpu: int = 1
    device_lock_dir: str = "var/locks"
    device_wait_seconds: float = 600.0


@dataclass(frozen=True, config=_STRICT)
class PostprocessSettings(_Section):
    """Post-processing steps per language ("*": any other) in order, and their word lists under include/."""

    postprocess_steps: dict[str, str] = field(
        default_factory=lambda: {"zh": "t2s,fillers,terms,itn", "en": "fillers,terms,itn", "*": "terms"}
    )
    fillers_file: str = "include/fillers.yaml"
    terms_dir: str = "include/terms"
    terms_as_hotwords: bool = True
    # personal data (include/pii/*.yaml: kinds, patterns, masks) masked in every transcript before it is stored
    redact_pii: bool = True
    pii_dir: str = "include/pii"
    # also store each transcript as it was before masking (never indexed, read through a privileged path only)
    keep_unredacted: bool = False
    pii_audio_margin_seconds: float = 0.25  # added before and after each masked span in the redacted audio

    @field_validator("postprocess_steps")
    @classmethod
    def _known_steps(cls, table: dict[str, str]) -> dict[str, str]:
        """Every step of every language exists, and ITN only where there is one."""
        for language, raw in table.items():
            steps = postprocess_step_names(raw)
            unknown = [s for s in steps if s not in POSTPROCESS_STEPS]
            if unknown:
                raise ValueError(f"postprocess_steps[{language}]: unknown step(s) {', '.join(unknown)} "
                                 f"(known: {', '.join(POSTPROCESS_STEPS)})")
            if "itn" in steps and language not in ITN_LANGUAGES:
                raise ValueError(f"postprocess_steps[{language}]: no itn for this language "
                                 f"(have: {', '.join(ITN_LANGUAGES)})")
        return table


def postprocess_step_names(raw: str) -> list[str]:
    """The steps of one language's ``postprocess_steps`` entry, in order."""
    return [s.strip() for s in raw.split(",") if s.strip()]


@dataclass(frozen=True, config=_STRICT)
class QualitySettings(_Section):
    """The quality gate's Great Expectations suites."""

    expectations_dir: str = "include/expectations"


@dataclass(frozen=True, config=_STRICT)
class AuditSettings(_Section):
    """The nightly QA audit's rule files, the scorecard it fills for every call ("" for none), and the directory
    of teams (which agents each has, who leads it)."""

    qa_rules_dir: str = "include/qa_rules"
    scorecard: str = "include/scorecards/default.yaml"
    teams: str = "include/teams.yaml"


@dataclass(frozen=True, config=_STRICT)
class WebSettings(_Section):
    """The search page: where people reach it (audit reports and ``asr search --urls`` link there)."""

    search_url: str = "http://localhost:8091/"


@dataclass(frozen=True, config=_STRICT)
class AirflowSettings(_Section):
    """How the DAGs divide and schedule the work: shards, pool, queues, retries, runs and the sensor."""

    shard_max_recordings: int = 500
    shard_max_bytes: int = 2 * 1024**3
    preprocess_workers: int = 0
    gpu_pool: str = "gpu"
    # Celery queues (CeleryExecutor): preprocessing and indexing on default_queue, transcription on gpu_queue
    default_queue: str = "default"
    gpu_queue: str = "gpu"
    task_retries: int = 3
    retry_delay_seconds: int = 30
    max_retry_delay_seconds: int = 600
    task_timeout_seconds: float = 6 * 3600.0  # every task's execution_timeout: a hung task fails and is retried
    dag_start_date: str = "2026-01-01"
    dag_catchup: bool = False
    dag_max_active_runs: int = 4
    sensor_poke_seconds: float = 300.0
    sensor_timeout_seconds: float = 43200.0


SECTIONS: dict[str, type] = {
    "storage": StorageSettings, "ledger": LedgerSettings, "index": IndexSettings, "audio": AudioSettings,
    "asr": AsrSettings, "postprocess": PostprocessSettings, "quality": QualitySettings, "audit": AuditSettings,
    "web": WebSettings, "airflow": AirflowSettings,
}
# Every key names its section (keys are unique across sections, so ASR_<KEY> needs no section).
SECTION_OF: dict[str, str] = {f.name: name for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)}


@dataclass(frozen=True, config=_STRICT)
class Settings:
    """All sections; the pipeline and the DAGs hand each part its own."""

    storage: StorageSettings = field(default_factory=StorageSettings)
    ledger: LedgerSettings = field(default_factory=LedgerSettings)
    index: IndexSettings = field(default_factory=IndexSettings)
    audio: AudioSettings = field(default_factory=AudioSettings)
    asr: AsrSettings = field(default_factory=AsrSettings)
    postprocess: PostprocessSettings = field(default_factory=PostprocessSettings)
    quality: QualitySettings = field(default_factory=QualitySettings)
    audit: AuditSettings = field(default_factory=AuditSettings)
    web: WebSettings = field(default_factory=WebSettings)
    airflow: AirflowSettings = field(default_factory=AirflowSettings)

    def override(self, **values: Any) -> Settings:
        """These settings with some keys changed (by key, whatever their section), validated like a load."""
        by_section: dict[str, dict[str, Any]] = {}
        for key, value in values.items():
            if key not in SECTION_OF:
                raise ConfigError(f"override: unknown setting {key!r}")
            by_section.setdefault(SECTION_OF[key], {})[key] = value
        sections = {name: _make_section(name, {**dataclasses.asdict(getattr(self, name)), **changed},
                                        dict.fromkeys(changed, "override"))
                    for name, changed in by_section.items()}
        return dataclasses.replace(self, **sections)

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)


class ConfigError(ValueError):
    """A setting that cannot be parsed or is not allowed; the message names the source."""


def _field_types(section: str) -> dict[str, Any]:
    return get_type_hints(SECTIONS[section])


def _from_text(key: str, raw: str) -> Any:
    """An env value (always text) as the type its setting expects, where pydantic would not read it from text."""
    kind = _field_types(SECTION_OF[key])[key]
    if type(None) in get_args(kind) and raw.strip().lower() in NONE_WORDS:
        return None
    if get_origin(kind) is dict:
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON mapping: {exc}") from exc
    return raw


def _from_yaml(key: str, raw: Any) -> Any:
    """A YAML value: numbers and dates where text is expected are text; mappings of text keep text keys and values."""
    kind = _field_types(SECTION_OF[key])[key]
    if kind == dict[str, str] and isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    text_kind = kind is str or (str in get_args(kind) and raw is not None)
    if text_kind and not isinstance(raw, (str, bool, dict, list)):
        return str(raw)
    return raw


def _make_section(name: str, values: dict[str, Any], sources: dict[str, str]) -> Any:
    try:
        return SECTIONS[name](**values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = str(error["loc"][0]) if error["loc"] else "?"
            problems.append(f"{sources.get(key, 'settings')}: bad value for {key}: "
                            f"{values.get(key)!r}: {error['msg']}")
        raise ConfigError("; ".join(problems)) from exc


def _file_values(path: Path, loaded: Any) -> dict[str, Any]:
    """The YAML file's keys, by key, whether written in their section or at the top level."""
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    flat: dict[str, Any] = {}
    for top, value in loaded.items():
        if top in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: section {top} must be a mapping of settings")
            for key, inner in value.items():
                if f"{top}.{key}" in MOVED:
                    raise ConfigError(f"{path}: {top}.{key} is now {MOVED[f'{top}.{key}']}: move it there")
                if key in GONE:
                    raise ConfigError(f"{path}: {top}.{key} is no setting any more: {GONE[key]}")
                if SECTION_OF.get(key) != top:
                    allowed = ", ".join(f.name for f in dataclasses.fields(SECTIONS[top]))
                    raise ConfigError(f"{path}: unknown setting {top}.{key} (the {top} section has: {allowed})")
                flat[key] = inner
        elif top in SECTION_OF:
            flat[top] = value
        elif top in GONE:
            raise ConfigError(f"{path}: {top} is no setting any more: {GONE[top]}")
        else:
            raise ConfigError(f"{path}: unknown settings {top} (sections: {', '.join(SECTIONS)})")
    return flat


def load_settings(config_file: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None) -> Settings:
    """Build settings from defaults, the YAML file and the environment; invalid ones fail here."""
    env = dict(os.environ if env is None else env)
    path = Path(config_file or env.get("ASR_CONFIG") or DEFAULT_CONFIG_FILE)
    from_file: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        from_file = _file_values(path, loaded or {})
    elif config_file or env.get("ASR_CONFIG"):
        raise ConfigError(f"{path}: config file not found")

    gone = [f"env {ENV_PREFIX}{key.upper()} is no setting any more: {why}" for key, why in GONE.items()
            if ENV_PREFIX + key.upper() in env]
    if gone:
        raise ConfigError("; ".join(gone))
    unknown_env = sorted(k for k in env if k.startswith(ENV_PREFIX) and k != "ASR_CONFIG"
                         and k.removeprefix(ENV_PREFIX).lower() not in SECTION_OF)
    if unknown_env:  # warned, not refused: deployment files also keep their own ASR_* variables
        log.warning("environment: %s %s (ASR_<KEY> takes a key that `asr config` lists)", ", ".join(unknown_env),
                    "is not a setting" if len(unknown_env) == 1 else "are not settings")
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    sources: dict[str, str] = {}
    for key, section in SECTION_OF.items():
        if key in from_file:
            values[section][key] = _from_yaml(key, from_file[key])
            sources[key] = str(path)
        env_name = ENV_PREFIX + key.upper()
        if env_name in env:
            sources[key] = f"env {env_name}"
            try:
                values[section][key] = _from_text(key, env[env_name])
            except ValueError as exc:
                raise ConfigError(f"env {env_name}: bad value for {key}: {env[env_name]!r}: {exc}") from exc
    problems: list[str] = []
    sections: dict[str, Any] = {}
    for name, given in values.items():
        try:
            sections[name] = _make_section(name, given, sources)
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))
    return Settings(**sections)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once; tests call ``get_settings.cache_clear()``)."""
    return load_settings()
