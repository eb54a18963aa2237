"""The deployments against a real `prefect server start`: pool, deploy, worker, a dry run.

Everything runs as it would in production, on 127.0.0.1: the server and the process
worker are separate process groups (killed by pid in a finally), `prefect deploy --all`
reads deploy/prefect.yaml from the repository root, and the `dry-run` deployment is
triggered by hand with `prefect deployment run`. The run must complete, publish its
counts artifact and write a success receipt into the temporary receipts folder.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memlife.demo import generate
from memlife.stores import open_store
from tests.support.prefect_server import free_port, prefect_env, start, stop

REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).parent / "prefect")
POOL = "memlife-process"
CUTOFF = "2026-03-01T00:00:00+00:00"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _cli(args: list[str], env: dict, timeout: float = 120) -> str:
    done = subprocess.run(
        [PREFECT, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"prefect {' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_dry_run_deployment_on_a_real_server(tmp_path: Path):
    t0 = time.monotonic()
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    home = tmp_path / "prefect-home"
    env = {
        **prefect_env(home, api),
        "MEMLIFE_WORKDIR": str(REPO),
        "MEMLIFE_TIMEZONE": "UTC",
        "MEMLIFE_EVAL_CASES": str(tmp_path / "eval" / "cases.yaml"),
        "MEMLIFE_HOME": str(tmp_path / "memlife-home"),
    }

    # the data: a seeded SQLite store and an empty receipts folder
    store = f"sqlite:///{tmp_path / 'store.db'}"
    db = open_store(store)
    try:
        db.put_many(list(generate(200, seed=11)))
        # the evaluation set the deployments name (MEMLIFE_EVAL_CASES), as `eval init` writes it
        from memlife.evalset import dump_cases
        from memlife.evalset_starter import starter_cases

        dump_cases(starter_cases(db, actors=2), env["MEMLIFE_EVAL_CASES"])
    finally:
        db.close()
    receipts = tmp_path / "receipts"

    server = worker = None
    logs = {name: (tmp_path / f"{name}.log").open("w") for name in ("server", "worker")}
    try:
        server = start(
            [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env,
            logs["server"],
            tmp_path,
        )
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prefect server did not become healthy"
            time.sleep(0.5)
        phases = {"server healthy": time.monotonic() - t0}

        # the pool, as `prefect work-pool create memlife-process --type process` makes it
        from prefect.workers.process import ProcessWorker

        template = ProcessWorker.get_default_base_job_template()
        pool = httpx.post(
            f"{api}/work_pools/",
            timeout=30,
            json={"name": POOL, "type": "process", "base_job_template": template},
        )
        assert pool.status_code == 201, pool.text
        out = _cli(["--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml"], env)
        for name in ("memlife-nightly/nightly", "memlife-nightly/dry-run", "memlife-shard/shard"):
            assert name in out, out
        nightly = httpx.get(f"{api}/deployments/name/memlife-nightly/nightly", timeout=10).json()
        assert nightly["parameters"]["config"]["dry_run"] is False  # the flow's one RunConfig
        assert nightly["concurrency_limit"] == 1 or nightly.get("global_concurrency_limit")
        (sched,) = nightly["schedules"]
        assert sched["schedule"]["cron"] == "15 2 * * *"
        assert sched["schedule"]["timezone"] == "UTC"
        assert nightly["work_pool_name"] == POOL
        dry = httpx.get(f"{api}/deployments/name/memlife-nightly/dry-run", timeout=10).json()
        assert dry["parameters"]["config"]["dry_run"] is True and not dry["schedules"]
        # both carry the regression gate's evaluation set (issue 15)
        assert (
            nightly["parameters"]["config"]["eval_cases"]
            == dry["parameters"]["config"]["eval_cases"]
            == env["MEMLIFE_EVAL_CASES"]
        )
        assert dry["parameters"]["config"]["with_model"] is False

        phases["deployed"] = time.monotonic() - t0
        worker = start(
            [PREFECT, "worker", "start", "--pool", POOL, "--type", "process"],
            env,
            logs["worker"],
            tmp_path,
        )

        # --params replaces the config as a whole: start from the deployment's own
        params = {
            **dry["parameters"]["config"],
            "store": store,
            "receipts": f"file://{receipts}",
            "now": CUTOFF,
            "actors": ["u-000000", "u-000001", "u-000002", "u-000003"],
            # the batches as child runs of memlife-shard/shard on the same pool and worker
            "fan_out": "deployments",
            "shards_per_batch": 100,
        }
        out = _cli(
            [
                "deployment",
                "run",
                "memlife-nightly/dry-run",
                "--params",
                json.dumps({"config": params}),
            ],
            env,
        )
        match = re.search(r"UUID:\s*([0-9a-f-]{36})", out)
        assert match, out
        flow_run_id = match.group(1)
        phases["triggered"] = time.monotonic() - t0

        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import (
            ArtifactFilter,
            ArtifactFilterFlowRunId,
            FlowRunFilter,
            FlowRunFilterParentFlowRunId,
        )
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: api}):
            with get_client(sync_client=True) as client:
                deadline = time.monotonic() + 300
                while True:
                    run = client.read_flow_run(flow_run_id)
                    if run.state is not None and run.state.is_final():
                        break
                    assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
                    assert time.monotonic() < deadline, f"flow run stuck in {run.state}"
                    time.sleep(1)
                assert run.state.is_completed(), (
                    f"{run.state}\n" + (tmp_path / "worker.log").read_text()[-5000:]
                )
                assert run.parameters["config"]["dry_run"] is True
                children = client.read_flow_runs(
                    flow_run_filter=FlowRunFilter(
                        parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])
                    )
                )
                artifacts = client.read_artifacts(
                    artifact_filter=ArtifactFilter(
                        flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])
                    )
                )
        phases["run completed"] = time.monotonic() - t0

        # the shard batch ran as a child flow run of the shard deployment, and completed
        assert [c.state.is_completed() for c in children] == [True], children
        assert children[0].deployment_id is not None

        by_key = {a.key: a for a in artifacts}
        assert {"memlife-counts", "memlife-summary"} <= set(by_key)
        table = by_key["memlife-counts"].data
        rows = json.loads(table) if isinstance(table, str) else table
        counts = {r["count"]: r["records"] for r in rows}
        assert counts["processed"] > 0
        assert counts["deleted"] == 0  # a dry run deletes nothing

        (receipt_path,) = receipts.glob("runs/*/*/*/*/receipt.json")
        receipt = json.loads(receipt_path.read_text())
        assert receipt["mode"] == "dry_run" and receipt["status"] == "success"
        assert receipt["counts"]["processed"] == counts["processed"]
        assert receipt["cutoff"] == CUTOFF
        assert receipt["pagination_complete"] is True
        assert (receipt_path.parent / "manifest.json").exists()
        print("\n" + ", ".join(f"{k} {v:.1f}s" for k, v in phases.items()))
    finally:
        stop(worker)
        stop(server)
        for fh in logs.values():
            fh.close()
