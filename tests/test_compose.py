"""The production stack as written: docker-compose.yaml, .env.example, the Dockerfile and include/.

Docker is not needed: the compose file is parsed (anchors and merge keys resolved by
PyYAML) and checked for what makes the cluster start in order and run the DAGs as
designed, and for what must never be in it (literal secrets, floating image tags).
"""

from __future__ import annotations

import json
import re
import runpy
import secrets
import shlex
import subprocess
from pathlib import Path
from typing import Any, Iterator

import psycopg2
import pytest
import yaml
from sqlalchemy.engine import make_url

from asr_tasks.config import PROJECT_ROOT, SECTION_OF, Settings, load_settings
from asr_tasks.version import model_tag

COMPOSE_FILE = PROJECT_ROOT / "docker-compose.yaml"
ENV_EXAMPLE = PROJECT_ROOT / ".env.example"
DOCKERFILE = PROJECT_ROOT / "Dockerfile"
INCLUDE = PROJECT_ROOT / "include"
SETTINGS = Settings()

COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
VAR = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}")
SECRET_NAME = re.compile(r"PASSWORD|SECRET|FERNET|TOKEN|KEY$")
URL_PASSWORD = re.compile(r"://[^/:@\s]*:([^@\s]+)@")
# Kibana works with the bundled Elasticsearch only: the profile kibana goes with elasticsearch.
PROFILES_NEED = {frozenset({"kibana"}): {"elasticsearch"}}


def env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(ENV_EXAMPLE.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        assert sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", name), f"{ENV_EXAMPLE}:{number}: not NAME=value: {line!r}"
        values[name] = value
    return values


def resolve(text: str, values: dict[str, str]) -> str:
    """``${VAR}`` / ``${VAR:-default}`` as compose fills them from .env."""
    return VAR.sub(lambda m: values.get(m.group(1)) or (m.group(3) if m.group(2) in (":-", "-") else ""), text)


def strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment as a mapping"
    return {k: "" if v is None else str(v) for k, v in env.items()}


def command_args(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def airflow_services() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in SERVICES.items() if str(s.get("image", "")).startswith("asr-airflow")}


def workers() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in airflow_services().items() if command_args(s)[:2] == ["celery", "worker"]}


def option(args: list[str], name: str) -> str:
    assert args.count(name) == 1, f"{name} once in {args}"
    return args[args.index(name) + 1]


def gpu_devices(service: dict[str, Any]) -> list[dict[str, Any]]:
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    return [d for d in devices if "gpu" in d.get("capabilities", [])]


def service_settings(service: dict[str, Any]) -> Settings:
    """The project's settings inside a service, with .env as in .env.example."""
    example = env_example()
    return load_settings(env={k: resolve(v, example) for k, v in environment(service).items()})


def is_one_shot(service: dict[str, Any]) -> bool:
    return str(service.get("restart", "no")) == "no"


def test_the_stack_has_every_part_of_the_design() -> None:
    commands = {" ".join(command_args(s)[:2]) for s in airflow_services().values()}
    assert {"api-server", "scheduler", "dag-processor", "triggerer", "celery worker"} <= commands
    images = " ".join(str(s.get("image")) for s in SERVICES.values())
    for part in ("postgres:", "redis:", "minio/minio:", "minio/mc:", "elasticsearch:", "kibana:"):
        assert part in images, part


def test_every_long_running_service_has_a_healthcheck() -> None:
    for name, service in SERVICES.items():
        if is_one_shot(service):
            continue
        check = service.get("healthcheck")
        assert check and not check.get("disable") and check.get("test"), f"{name}: no healthcheck"
        assert check["test"][0] in ("CMD", "CMD-SHELL"), f"{name}: {check['test']}"


def test_depends_on_waits_for_health_or_completion() -> None:
    waited_to_complete = set()
    for name, service in SERVICES.items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on without conditions"
        for target, spec in depends.items():
            assert target in SERVICES, f"{name} depends on unknown {target}"
            condition = spec.get("condition")
            if condition == "service_healthy":
                assert "healthcheck" in SERVICES[target], f"{name} waits for {target}'s health, which it lacks"
            else:
                assert condition == "service_completed_successfully", f"{name} -> {target}: {condition}"
                assert is_one_shot(SERVICES[target]), f"{name} waits for {target} to finish, but it restarts"
                waited_to_complete.add(target)
            if spec.get("required") is False:
                assert SERVICES[target].get("profiles"), f"{name}: optional {target} should be in a profile"
            elif SERVICES[target].get("profiles"):
                profiles = set(service.get("profiles", []))
                assert set(SERVICES[target]["profiles"]) <= profiles | PROFILES_NEED.get(frozenset(profiles), set()), (
                    f"{name} requires {target}, which a profile can switch off: use required: false"
                )
    one_shots = {n for n, s in SERVICES.items() if is_one_shot(s)}
    assert one_shots == waited_to_complete, "every one-shot job is something another service waits for"


def test_profiles_of_the_bundled_services_are_enabled_by_default_and_kibana_is_not() -> None:
    profiles = {p for s in SERVICES.values() for p in s.get("profiles", [])}
    assert profiles == {"minio", "elasticsearch", "kibana"}
    assert set(env_example()["COMPOSE_PROFILES"].split(",")) == {"minio", "elasticsearch"}
    assert SERVICES["kibana"]["profiles"] == ["kibana"]
    assert [n for n, s in SERVICES.items() if "kibana" in s.get("profiles", [])] == ["kibana"]


def es_setup_requests(tmp_path: Path) -> list[list[str]]:
    """es-setup's script run by bash as compose hands it over, with a curl that records its arguments."""
    script = resolve(command_args(SERVICES["es-setup"])[-1], env_example()).replace("$$", "$")
    for volume in SERVICES["es-setup"]["volumes"]:
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            script = script.replace(target, str(PROJECT_ROOT / source))
    (tmp_path / "bin").mkdir()
    curl = tmp_path / "bin" / "curl"
    curl.write_text('#!/bin/bash\nshopt -s nullglob; calls=("$CALLS"/*)\n'
                    'printf "%s\\0" "$@" > "$CALLS/$(printf %03d ${#calls[@]})"\n')
    curl.chmod(0o755)
    calls = tmp_path / "calls"
    calls.mkdir()
    env = {k: resolve(v, env_example()) or "x" for k, v in environment(SERVICES["es-setup"]).items()}
    proc = subprocess.run(["bash", "-c", script], env={**env, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
                                                       "CALLS": str(calls)},
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return [call.read_text().rstrip("\0").split("\0") for call in sorted(calls.iterdir())]


def test_es_setup_gives_kibanas_users_a_role_that_reads_no_document(tmp_path: Path) -> None:
    """The role es-setup puts for Kibana's users is the file's, on the configured prefix: monitor only, no read."""
    role_file = INCLUDE / "elasticsearch" / "kibana-viewer-role.json"
    role = json.loads(role_file.read_text(encoding="utf-8"))
    assert set(role) == {"description", "cluster", "indices"} and role["cluster"] == ["monitor"]
    assert role["indices"] == [{"names": ["@ES_INDEX_PREFIX@-*"], "privileges": ["monitor"]}]

    requests = es_setup_requests(tmp_path)
    [put] = [r for r in requests if any(a.endswith("/_security/role/asr_kibana_viewer") for a in r)]
    assert put[put.index("-X") + 1] == "PUT"
    prefix = env_example()["ES_INDEX_PREFIX"]
    sent = json.loads(put[put.index("-d") + 1])
    assert sent == json.loads(role_file.read_text(encoding="utf-8").replace("@ES_INDEX_PREFIX@", prefix))
    used = {resolve(environment(s)["ASR_ES_INDEX_PREFIX"], env_example()) for s in airflow_services().values()}
    assert sent["indices"][0]["names"] == [f"{prefix}-*"] and used == {prefix}, "the indices the pipeline writes"
    # The pipeline's role and user are put by the same script; nothing else gets a role.
    roles = [a.rsplit("/", 1)[-1] for r in requests for a in r if "/_security/role/" in a]
    assert roles == ["asr_pipeline", "asr_kibana_viewer"]


def test_the_sign_in_cookie_is_secure_unless_a_plain_http_lab_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """webserver_config.py as FAB reads it (after Airflow's [fab] cookie_* options, so it decides)."""
    config = INCLUDE / "airflow" / "webserver_config.py"
    for name, service in airflow_services().items():
        assert environment(service)["AIRFLOW_COOKIE_SECURE"] == "${AIRFLOW_COOKIE_SECURE:-true}", name
    assert env_example()["AIRFLOW_COOKIE_SECURE"] == "true"
    monkeypatch.delenv("AIRFLOW_LDAP_SERVER", raising=False)
    monkeypatch.delenv("AIRFLOW_COOKIE_SECURE", raising=False)
    flask = runpy.run_path(str(config))
    assert (flask["SESSION_COOKIE_SECURE"], flask["SESSION_COOKIE_HTTPONLY"], flask["SESSION_COOKIE_SAMESITE"]) == (
        True, True, "Lax")
    for value, secure in (("true", True), ("false", False), ("FALSE", False), ("", True)):
        monkeypatch.setenv("AIRFLOW_COOKIE_SECURE", value)
        assert runpy.run_path(str(config))["SESSION_COOKIE_SECURE"] is secure, value


def test_every_published_port_listens_on_loopback_unless_told_otherwise() -> None:
    example = env_example()
    assert example["ASR_PUBLISH_ADDRESS"] == "127.0.0.1"
    published = 0
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert isinstance(port, str), f"{name}: {port!r} in the short syntax"
            assert re.fullmatch(r"\$\{ASR_PUBLISH_ADDRESS:-127\.0\.0\.1\}:\$\{[A-Z_]+_PORT\}:\d+", port), name
            assert resolve(port, {**example, "ASR_PUBLISH_ADDRESS": ""}).startswith("127.0.0.1:"), name
            published += 1
    assert published == 5


def test_airflow_runs_on_celery_everywhere() -> None:
    services = airflow_services()
    assert len(services) >= 8
    api = next(n for n, s in services.items() if command_args(s)[:1] == ["api-server"])
    for name, service in services.items():
        env = environment(service)
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor", name
        assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://"), name
        assert env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql+psycopg2://"), name
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://"), name
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == f"http://{api}:8080/execution/", name
        # One key for all: the api-server signs what the scheduler and workers present.
        for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API__SECRET_KEY"):
            assert env[key] == environment(services[api])[key], (name, key)


def test_queues_match_the_settings() -> None:
    queues: dict[str, set[str]] = {}
    for name, service in workers().items():
        queue = option(command_args(service), "--queues")
        queues.setdefault(queue, set()).add(name)
        assert "," not in queue, f"{name}: one queue per worker kind"
    assert set(queues) == {SETTINGS.airflow.default_queue, SETTINGS.airflow.gpu_queue}
    for name, service in airflow_services().items():
        env = environment(service)
        assert env["AIRFLOW__OPERATORS__DEFAULT_QUEUE"] == SETTINGS.airflow.default_queue, name
        assert env.get("ASR_DEFAULT_QUEUE", SETTINGS.airflow.default_queue) == SETTINGS.airflow.default_queue, name
        assert env.get("ASR_GPU_QUEUE", SETTINGS.airflow.gpu_queue) == SETTINGS.airflow.gpu_queue, name
    for name in queues[SETTINGS.airflow.default_queue]:
        assert not gpu_devices(SERVICES[name]), f"{name}: a CPU worker holds no GPU"


def test_one_gpu_worker_per_gpu() -> None:
    gpu_workers = {
        n: s for n, s in workers().items() if option(command_args(s), "--queues") == SETTINGS.airflow.gpu_queue
    }
    assert len(gpu_workers) >= 2
    visible = []
    for name, service in gpu_workers.items():
        env = environment(service)
        devices = gpu_devices(service)
        assert devices and devices[0]["driver"] == "nvidia", f"{name}: no NVIDIA device reservation"
        assert re.fullmatch(r"\d+", env["CUDA_VISIBLE_DEVICES"]), f"{name}: one GPU per worker"
        assert env["ASR_DEVICE"] == "cuda", name
        settings = service_settings(service)
        assert settings.asr.gpu_count == 1, f"{name}: sees one GPU"
        concurrency = int(option(command_args(service), "--concurrency"))
        assert concurrency == settings.asr.gpu_count * settings.asr.streams_per_gpu, f"{name}: one task per GPU stream"
        assert service["build"]["args"]["TORCH_VARIANT"], f"{name}: the CUDA torch build"
        visible.append(env["CUDA_VISIBLE_DEVICES"])
    assert len(set(visible)) == len(visible), f"two workers on one GPU: {visible}"

    pools = json.loads((INCLUDE / "airflow" / "pools.json").read_text(encoding="utf-8"))
    slots = sum(int(option(command_args(s), "--concurrency")) for s in gpu_workers.values())
    assert pools[SETTINGS.airflow.gpu_pool]["slots"] == slots, "the gpu pool has one slot per GPU worker task"
    for name, service in airflow_services().items():
        assert environment(service).get("ASR_GPU_POOL", SETTINGS.airflow.gpu_pool) == SETTINGS.airflow.gpu_pool, name


def test_models_are_mounted_read_only_everywhere() -> None:
    for name, service in airflow_services().items():
        mounts = [v for v in service.get("volumes", []) if isinstance(v, str) and v.split(":")[1] == "/models"]
        assert mounts, f"{name}: no models mount"
        for mount in mounts:
            assert mount.split(":")[0] == "${MODELS_DIR}" and mount.endswith(":ro"), f"{name}: {mount}"
        assert environment(service)["ASR_MODEL_DIR"].startswith("/models/"), name
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            if "MODELS_DIR" in str(volume):
                assert str(volume).endswith(":ro"), f"{name}: {volume}"


def test_no_secret_is_written_in_the_compose_file() -> None:
    example = env_example()
    secret_vars = set()
    for name, service in SERVICES.items():
        for key, value in environment(service).items():
            if SECRET_NAME.search(key) and not key.endswith(("ACCESS_KEY", "_FILE")):
                assert value and not VAR.sub("", value), f"{name}: {key} is not taken from .env: {value!r}"
                secret_vars.update(m.group(1) for m in VAR.finditer(value))
            for password in URL_PASSWORD.findall(value):
                assert not VAR.sub("", password), f"{name}: {key} has a literal password in its URL"
                secret_vars.update(m.group(1) for m in VAR.finditer(password))
    assert len(secret_vars) >= 10
    for var in secret_vars:
        assert example[var] == "", f".env.example ships a value for the secret {var}"
        uses = [m for text in strings(COMPOSE) for m in VAR.finditer(text) if m.group(1) == var]
        assert not any(m.group(2) in (":-", "-") for m in uses), f"{var}: a secret has no default"
        assert any(m.group(2) == ":?" for m in uses), f"{var}: compose should refuse to start without it"


def test_env_example_defines_exactly_the_variables_used() -> None:
    example = env_example()
    used = {m.group(1) for text in strings(COMPOSE) for m in VAR.finditer(text)}
    assert used - set(example) == set(), "used in docker-compose.yaml but not in .env.example"
    assert set(example) - used - {"COMPOSE_PROFILES"} == set(), "in .env.example but used nowhere"


def test_image_tags_are_pinned() -> None:
    example = env_example()
    for name, service in SERVICES.items():
        image = resolve(str(service["image"]), example)
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert tag != "latest" and re.search(r"\d", tag), f"{name}: {image} is not pinned"
    froms = re.findall(r"^FROM\s+(\S+)", DOCKERFILE.read_text(encoding="utf-8"), re.MULTILINE)
    airflow = re.search(r"^apache-airflow==(\S+)$", (PROJECT_ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert airflow and froms == [f"apache/airflow:slim-{airflow.group(1)}-python3.11"]


def test_the_image_has_ffmpeg_the_pinned_requirements_and_a_gpu_variant() -> None:
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"apt-get install .*\bffmpeg\b", dockerfile)
    assert re.search(r"pip install .*-r requirements\.txt -r requirements-transformers\.txt -c /tmp/constraints\.txt",
                     dockerfile)
    assert "ARG TORCH_VARIANT=cpu" in dockerfile
    example = env_example()
    builds = {resolve(str(s["build"].get("args", {}).get("TORCH_VARIANT", "cpu")), example)
              for s in airflow_services().values()}
    assert "cpu" in builds and any(re.fullmatch(r"cu\d+", b) for b in builds), builds


def test_airflow_init_loads_pools_and_connections_from_include() -> None:
    init = SERVICES["airflow-init"]
    script = " ".join(command_args(init))
    assert "airflow db migrate" in script
    assert "airflow pools import /opt/asr/include/airflow/pools.json" in script
    assert "/opt/asr/include/airflow/connections.json" in script and "airflow connections import" in script

    pools = json.loads((INCLUDE / "airflow" / "pools.json").read_text(encoding="utf-8"))
    for name, pool in pools.items():
        assert isinstance(pool["slots"], int) and pool["slots"] > 0 and pool["description"], name
    template = (INCLUDE / "airflow" / "connections.json").read_text(encoding="utf-8")
    assert json.loads(template)[SETTINGS.storage.minio_conn_id]["host"]
    needed = {m.group(1) for m in VAR.finditer(template)}
    assert needed and needed <= set(environment(init)), needed - set(environment(init))


def test_buckets_created_are_the_buckets_used() -> None:
    def source(value: str) -> set[str]:
        return {m.group(1) for m in VAR.finditer(value)}

    created = environment(SERVICES["minio-init"])
    for name, service in airflow_services().items():
        env = environment(service)
        for used, made in (("ASR_RECORDINGS_BUCKET", "RECORDINGS_BUCKET"), ("ASR_ARTEFACTS_BUCKET", "ARTEFACTS_BUCKET"),
                           ("ASR_MINIO_ACCESS_KEY", "MINIO_ASR_ACCESS_KEY"),
                           ("ASR_MINIO_SECRET_KEY", "MINIO_ASR_SECRET_KEY")):
            assert source(env[used]) == source(created[made]) != set(), (name, used)


def test_every_asr_variable_is_a_setting() -> None:
    fields = {f"ASR_{key.upper()}" for key in SECTION_OF}
    for name, service in airflow_services().items():
        unknown = {k for k in environment(service) if k.startswith("ASR_")} - fields
        assert not unknown, f"{name}: {sorted(unknown)} are not settings"
    env = environment(SERVICES["airflow-worker"])
    assert env["ASR_STORE_BACKEND"] == "minio" and env["ASR_INDEX_BACKEND"] == "elasticsearch"
    assert env["ASR_LEDGER_URL"].startswith("postgresql+psycopg2://")


def test_transcripts_are_written_and_read_under_the_same_model_tag() -> None:
    """GPU workers write transcript.<model tag>.json; CPU workers read it back to index it."""
    tags = {name: model_tag(service_settings(s).asr) for name, s in airflow_services().items()}
    assert len(set(tags.values())) == 1, tags
    settings = service_settings(SERVICES["airflow-worker"])
    assert (settings.asr.engine, settings.asr.device, settings.asr.model_dir) == ("transformers", "cuda", "/models/qwen3-asr-0.6b")
    assert settings.asr.aligner_dir == "/models/qwen3-forced-aligner-0.6b"  # Qwen3-ASR words get their times


def test_ledger_database_script_creates_its_role_and_database(postgres_server: str) -> None:
    """include/postgres/10-asr-ledger.sh against the test PostgreSQL, with awkward characters in the password."""
    name = f"asr_ledger_{secrets.token_hex(4)}"
    port = str(make_url(postgres_server).port)
    env = {"PATH": "/usr/bin:/bin", "PGHOST": "127.0.0.1", "PGPORT": port, "POSTGRES_USER": "postgres",
           "POSTGRES_DB": "postgres", "ASR_DB_USER": name, "ASR_DB_NAME": name, "ASR_DB_PASSWORD": "it's \"quoted\""}
    script = INCLUDE / "postgres" / "10-asr-ledger.sh"
    mount = next(v for v in SERVICES["postgres"]["volumes"] if "10-asr-ledger.sh" in v)
    assert mount.startswith("./include/postgres/10-asr-ledger.sh:/docker-entrypoint-initdb.d/")
    try:
        proc = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        conn = psycopg2.connect(postgres_server)
        try:
            with conn.cursor() as cur:
                cur.execute("select pg_get_userbyid(datdba) from pg_database where datname = %s", (name,))
                assert cur.fetchall() == [(name,)]
                cur.execute("select rolcanlogin, rolpassword is not null from pg_authid where rolname = %s", (name,))
                assert cur.fetchall() == [(True, True)]
        finally:
            conn.close()
    finally:
        for sql in (f'drop database if exists "{name}"', f'drop role if exists "{name}"'):
            subprocess.run(["psql", postgres_server, "-c", sql],
                           capture_output=True, timeout=60)


def test_the_filled_in_env_file_stays_out_of_version_control_and_images() -> None:
    assert ".env" in (PROJECT_ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert ".env" in (PROJECT_ROOT / ".dockerignore").read_text(encoding="utf-8").split()


def test_the_stack_waits_for_a_day_to_be_complete() -> None:
    """A quiet period after the day (the embedded default of 0 would sense at midnight and miss late uploads)."""
    for name, service in airflow_services().items():
        storage = service_settings(service).storage
        assert storage.ready_check == "marker" or storage.ready_quiet_seconds >= 900, name
        assert storage.resense_days >= 1, name


def test_the_stack_signs_in_through_fab_and_creates_the_search_pages_roles() -> None:
    """FAB's auth manager everywhere; airflow-init declares the page's resource, then its roles, then the admin."""
    for name, service in airflow_services().items():
        env = environment(service)
        assert env["AIRFLOW__CORE__AUTH_MANAGER"].endswith("fab_auth_manager.FabAuthManager"), name
        assert env["AIRFLOW__FAB__CONFIG_FILE"] == "/opt/asr/include/airflow/webserver_config.py", name
    script = command_args(SERVICES["airflow-init"])[-1]
    steps = [line.strip() for line in script.splitlines() if "sync-perm" in line or "users create" in line]
    assert steps[0] == "airflow sync-perm" and steps[1] == 'AIRFLOW__FAB__CUSTOM_ROLES="$$(asr roles)" airflow sync-perm'
    assert "--role Admin" in steps[2]
