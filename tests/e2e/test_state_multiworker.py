"""Many workers, no shared disk, for real: a local `prefect server start`, the deployments of
deploy/prefect.yaml, and a process work pool served by 3 `prefect worker start` processes,
each with its own empty MEMLIFE_HOME and PREFECT_HOME. The run state is on a moto server
(DynamoDB + S3 over HTTP), the store is the AgentCore fake (over HTTP).

A nightly apply fans out (fan_out=deployments) as 3 child runs of memlife-shard/shard. One
worker is SIGKILLed, with its flow run, in the middle of its batch (between two shards: the
fault point ``after_shard_reported`` stops whichever child gets there first and names its
pid). The parent's run ends ``partial_failure``; the next run, on a replacement worker,
converges to what an uninterrupted run gives: byte-identical store export, the same
operation ids, records, actions and outcomes in the receipts.

Two stand-ins, both for time: the parent flow run executes on a fourth machine (`prefect
flow-run execute`, as a worker would run it), so the worker to be killed is never the
parent's; and the test marks the killed child Crashed itself, which Prefect's zombie-run
automation does in production after missed heartbeats (docs/orchestration.md; heartbeats
are at least 30 s apart). The uninterrupted reference runs in this process, the same
configuration against a second copy of the store.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import boto3
import httpx
import psutil
import pytest
import yaml

import memlife.state as state_mod
from memlife import pipeline
from memlife.demo import generate
from memlife.stores import open_store
from memlife.stores.agentcore import INDEXED_KEYS, AgentCoreStore
from tests.fakes.agentcore import FakeAgentCore
from tests.support.aws_state import CREDENTIALS, moto_server, provision, state_url
from tests.support.lifecycle import ANCHOR, CUTOFF
from tests.support.prefect_server import (
    PREFECT,
    REPO,
    cli,
    prefect_env,
    prefect_server,
    start,
    stop,
    wait_until,
)
from tests.support.replacement_ids import of_receipts, of_snapshot, renamed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
POOL = "memlife-process"
WORKERS = 3
RECORDS = 60
FAULT = "after_shard_reported:3"  # the 4th shard of a batch: mid-batch


def _store_url(fake: FakeAgentCore, endpoint: str, table: str) -> str:
    q = {"region": "us-east-1", "endpoint_url": fake.endpoint_url, "sidecar_table": table,
         "sidecar_endpoint_url": endpoint}  # fmt: skip
    return f"agentcore://{fake.memory_id}?{urlencode(q)}"


def _seed(url: str, records: list) -> int:
    """Put the records; returns the number of shards (actor + namespace)."""
    store = AgentCoreStore.from_url(url)
    try:
        store.sidecar.create_table()
        assert not store.put_many(records).failed
        return sum(len(list(store.list_namespaces(a))) for a in store.list_actors())
    finally:
        store.close()


def _export(url: str) -> bytes:
    """Every record, by id; a replacement's id (keyed by its store's run secret) given as
    what it supersedes (tests/support/replacement_ids.py): two stores compare byte for byte."""
    store = open_store(url)
    try:
        rows = [r.to_json() for r in store.iter_all()]
    finally:
        store.close()
    ids = of_snapshot({(d := json.loads(j))["id"]: d for j in rows})
    return "\n".join(
        sorted((renamed(j, ids) for j in rows), key=lambda j: json.loads(j)["id"])
    ).encode()


def _receipts(s3, prefix: str) -> dict[str, tuple]:
    """By operation id; a replacement's write (its id made from the replacement's) by the
    replacement's name, as in _export."""
    docs = []
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket="receipts", Prefix=f"{prefix}/operations/"
    ):
        for o in page.get("Contents", []):
            docs.append(json.loads(s3.get_object(Bucket="receipts", Key=o["Key"])["Body"].read()))
    ids = of_receipts(docs)
    return {
        (f"write:{ids[d['record_id']]}" if d["record_id"] in ids else d["operation_id"]): (
            renamed(d["record_id"], ids), d["action"], d["outcome"])
        for d in docs
    }  # fmt: skip


def _run_receipt(s3, prefix: str) -> dict:
    (key,) = [o["Key"] for o in s3.list_objects_v2(Bucket="receipts", Prefix=f"{prefix}/runs/")
              .get("Contents", []) if o["Key"].endswith("/receipt.json")]  # fmt: skip
    return json.loads(s3.get_object(Bucket="receipts", Key=key)["Body"].read())


def _parameters(deployment: dict, overrides: dict) -> dict:
    """The deployment's own parameters with the run's overrides (a flat signature, or one
    ``config`` parameter holding the RunConfig)."""
    params = dict(deployment["parameters"])
    if "config" in params:
        flow_level = {k: v for k, v in overrides.items() if k in params}
        config = {k: v for k, v in overrides.items() if k not in params}
        return {**params, **flow_level, "config": {**params["config"], **config}}
    return {**params, **overrides}


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _homes_empty(homes: dict[str, Path]) -> None:
    for name, home in homes.items():
        left = sorted(str(p.relative_to(home)) for p in home.rglob("*")) if home.exists() else []
        assert left == [], f"{name} left run state on its disk: {left}"


class Cluster:
    """The server's API, the workers (one machine each) and the parent's machine."""

    def __init__(self, tmp: Path, api: str, env: dict[str, str]) -> None:
        self.tmp, self.api, self.env = tmp, api, env
        self.workers: dict[str, tuple] = {}  # name -> (Popen, log path)
        self.homes: dict[str, Path] = {}

    def machine_env(self, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        root = self.tmp / name
        self.homes[name] = root / "memlife-home"
        env = prefect_env(root / "prefect-home", self.api, self.env)
        env.pop("PREFECT_API_DATABASE_CONNECTION_URL")
        env.update(MEMLIFE_HOME=str(self.homes[name]), MEMLIFE_WORKDIR=str(REPO), **(extra or {}))
        for k in ("MEMLIFE_FAULT", "MEMLIFE_FAULT_MODE", "MEMLIFE_FAULT_MARK"):
            if not extra or k not in extra:
                env.pop(k, None)
        return env

    def start_worker(self, name: str, extra: dict[str, str] | None = None) -> None:
        log = self.tmp / f"{name}.log"
        args = [PREFECT, "worker", "start", "--pool", POOL, "--work-queue", "default",
                "--type", "process", "--limit", "1", "--name", name]  # fmt: skip
        proc = start(args, self.machine_env(name, extra), log.open("w"), self.tmp)
        self.workers[name] = (proc, log)

    def run_parent(self, flow_run_id: str, name: str) -> tuple:
        log = self.tmp / f"{name}.log"
        args = [PREFECT, "flow-run", "execute", flow_run_id]
        return start(args, self.machine_env(name), log.open("w"), self.tmp), log

    def stop_all(self) -> None:
        for proc, _ in self.workers.values():
            stop(proc)


def test_nightly_on_three_workers_one_killed_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Crashed

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    for k in ("ANTHROPIC_API_KEY", "MEMLIFE_STORE", "MEMLIFE_RECEIPTS", "MEMLIFE_FAULT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "test-home"))
    t0 = time.monotonic()
    phases: dict[str, float] = {}
    records = [  # every tenth hard-expired: deletions on every worker's shards
        r.model_copy(update={"expires_at": CUTOFF - timedelta(days=1)}) if i % 10 == 3 else r
        for i, r in enumerate(generate(RECORDS, seed=5, anchor=ANCHOR, markers=True))
    ]
    # no evaluation set here: the gate must not withhold the consolidations this test is about
    policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text())
    policy["gate"]["required"] = False
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(yaml.safe_dump(policy))
    mark = tmp_path / "stopped-here"

    with moto_server() as endpoint:
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint)
        s3.create_bucket(Bucket="receipts")
        stores = {tag: FakeAgentCore(indexed_keys=INDEXED_KEYS).start() for tag in ("ref", "run")}
        try:
            urls, configs = {}, {}
            for tag, fake in stores.items():  # the same memory id: the same store identity
                urls[tag] = _store_url(fake, endpoint, f"sidecar-{tag}")
                shards = _seed(urls[tag], records)
                surl = state_url(f"state-{tag}", endpoint).replace(
                    "s3://memlife-state/parts", f"s3://memlife-state/{tag}"
                )
                provision(surl)
                configs[tag] = {"store": urls[tag], "receipts": f"s3://receipts/{tag}?endpoint_url={endpoint}",
                                "state": surl}  # fmt: skip

            # the reference: the same run, uninterrupted, in this process
            monkeypatch.setenv("MEMLIFE_STATE", configs["ref"]["state"])
            monkeypatch.setattr(state_mod, "_open", {})
            ref = pipeline.run_local(pipeline.RunConfig(
                dry_run=False, now=CUTOFF, store=urls["ref"], receipts=configs["ref"]["receipts"],
                policy=str(policy_path), state=configs["ref"]["state"],
            ))  # fmt: skip
            assert ref.status == "success" and ref.records == RECORDS
            life = ref.lifecycle
            assert life["deleted"] > 0 and life["consolidated"] > 0 and life["superseded"] > 0
            ref_export, ref_receipts = _export(urls["ref"]), _receipts(s3, "ref")
            phases["reference run"] = time.monotonic() - t0

            monkeypatch.setenv("MEMLIFE_STATE", configs["run"]["state"])  # every machine's
            monkeypatch.setattr(state_mod, "_open", {})
            spb = math.ceil(shards / WORKERS)
            assert math.ceil(shards / spb) == WORKERS and spb > 4  # 3 batches, killed mid-batch
            overrides = {"store": urls["run"], "receipts": configs["run"]["receipts"],
                         "now": CUTOFF.isoformat(), "policy": str(policy_path), "eval_cases": None,
                         "fan_out": "deployments", "shards_per_batch": spb}  # fmt: skip
            with prefect_server(tmp_path) as (api, env):
                env = {**env, "MEMLIFE_TIMEZONE": "UTC", "MEMLIFE_WORKDIR": str(REPO)}
                from prefect.workers.process import ProcessWorker

                pool = httpx.post(f"{api}/work_pools/", timeout=30, json={
                    "name": POOL, "type": "process",
                    "base_job_template": ProcessWorker.get_default_base_job_template(),
                })  # fmt: skip
                assert pool.status_code == 201, pool.text
                cli(["--no-prompt", "deploy", "--all", "--prefect-file", "deploy/prefect.yaml"],
                    env)  # fmt: skip
                cluster = Cluster(tmp_path, api, env)
                phases["server up, deployed"] = time.monotonic() - t0
                armed = {"MEMLIFE_FAULT": FAULT, "MEMLIFE_FAULT_MODE": "hang",
                         "MEMLIFE_FAULT_MARK": str(mark)}  # fmt: skip
                try:
                    for i in range(WORKERS):  # all armed alike: the first child there stops
                        cluster.start_worker(f"worker-{i}", armed)
                    with (
                        temporary_settings({PREFECT_API_URL: api}),
                        get_client(sync_client=True) as client,
                    ):
                        nightly = client.read_deployment_by_name("memlife-nightly/nightly")
                        params = _parameters(nightly.model_dump(mode="json"), overrides)

                        def night(name: str) -> tuple[str, object]:
                            # queued where no worker polls: the parent's own machine runs it
                            fr = client.create_flow_run_from_deployment(
                                nightly.id, parameters=params, work_queue_name="parent"
                            )
                            parent, log = cluster.run_parent(str(fr.id), name)
                            return str(fr.id), (parent, log)

                        def finished(fid: str) -> object:
                            run = client.read_flow_run(fid)
                            return run if run.state is not None and run.state.is_final() else None

                        def children(fid: str) -> list:
                            return client.read_flow_runs(flow_run_filter=FlowRunFilter(
                                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[fid])))  # fmt: skip

                        # -- night 1: a worker dies mid-batch ---------------------------------
                        fid, parent = night("parent-1")
                        alive = {"parent": parent, **cluster.workers}
                        wait_until(lambda: mark.exists() and mark.read_text(), "a child mid-batch",
                                   300, alive)  # fmt: skip
                        pid = int(mark.read_text())
                        child = psutil.Process(pid)
                        child_run = child.environ()["PREFECT__FLOW_RUN_ID"]
                        ancestors = {p.pid for p in child.parents()}
                        (victim,) = [
                            n for n, (w, _) in cluster.workers.items() if w.pid in ancestors
                        ]
                        proc = cluster.workers[victim][0]
                        doomed = [
                            proc.pid,
                            *(c.pid for c in psutil.Process(proc.pid).children(recursive=True)),
                        ]
                        for p in doomed:  # the machine is gone: worker, flow run, all of it
                            try:
                                os.kill(p, signal.SIGKILL)
                            except ProcessLookupError:
                                pass
                        proc.wait(30)
                        assert proc.returncode == -signal.SIGKILL
                        wait_until(lambda: _gone(pid), "the killed flow run to be gone", 30)
                        del cluster.workers[victim]
                        client.set_flow_run_state(
                            child_run, Crashed(message="worker lost"), force=True
                        )
                        first = wait_until(lambda: finished(fid), "the first parent run", 300,
                                           {"parent": parent})  # fmt: skip
                        assert first.state.is_completed(), parent[1].read_text()[-4000:]
                        parent[0].wait(60)
                        kids = children(fid)
                        assert len(kids) == WORKERS
                        assert sorted(k.state.type.value for k in kids) == [
                            "COMPLETED", "COMPLETED", "CRASHED"]  # fmt: skip
                        receipt = _run_receipt(s3, "run")
                        assert receipt["status"] == "partial_failure"
                        assert receipt["pagination_complete"] is False
                        phases["night 1 (killed)"] = time.monotonic() - t0

                        # -- night 1 again: a replacement worker, same run, converges ---------
                        cluster.start_worker("worker-3")
                        fid2, parent2 = night("parent-2")
                        second = wait_until(lambda: finished(fid2), "the second parent run", 300,
                                            {"parent": parent2})  # fmt: skip
                        assert second.state.is_completed(), parent2[1].read_text()[-4000:]
                        parent2[0].wait(60)
                        kids = children(fid2)
                        assert [k.state.type.value for k in kids] == ["COMPLETED"] * WORKERS
                        phases["night 1 again"] = time.monotonic() - t0
                finally:
                    cluster.stop_all()
            del cluster.homes[victim]  # its disk went with it
            _homes_empty(cluster.homes)
            assert _export(urls["run"]) == ref_export  # byte-identical store
            got = _receipts(s3, "run")
            assert got == ref_receipts  # same operation ids, records, actions and outcomes
            print("\n" + ", ".join(f"{k} {v:.0f}s" for k, v in phases.items()))
        finally:
            for fake in stores.values():
                fake.stop()


def test_the_zombie_run_automation_is_valid_and_marks_crashed() -> None:
    """deploy/zombie-runs.yaml: what the test above does by hand, as a Prefect automation."""
    from prefect.events.schemas.automations import AutomationCore, Posture

    (data,) = yaml.safe_load((REPO / "deploy" / "zombie-runs.yaml").read_text())["automations"]
    auto = AutomationCore.model_validate(data)
    assert auto.trigger.posture is Posture.Proactive
    assert auto.trigger.after == {"prefect.flow-run.heartbeat"}
    assert auto.trigger.for_each == {"prefect.resource.id"}
    assert auto.trigger.within.total_seconds() >= 3 * 180  # several missed default heartbeats
    (action,) = auto.actions
    assert action.type == "change-flow-run-state" and action.state.value == "CRASHED"
