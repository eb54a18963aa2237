"""`memlife run`: the nightly lifecycle job, through its Prefect flow (or in-process)."""

from __future__ import annotations

import logging
import os
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.table import Table

from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    check_policy,
    check_receipts,
    check_store,
    console,
    err_console,
    fail,
    interactive,
    prefect_api_url,
    print_json,
    progress_bar,
)
from memlife.errors import InputError
from memlife.pipeline import gate_line, parse_now, run_local
from memlife.policy import DEFAULT_POLICY
from memlife.run_types import RunConfig, operator_config
from memlife.settings import settings

# Exit codes (README "Exit codes"): 0 success, 1 failure (the run could not finish),
# 2 usage error, 3 partial_failure (some operations failed or were left queued),
# 4 another lifecycle run holds the store's lease, 5 blocked by the regression gate.
EXIT_PARTIAL = 3
EXIT_BLOCKED = 5


class Engine(StrEnum):
    prefect = "prefect"  # the flow, on Prefect's temporary server unless PREFECT_API_URL is set
    local = "local"  # the same stages in-process, without Prefect


def run_flow(config: RunConfig) -> dict[str, Any]:
    from memlife.prefect_env import configure

    configure()
    from flows.nightly import nightly

    try:
        out = nightly(config)
        # a partial or blocked run ends in a named Completed state: the summary is its data
        return out if isinstance(out, dict) else out.result()
    finally:
        # the temporary server's shutdown chatter is not the user's business
        logging.getLogger("prefect.server").setLevel(logging.CRITICAL)


def counts_table(result: dict[str, Any]) -> Table:
    mode = result.get("mode", "dry_run")
    table = Table(
        title=f"memlife {mode.replace('_', ' ')} {result['run_id']}  (policy {result['policy_version']})"
    )
    table.add_column("planned action")
    table.add_column("records", justify="right")
    planned = list(result["counts"].items()) + [("[bold]total", result["records"])]
    if mode == "dry_run":  # nothing changed: show what an apply run would do
        other, counts = result.get("other_counts", {}), result["counts"]
        right = [
            ("consolidate (groups)", other.get("consolidation_proposed", 0)),
            ("merge duplicates", other.get("merged_duplicates", 0)),
            ("supersede contradicted", other.get("contradictions_resolved", 0)),
            ("delete", counts.get("delete_expired", 0) + counts.get("delete_pending", 0)),
            ("left for review", counts.get("review", 0) - other.get("review_answered", 0)),
            ("held", counts.get("hold", 0)),
        ]
        table.add_column("an apply run would")
    else:
        right = list(result.get("lifecycle", {}).items())
        table.add_column("outcome")
    table.add_column("records", justify="right")
    for i in range(max(len(planned), len(right))):
        a, n = planned[i] if i < len(planned) else ("", None)
        o, m = right[i] if i < len(right) else ("", None)
        table.add_row(a, "" if n is None else f"{n:,}", o, "" if m is None else f"{m:,}")
    return table


def register(app: typer.Typer) -> None:
    @app.command("run")
    def run(
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Plan and report; change nothing.")
        ] = False,
        now: Annotated[
            str | None, typer.Option("--now", help="Processing cutoff, ISO-8601 with zone")
        ] = None,
        namespace: Annotated[
            list[str] | None, typer.Option("--namespace", help="Namespace glob (repeatable)")
        ] = None,
        actor: Annotated[
            list[str] | None, typer.Option("--actor", help="Actor id (repeatable)")
        ] = None,
        policy: Annotated[str, typer.Option("--policy")] = DEFAULT_POLICY,
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        page_size: Annotated[int, typer.Option("--page-size", min=1, max=10_000)] = 500,
        retry_only: Annotated[
            bool, typer.Option("--retry-only", help="Only drain the retry queue.")
        ] = False,
        consolidate: Annotated[
            bool,
            typer.Option(
                "--consolidate/--no-consolidate", help="Call the consolidator (model) for groups."
            ),
        ] = True,
        eval_cases: Annotated[
            str | None,
            typer.Option(
                "--eval-cases",
                help="Regression-gate cases (file or s3://); env MEMLIFE_EVAL_CASES. Without a set, judgements in enforced namespaces wait (policy gate.required).",
            ),
        ] = None,
        with_model: Annotated[
            bool,
            typer.Option(
                "--with-model",
                help="Let a dry run call the model (default: estimate calls and tokens).",
            ),
        ] = False,
        metrics_namespace: Annotated[
            str | None,
            typer.Option(
                "--metrics-namespace", help="Publish counts to CloudWatch under this namespace."
            ),
        ] = None,
        cloudtrail: Annotated[
            str | None,
            typer.Option(
                "--cloudtrail",
                help="Ingest CloudTrail data events (folder or s3://) into the access ledger first.",
            ),
        ] = None,
        engine: Annotated[
            Engine | None,
            typer.Option(
                "--engine", help="Default: prefect when a Prefect API is configured, else local."
            ),
        ] = None,
        state: Annotated[
            str | None,
            typer.Option(
                "--state",
                help="Run state backend: dynamodb://TABLE?region=..&parquet=s3://bucket/prefix (default $MEMLIFE_STATE; else files beside the store).",
            ),
        ] = None,
        allow_future_cutoff: Annotated[
            bool,
            typer.Option(
                "--allow-future-cutoff", help="Accept a --now more than 48 h ahead of the clock."
            ),
        ] = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Run the nightly lifecycle job (use --dry-run to only propose)."""
        if retry_only and dry_run:
            raise fail("--retry-only applies; it cannot be combined with --dry-run")
        try:
            cutoff = parse_now(now)
        except ValueError as exc:
            raise fail(f"--now: {exc}") from None
        # validated before anything starts (a mistyped store must not become an empty one)
        check_policy(policy)
        check_store(store, must_exist=True)
        check_receipts(receipts)
        eval_cases = eval_cases or settings().eval_cases or None
        if eval_cases:  # a gate that cannot load its set must stop the run before it starts
            from memlife.evalset import EvalSetError, load_cases

            try:
                load_cases(eval_cases)
            except EvalSetError as exc:
                raise fail(f"--eval-cases: {exc}") from None
        from memlife.state import ENV, StateSettingsError, parse_state_url

        try:  # the flag, or MEMLIFE_STATE: a bad value is refused either way (not ignored)
            parse_state_url(state if state is not None else settings().state)
        except StateSettingsError as exc:
            raise fail(f"{'--state' if state is not None else ENV}: {exc}") from None
        if state is not None:
            os.environ[ENV] = state  # every state part (journal, lease, caches) reads it
        if engine is None:
            api = prefect_api_url()
            engine = Engine.prefect if api else Engine.local
            why = (
                f"Prefect API {api}"
                if api
                else "no Prefect API configured; --engine prefect for the flow"
            )
            err_console.print(f"engine: {engine.value} ({why})")
        config = RunConfig(
            dry_run=dry_run, namespaces=tuple(namespace or ()), actors=tuple(actor or ()),
            now=cutoff, policy=policy, store=store, receipts=receipts, page_size=page_size,
            consolidate=consolidate, retry_only=retry_only, eval_cases=eval_cases,
            with_model=with_model, metrics_namespace=metrics_namespace, cloudtrail=cloudtrail,
            allow_future_cutoff=allow_future_cutoff,
        )  # fmt: skip
        try:  # a cutoff far ahead expires everything at once (run_types.operator_config)
            config = operator_config(config)
        except InputError as exc:
            raise fail(str(exc).replace("cutoff ", "--now ", 1)) from None
        with progress_bar("starting", None, interactive(json_out)):
            result = run_flow(config) if engine is Engine.prefect else run_local(config).as_json()
        if json_out:
            print_json(result)
            raise typer.Exit(exit_code(result["status"]))
        console.print(counts_table(result))
        err_console.print(f"status: {result['status']}")
        line = gate_line(result)
        if line:
            err_console.print(line, markup=False, highlight=False)
        estimated = result.get("model", {}).get("estimated_calls")
        if estimated:
            err_console.print(
                f"model: not called (dry run); an apply run would make about {estimated:,} "
                f"calls, ~{result['model']['estimated_input_tokens']:,} input tokens "
                "(--with-model to call it)"
            )
        err_console.print(f"report: {result['report']}")
        err_console.print(f"manifest: {result['manifest']}")
        if result.get("report_html"):
            err_console.print(f"report page: {result['report_html']}")
        if result.get("receipt"):
            err_console.print(f"receipt: {result['receipt']}")
        raise typer.Exit(exit_code(result["status"]))


def exit_code(status: str) -> int:
    """0 success; 5 blocked by the regression gate; 3 any other incomplete run (README)."""
    return {"success": 0, "blocked": EXIT_BLOCKED}.get(status, EXIT_PARTIAL)
