"""Settings: defaults < YAML file < ASR_* environment variables."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from asr_tasks.config import DEFAULT_CONFIG_FILE, PROJECT_ROOT, ConfigError, Settings, load_settings


def write_yaml(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    s = Settings()
    assert s.audio.chunk_max_seconds == 30.0
    assert s.audio.loudness_normalize is True
    assert s.asr.language is None
    assert s.audio.channel_speakers == {"0": "agent", "1": "customer"}
    assert s.audio.max_size_bytes == 4 * 1024**3
    assert s.storage.store_backend == "local"


def test_default_dict_is_not_shared_between_instances() -> None:
    a, b = Settings(), Settings()
    assert a.audio.channel_speakers == b.audio.channel_speakers
    assert a.audio.channel_speakers is not b.audio.channel_speakers


def test_empty_yaml_gives_defaults(tmp_path: Path) -> None:
    assert load_settings(config_file=write_yaml(tmp_path, ""), env={}) == Settings()


def test_shipped_config_file_matches_defaults() -> None:
    """include/config.yaml documents the defaults; it must not silently change them."""
    assert DEFAULT_CONFIG_FILE.is_file()
    assert load_settings(env={}) == Settings()


def test_yaml_overrides_defaults(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path,
        "chunk_max_seconds: 20\n"
        "language: en\n"
        "loudness_normalize: false\n"
        "beam_size: 2\n"
        "channel_speakers: {'0': rep, '1': caller}\n",
    )
    s = load_settings(config_file=path, env={})
    assert s.audio.chunk_max_seconds == 20.0 and isinstance(s.audio.chunk_max_seconds, float)
    assert s.asr.language == "en"
    assert s.audio.loudness_normalize is False
    assert s.asr.beam_size == 2
    assert s.audio.channel_speakers == {"0": "rep", "1": "caller"}
    # untouched fields keep their defaults
    assert s.audio.vad_threshold == Settings().audio.vad_threshold
    assert s.asr.engine == Settings().asr.engine


def test_yaml_null_for_optional_field(tmp_path: Path) -> None:
    s = load_settings(config_file=write_yaml(tmp_path, "language: null\n"), env={})
    assert s.asr.language is None


def test_env_overrides_yaml(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "chunk_max_seconds: 20\nlanguage: en\nbeam_size: 2\n")
    s = load_settings(config_file=path, env={"ASR_CHUNK_MAX_SECONDS": "12.5", "ASR_LANGUAGE": "zh"})
    assert s.audio.chunk_max_seconds == 12.5
    assert s.asr.language == "zh"
    assert s.asr.beam_size == 2  # from YAML, not overridden


def test_env_overrides_defaults_without_yaml_value(tmp_path: Path) -> None:
    s = load_settings(config_file=write_yaml(tmp_path, ""), env={"ASR_GPU_POOL": "gpus"})
    assert s.airflow.gpu_pool == "gpus"


def test_asr_config_env_names_the_file(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "beam_size: 3\n", name="other.yaml")
    assert load_settings(env={"ASR_CONFIG": str(path)}).asr.beam_size == 3


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("Yes", True), ("on", True), ("0", False), ("false", False), ("NO", False), ("off", False)],
)
def test_env_bool_coercion(tmp_path: Path, raw: str, expected: bool) -> None:
    s = load_settings(config_file=write_yaml(tmp_path, ""), env={"ASR_LOUDNESS_NORMALIZE": raw})
    assert s.audio.loudness_normalize is expected


def test_env_int_float_coercion(tmp_path: Path) -> None:
    env = {"ASR_BEAM_SIZE": "8", "ASR_VAD_THRESHOLD": "0.35", "ASR_MAX_DURATION_SECONDS": "60"}
    s = load_settings(config_file=write_yaml(tmp_path, ""), env=env)
    assert s.asr.beam_size == 8 and type(s.asr.beam_size) is int
    assert s.audio.vad_threshold == 0.35 and type(s.audio.vad_threshold) is float
    assert s.audio.max_duration_seconds == 60.0 and type(s.audio.max_duration_seconds) is float


def test_env_dict_coercion(tmp_path: Path) -> None:
    s = load_settings(config_file=write_yaml(tmp_path, ""), env={"ASR_CHANNEL_SPEAKERS": '{"0":"a","1":"b"}'})
    assert s.audio.channel_speakers == {"0": "a", "1": "b"}
    assert s.audio.speaker_for_channel(1) == "b"
    assert s.audio.speaker_for_channel(5) == "channel5"


def test_dict_values_become_strings(tmp_path: Path) -> None:
    s = load_settings(config_file=write_yaml(tmp_path, "channel_speakers: {0: 7, 1: customer}\n"), env={})
    assert s.audio.channel_speakers == {"0": "7", "1": "customer"}


@pytest.mark.parametrize("raw", ["auto", "none", "null", "", "AUTO"])
def test_env_none_coercion(tmp_path: Path, raw: str) -> None:
    path = write_yaml(tmp_path, "language: en\n")
    assert load_settings(config_file=path, env={"ASR_LANGUAGE": raw}).asr.language is None


def test_unknown_yaml_key_names_file_and_key(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "beam_size: 2\nchunk_max_secs: 10\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=path, env={})
    assert str(path) in str(err.value)
    assert "chunk_max_secs" in str(err.value)


def test_bad_yaml_value_names_file_and_field(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "beam_size: five\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=path, env={})
    assert str(path) in str(err.value)
    assert "beam_size" in str(err.value)


def test_empty_yaml_value_for_required_field(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "beam_size:\n")
    with pytest.raises(ConfigError, match="beam_size") as err:
        load_settings(config_file=path, env={})
    assert str(path) in str(err.value)


@pytest.mark.parametrize(
    ("var", "raw"),
    [
        ("ASR_BEAM_SIZE", "abc"),
        ("ASR_VAD_THRESHOLD", "half"),
        ("ASR_LOUDNESS_NORMALIZE", "maybe"),
        ("ASR_CHANNEL_SPEAKERS", "{not json"),
        ("ASR_CHANNEL_SPEAKERS", '["agent", "customer"]'),
    ],
)
def test_bad_env_value_names_the_variable(tmp_path: Path, var: str, raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=write_yaml(tmp_path, ""), env={var: raw})
    assert var in str(err.value)


def test_yaml_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "- beam_size\n- 2\n")
    with pytest.raises(ConfigError, match="mapping") as err:
        load_settings(config_file=path, env={})
    assert str(path) in str(err.value)


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=missing, env={})
    assert str(missing) in str(err.value)


def test_path_resolves_relative_against_project_root(tmp_path: Path) -> None:
    s = Settings()
    assert s.storage.path("store_root") == PROJECT_ROOT / "var" / "store"
    assert s.index.path("index_path").is_absolute()
    s2 = load_settings(config_file=write_yaml(tmp_path, f"work_dir: {tmp_path / 'w'}\n"), env={})
    assert s2.storage.path("work_dir") == tmp_path / "w"


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().asr.beam_size = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("var", "raw", "allowed"),
    [
        ("ASR_ENGINE", "ctranslate3", "'ctranslate2' or 'transformers'"),
        ("ASR_ES_REFRESH", "sometimes", "'wait_for', 'true' or 'false'"),
        ("ASR_DEVICE", "tpu", "'cpu' or 'cuda'"),
        ("ASR_INDEX_BACKEND", "solr", "'sqlite' or 'elasticsearch'"),
        ("ASR_STORE_BACKEND", "s3", "'local' or 'minio'"),
        ("ASR_READY_CHECK", "maybe", "'quiet' or 'marker'"),
        ("ASR_MODEL_FAMILY", "wav2vec", "'whisper' or 'qwen3_asr'"),
        ("ASR_ES_ENGLISH_STEMMER", "snowball", "'porter' or 'hunspell'"),
    ],
)
def test_a_value_outside_its_choices_fails_at_load(tmp_path: Path, var: str, raw: str, allowed: str) -> None:
    (tmp_path / "empty.yaml").write_text("")
    with pytest.raises(ConfigError) as err:
        load_settings(tmp_path / "empty.yaml", env={var: raw})
    name = var.removeprefix("ASR_").lower()
    assert str(err.value) == f"env {var}: bad value for {name}: {raw!r}: Input should be {allowed}"


def test_a_misspelt_postprocess_step_fails_at_load_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("postprocess_steps: {zh: 't2s,filers,itn', en: terms}\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={})
    assert f"{path}: bad value for postprocess_steps" in str(err.value)
    assert "postprocess_steps[zh]: unknown step(s) filers (known: t2s, fillers, terms, itn)" in str(err.value)


def test_settings_made_in_code_are_validated_too() -> None:
    with pytest.raises(ValueError, match="device"):
        Settings().override(device="tpu")  # type: ignore[arg-type]


def test_keys_live_in_their_sections(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "asr:\n  beam_size: 2\naudio:\n  chunk_max_seconds: 12\nindex_backend: sqlite\n")
    s = load_settings(config_file=path, env={})
    assert (s.asr.beam_size, s.audio.chunk_max_seconds, s.index.index_backend) == (2, 12.0, "sqlite")
    assert load_settings(config_file=path, env={"ASR_BEAM_SIZE": "3"}).asr.beam_size == 3  # env still wins


@pytest.mark.parametrize(("text", "message"), [
    ("asr:\n  chunk_max_seconds: 12\n", "unknown setting asr.chunk_max_seconds (the asr section has: engine,"),
    ("asr:\n  beam_width: 2\n", "unknown setting asr.beam_width"),
    ("audio: 16000\n", "section audio must be a mapping"),
    ("speech:\n  vad_threshold: 0.4\n", "unknown settings speech (sections: storage, ledger, index, audio, asr,"),
])
def test_a_key_outside_its_section_fails_at_load(tmp_path: Path, text: str, message: str) -> None:
    path = write_yaml(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=path, env={})
    assert str(err.value).startswith(f"{path}: {message}")


def test_override_validates_like_a_load() -> None:
    s = Settings().override(device="cuda", chunk_max_seconds=12)
    assert (s.asr.device, s.audio.chunk_max_seconds, s.asr.engine) == ("cuda", 12.0, "ctranslate2")
    with pytest.raises(ConfigError, match="bad value for device: 'tpu'"):
        Settings().override(device="tpu")
    with pytest.raises(ConfigError, match="unknown setting 'devices'"):
        Settings().override(devices="cuda")


def test_an_env_variable_that_names_no_setting_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    load_settings(config_file=write_yaml(tmp_path, ""), env={"ASR_ENGNE": "transformers", "ASR_CONFIG": ""})
    assert "ASR_ENGNE is not a setting" in caplog.text and "ASR_CONFIG" not in caplog.text


def test_each_section_holds_only_its_own_keys() -> None:
    """Every key belongs to exactly one section, so ASR_<KEY> needs no section in its name."""
    from asr_tasks.config import SECTION_OF, SECTIONS

    keys = [f.name for cls in SECTIONS.values() for f in dataclasses.fields(cls)]
    assert len(keys) == len(set(keys)) == len(SECTION_OF)
    assert set(Settings().as_dict()) == set(SECTIONS)


def test_a_moved_setting_fails_at_load_and_names_its_new_place(tmp_path: Path) -> None:
    """A file written for the earlier layout is refused with the key's new section, not silently half-read."""
    for old, new in (("quality:\n  search_url: https://asr.intranet/\n", "quality.search_url is now web.search_url"),
                     ("quality:\n  qa_rules_dir: rules\n", "quality.qa_rules_dir is now audit.qa_rules_dir")):
        with pytest.raises(ConfigError, match=new.replace(".", r"\.")):
            load_settings(config_file=write_yaml(tmp_path, old), env={})
    s = load_settings(config_file=write_yaml(tmp_path, "web:\n  search_url: https://asr.intranet/\n"),
                      env={"ASR_QA_RULES_DIR": "rules"})
    assert s.web.search_url == "https://asr.intranet/" and s.audit.qa_rules_dir == "rules"


def test_the_sample_rate_is_no_setting_and_saying_one_fails() -> None:
    """16 kHz is what the VAD and the models take: a configured rate would be a promise the code cannot keep."""
    with pytest.raises(ConfigError, match="ASR_SAMPLE_RATE is no setting any more: audio is always decoded to 16 kHz"):
        load_settings(env={"ASR_SAMPLE_RATE": "8000"})


def test_the_two_pass_loudness_length_is_no_setting_and_saying_it_fails(tmp_path: Path) -> None:
    """Every recording gets one measured linear gain now: a file that still sets the length is told so."""
    old = "audio:\n  loudness_two_pass_min_seconds: 60\n"
    with pytest.raises(ConfigError, match=r"audio\.loudness_two_pass_min_seconds is no setting any more: every"):
        load_settings(config_file=write_yaml(tmp_path, old), env={})
    with pytest.raises(ConfigError, match="ASR_LOUDNESS_TWO_PASS_MIN_SECONDS is no setting any more"):
        load_settings(env={"ASR_LOUDNESS_TWO_PASS_MIN_SECONDS": "60"})


def test_per_language_token_rates_are_numbers(tmp_path: Path) -> None:
    s = load_settings(config_file=write_yaml(tmp_path, "language_tokens_per_second: {zh: 14}\n"),
                      env={"ASR_MAX_TOKENS_PER_SECOND": "9"})
    assert s.asr.language_tokens_per_second == {"zh": 14.0}
    with pytest.raises(ConfigError, match="language_tokens_per_second"):
        load_settings(config_file=write_yaml(tmp_path, "language_tokens_per_second: {zh: fast}\n"), env={})


def test_a_config_file_that_is_not_yaml_names_the_file(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "audio:\n  vad_threshold: [0.5\n")
    with pytest.raises(ConfigError, match=f"{path}: not valid YAML"):
        load_settings(config_file=path, env={})
