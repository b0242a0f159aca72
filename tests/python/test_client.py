"""The Python `kubernetes` client (PyPI) against a real `berth server`."""

import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
from kubernetes import client, config, watch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BERTH = os.environ.get("BERTH_BIN", os.path.join(ROOT, "target", "debug", "berth"))


@pytest.fixture(scope="module")
def api():
    data_dir = tempfile.mkdtemp(prefix="berth-py-")
    proc = subprocess.Popen(
        [BERTH, "server", "--data-dir", data_dir, "--bind-address", "127.0.0.1", "--secure-port", "0",
         "--disable-agent", "--disable-ingress", "--disable-dns"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "BERTH_LOG": "warn"},
    )
    kubeconfig = None
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("Wrote kubeconfig "):
            kubeconfig = line.split(" ", 2)[2].strip()
        if line.startswith("API server at "):
            break
    assert kubeconfig, "berth server did not start"
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    api_client = config.new_client_from_config(config_file=kubeconfig)
    for _ in range(100):
        try:
            client.VersionApi(api_client).get_code()
            break
        except Exception:
            time.sleep(0.1)
    yield api_client
    proc.kill()
    proc.wait()
    shutil.rmtree(data_dir, ignore_errors=True)


def test_version(api):
    v = client.VersionApi(api).get_code()
    assert v.major == "1" and v.minor == "33"


def test_create_list_patch_delete_deployment(api):
    apps = client.AppsV1Api(api)
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "py", "labels": {"app": "py"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "py"}},
            "template": {
                "metadata": {"labels": {"app": "py"}},
                "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 8080}]}]},
            },
        },
    }
    created = apps.create_namespaced_deployment("default", body)
    assert created.metadata.uid
    assert created.spec.strategy.type == "RollingUpdate"
    names = [d.metadata.name for d in apps.list_namespaced_deployment("default", label_selector="app=py").items]
    assert names == ["py"]
    # The client sends a dict patch as strategic merge: the container keeps its ports.
    patched = apps.patch_namespaced_deployment(
        "py", "default", {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
    )
    c = patched.spec.template.spec.containers[0]
    assert c.image == "busybox:1.36" and c.ports[0].container_port == 8080
    scaled = apps.patch_namespaced_deployment_scale("py", "default", {"spec": {"replicas": 4}})
    assert scaled.spec.replicas == 4
    apps.delete_namespaced_deployment("py", "default")
    with pytest.raises(client.exceptions.ApiException) as e:
        apps.read_namespaced_deployment("py", "default")
    assert e.value.status == 404


def test_watch_sees_changes(api):
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_config_map("default").metadata.resource_version

    def later():
        time.sleep(0.5)
        core.create_namespaced_config_map("default", {"metadata": {"name": "w1"}, "data": {"a": "b"}})
        core.delete_namespaced_config_map("w1", "default")

    threading.Thread(target=later).start()
    seen = []
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=10):
        seen.append((ev["type"], ev["object"].metadata.name))
        if ev["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "w1"), ("DELETED", "w1")]
