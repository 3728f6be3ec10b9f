"""Static checks of docker-compose.yml and deploy/ (there is no Docker engine or Kubernetes
here): services, healthchecks, start order, secrets that fail fast, shared checkpoints."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DEPLOY = REPO / "deploy"
SECRETS = ("POSTGRES_PASSWORD", "JIGSAW_ADMIN_TOKEN", "RAY_AUTH_TOKEN")

_VARIABLE = re.compile(
    r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:\?|:-|\?|-)(?P<arg>[^}]*))?\}"
)


class MissingVariable(Exception):
    pass


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's interpolation rules for ${VAR}, ${VAR:-default} and ${VAR:?error}."""

    def substitute(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        value = env.get(name)
        if op in (":?", "?") and (value is None or (op == ":?" and value == "")):
            raise MissingVariable(f"{name}: {arg}")
        if op in (":-", "-") and (value is None or (op == ":-" and value == "")):
            return arg
        return value or ""

    return _VARIABLE.sub(substitute, text)


def compose(env: dict[str, str]) -> dict[str, Any]:
    loaded = yaml.safe_load(interpolate(COMPOSE.read_text(), env))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return compose(
        {
            "POSTGRES_PASSWORD": "s3cret-pw-from-env",
            "JIGSAW_ADMIN_TOKEN": "tok-from-env",
            "RAY_AUTH_TOKEN": "ray-tok-from-env",
        }
    )


def command_of(service: dict[str, Any]) -> str:
    command = service["command"]
    return command if isinstance(command, str) else " ".join(command)


def test_compose_has_the_four_services_with_healthchecks(spec: dict[str, Any]) -> None:
    services = spec["services"]
    assert set(services) >= {"postgres", "api", "ray-head", "ray-worker"}
    for name in ("postgres", "api", "ray-head", "ray-worker"):
        check = services[name]["healthcheck"]["test"]
        assert check[0] in ("CMD", "CMD-SHELL") and len(check) > 1, name
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    assert "/readyz" in " ".join(services["api"]["healthcheck"]["test"])


def test_start_order_waits_for_health_not_just_start(spec: dict[str, Any]) -> None:
    services = spec["services"]
    assert services["api"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "ray-head": {"condition": "service_healthy"},
    }
    assert services["ray-worker"]["depends_on"] == {"ray-head": {"condition": "service_healthy"}}
    for name, service in services.items():
        for dependency, rule in service.get("depends_on", {}).items():
            if rule.get("condition") == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits on {dependency}"


def test_api_migrates_then_serves_on_the_ray_cluster(spec: dict[str, Any]) -> None:
    api = spec["services"]["api"]
    command = command_of(api)
    assert command.index("alembic") < command.index("upgrade head") < command.index("serve")
    assert "&&" in command  # a failed migration stops the start
    env = api["environment"]
    assert env["JIGSAW_EXECUTOR"] == "ray"
    head_port = re.search(r"--port[= ](\d+)", command_of(spec["services"]["ray-head"]))
    assert head_port is not None
    assert env["JIGSAW_RAY_ADDRESS"] == f"ray-head:{head_port[1]}"
    assert env["JIGSAW_DATABASE_URL"] == (
        "postgresql+psycopg://jigsaw:s3cret-pw-from-env@postgres:5432/jigsaw"
    )
    assert env["JIGSAW_ADMIN_TOKEN"] == "tok-from-env"


def test_ray_nodes_scale_and_share_the_checkpoint_volume(spec: dict[str, Any]) -> None:
    services = spec["services"]
    head, worker, api = services["ray-head"], services["ray-worker"], services["api"]
    assert "--head" in command_of(head) and "--num-gpus=0" in command_of(head)
    head_port = re.search(r"--port=(\d+)", command_of(head))
    assert head_port is not None
    assert f"--address=ray-head:{head_port[1]}" in command_of(worker)
    assert "--num-gpus" in command_of(worker)
    # --scale needs no fixed names or host ports on the workers.
    assert "container_name" not in worker and "ports" not in worker
    mounts = {name: services[name]["volumes"] for name in ("ray-head", "ray-worker", "api")}
    checkpoint_dir = api["environment"]["JIGSAW_CHECKPOINT_DIR"]
    for name, volumes in mounts.items():
        assert f"checkpoints:{checkpoint_dir}" in volumes, name
    assert "checkpoints" in spec["volumes"]
    assert head["image"] == worker["image"] == api["image"]  # driver and workers match
    for name in ("ray-head", "ray-worker", "api"):  # one Ray token for driver and nodes
        assert services[name]["environment"]["RAY_AUTH_TOKEN"] == "ray-tok-from-env", name


def test_missing_secrets_fail_fast_and_none_is_hard_coded() -> None:
    for secret in SECRETS:
        env = {name: "x" * 20 for name in SECRETS if name != secret}
        with pytest.raises(MissingVariable, match=secret):
            compose(env)
        with pytest.raises(MissingVariable, match=secret):
            compose({**env, secret: ""})
    text = COMPOSE.read_text()
    for secret in SECRETS:
        references = re.findall(r"\$\{" + secret + r"([^}]*)\}", text)
        assert references and all(ref.startswith(":?") for ref in references), secret
    loaded = yaml.safe_load(text)
    for name, service in loaded["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if re.search(r"PASSWORD|TOKEN|SECRET", key):
                assert str(value).startswith("${") and ":?" in str(value), f"{name}.{key}"


def test_dockerfile_builds_cpu_and_cuda_images_from_files_that_exist() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    targets = re.findall(r"^FROM \S+ AS (\w+)$", text, flags=re.MULTILINE)
    assert targets == ["cpu", "cuda"]
    assert text.count('"torch==${TORCH_VERSION}"') == 2
    assert "whl/cpu" in text and "whl/cu" in text
    for source in re.findall(r"^COPY (\S+(?: \S+)*) \S+$", text, flags=re.MULTILINE):
        for path in source.split():
            assert (REPO / path).exists(), f"COPY {path}: missing"


def test_kuberay_cluster_offers_gpu_workers_and_a_shared_checkpoint_volume() -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "k8s" / "raycluster.yaml").read_text()))
    cluster = next(d for d in documents if d["kind"] == "RayCluster")
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    groups = cluster["spec"]["workerGroupSpecs"]
    assert groups
    for group in groups:
        container = group["template"]["spec"]["containers"][0]
        limit = container["resources"]["limits"]["nvidia.com/gpu"]
        assert group["rayStartParams"]["num-gpus"] == limit, group["groupName"]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert env["JIGSAW_CHECKPOINT_DIR"] in mounts
        assert "secretKeyRef" in env["RAY_AUTH_TOKEN"], group["groupName"]
    claim = next(d for d in documents if d["kind"] == "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]


def test_api_manifest_takes_secrets_from_a_secret_and_points_at_the_ray_head() -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "k8s" / "api.yaml").read_text()))
    config = next(d for d in documents if d["kind"] == "ConfigMap")["data"]
    cluster = yaml.safe_load_all((DEPLOY / "k8s" / "raycluster.yaml").read_text())
    ray_name = next(d for d in cluster if d["kind"] == "RayCluster")["metadata"]["name"]
    assert config["JIGSAW_RAY_ADDRESS"].startswith(f"{ray_name}-head-svc.")
    assert config["JIGSAW_EXECUTOR"] == "ray"
    deployment = next(d for d in documents if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    for container in pod["containers"] + pod["initContainers"]:
        for variable in container.get("env", []):
            if re.search(r"PASSWORD|TOKEN|DATABASE_URL", variable["name"]):
                assert "secretKeyRef" in variable["valueFrom"], variable["name"]
    assert pod["initContainers"][0]["command"][-2:] == ["upgrade", "head"]


def test_grafana_dashboard_plots_only_series_the_api_exports() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "jigsaw-dashboard.json").read_text())
    expressions = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert expressions
    names = {n for e in expressions for n in re.findall(r"\b(jigsaw_[a-z_]+)", e)}
    assert names and all(re.fullmatch(r"jigsaw_[a-z_]+", n) for n in names)
    metrics_source = REPO / "api" / "metrics.py"
    if metrics_source.exists():
        exported = set(re.findall(r'"(jigsaw_[a-z_]+)"', metrics_source.read_text()))
        for name in names:
            family = re.sub(r"_(total|bucket|sum|count)$", "", name)
            assert family in exported, f"{name} is not exported by api/metrics.py"
