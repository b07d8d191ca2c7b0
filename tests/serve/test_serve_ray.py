"""`cuda-agent serve --pool ray` on a real local Ray cluster of two nodes (CPU backend): one judge
per node (each node offers one CPU, a judge task takes one), and the requests reach both."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import RELU_BINDING, RELU_KERNEL, RELU_MODEL_NEW, RELU_TASK
from tests.serve.test_serve import CHEAP, SRC, WRONG, Server

ray = pytest.importorskip("ray", reason="the Ray pool needs the `ray` extra")
pytestmark = pytest.mark.slow


def test_requests_reach_a_judge_on_each_of_two_ray_nodes(tmp_path: Path, cache_dir: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from ray.cluster_utils import Cluster

    # Ray's workers inherit the environment of the processes that start the nodes: this one
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(cache_dir))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"node_a": 1},
                                                            "include_dashboard": False})
    srv = None
    try:
        cluster.add_node(num_cpus=1, resources={"node_b": 1})
        cluster.wait_for_nodes()
        nodes = {n.node_id[:8] for n in cluster.list_all_nodes()}
        assert len(nodes) == 2
        srv = Server(tmp_path / "ray.sqlite", cache_dir, "--pool", "ray", "--ray-address", cluster.address)
        honest = {"model_new.py": RELU_MODEL_NEW, "kernels/relu.cpp": RELU_KERNEL + "\n// ray\n",
                  "kernels/relu_binding.cpp": RELU_BINDING}
        # two at once, one CPU each: the second cannot fit on the first one's node
        rows = srv.client.submit_batch([(RELU_TASK, honest, CHEAP), (RELU_TASK, WRONG, CHEAP)])
        done = [srv.client.wait(r.id, 240) for r in rows]
        assert [d.status for d in done] == ["done"] * 2, [d.error for d in done]
        assert [d.result.reward for d in done] == [1, -1] and all(d.runs == 1 for d in done)  # type: ignore[union-attr]
        used = {d.slot.split(":")[1] for d in done if d.slot}
        assert used == nodes, f"judged on {used}, the cluster's nodes are {nodes}"
        devices = srv.client.request("GET", "/v1/devices")
        assert {d["label"].split(":")[1] for d in devices} == nodes and sum(d["completed"] for d in devices) == 2
        again = srv.client.submit(RELU_TASK, honest, CHEAP)
        assert again.cached and again.id == done[0].id  # the store answers repeats on the Ray path too
        assert srv.client.health()["pool"] == "ray"
    finally:
        if srv is not None:
            srv.stop()
        cluster.shutdown()
