"""`memlife run`: the nightly lifecycle job, through its Prefect flow (or in-process)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

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
    printable,
    progress_bar,
)
from memlife.errors import InputError
from memlife.pipeline import gate_line, parse_now, run_local
from memlife.policy import DEFAULT_POLICY
from memlife.run_finish import singular
from memlife.run_types import RunConfig, operator_config
from memlife.settings import settings, without_password

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
        title=Text(
            printable(f"memlife {mode.replace('_', ' ')} {result['run_id']}  "
                      f"(policy {result['policy_version']})")
        )
    )  # fmt: skip
    table.add_column("planned action")
    table.add_column("records", justify="right")
    planned: list[tuple[str | Text, Any]] = list(result["counts"].items())
    planned.append((Text("total", style="bold"), result["records"]))
    if mode == "dry_run":  # nothing changed: show what an apply run would do
        from memlife.would_change import would_change

        right = would_change(result)  # net of what its gate would withhold
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
            list[str] | None,
            typer.Option(
                "--namespace",
                help="Namespace glob from the root, e.g. '/users/*/facts' (* one segment, "
                "** any number; repeatable).",
            ),
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
                "--metrics-namespace",
                help="Publish counts to CloudWatch under this namespace (default "
                "$MEMLIFE_CLOUDWATCH_NAMESPACE; neither: nothing is published).",
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
                help="Run state backend: dynamodb://TABLE?region=..&parquet=s3://bucket/prefix "
                "(default $MEMLIFE_STATE; else a SQLite store's own file, and files under "
                "$MEMLIFE_HOME for any other store).",
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
        if with_model and not settings().anthropic_api_key:
            raise fail(
                "--with-model: no model is configured (set ANTHROPIC_API_KEY); without one an "
                "apply run consolidates extractively and calls no model"
            )
        for glob in namespace or ():
            from memlife.namespaces import namespace_problem, stored_namespace_problem

            problem = namespace_problem(glob)
            if problem and not (
                stored_namespace_problem(glob) is None
                and not unmatched_scope(check_store(store, must_exist=True), [glob], [])
            ):
                # it could match no namespace at all (a store written before the rule keeps
                # its unrooted ones: a glob matching one of them is taken, as recall's is)
                raise fail(
                    f"--namespace {glob!r} {problem}, or match a namespace stored without it"
                )
        try:
            cutoff = parse_now(now)
        except ValueError as exc:
            raise fail(f"--now: {exc}") from None
        # validated before anything starts (a mistyped store must not become an empty one)
        check_policy(policy)
        store_url = check_store(store, must_exist=True)
        check_receipts(receipts)
        cases_from = "--eval-cases" if eval_cases else "MEMLIFE_EVAL_CASES"
        eval_cases = eval_cases or settings().eval_cases or None
        if eval_cases:  # a gate that cannot load its set must stop the run before it starts
            from memlife.evalset import EvalSetError, load_cases

            try:
                load_cases(eval_cases)
            except EvalSetError as exc:
                raise fail(f"{cases_from}: {exc}") from None
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
                f"Prefect API {without_password(api)}"  # a URL's password goes to no log
                if api
                else "no Prefect API configured; --engine prefect for the flow"
            )
        else:  # said either way, so a log always tells which engine ran
            why = "--engine"
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
        unmatched = unmatched_scope(store_url, config.namespaces, config.actors)
        with progress_bar("starting", None, interactive(json_out)):
            result = run_flow(config) if engine is Engine.prefect else run_local(config).as_json()
        add_scope_unmatched(result, unmatched)
        model_estimate(result, config)
        if json_out:
            print_json(result)
            raise typer.Exit(exit_code(result["status"]))
        console.print(counts_table(result))
        err_console.print(f"status: {result['status']}")
        for option, value in unmatched:
            err_console.print(
                f"warning: {option} {printable(value)!r} matches no record in the store "
                "(scope_unmatched); nothing of it was planned",
                markup=False,
                highlight=False,
            )
        if (result.get("other_counts") or {}).get("rerun_of_completed_run"):
            err_console.print(
                "note: this cutoff's run had already finished (its receipt is sealed): "
                "nothing new was committed; what the store gained since waits for the next night"
            )
        if (result.get("other_counts") or {}).get("dry_run_receipt_taken"):
            err_console.print(  # its receipt and page would be the first's (audit 53o)
                "note: this cutoff's dry run had already finished: its receipt and report page "
                "hold that run's figures, so this one writes none (a dry run at another --now does)"
            )
        line = gate_line(result)
        if line:
            err_console.print(line, markup=False, highlight=False)
        line = model_line(result, config)
        if line:
            err_console.print(line, markup=False, highlight=False)
        err_console.print(f"report: {result['report']}")
        err_console.print(f"manifest: {result['manifest']}")
        if result.get("report_html"):
            err_console.print(f"report page: {result['report_html']}")
        if result.get("receipt"):
            err_console.print(f"receipt: {result['receipt']}")
        raise typer.Exit(exit_code(result["status"]))


def unmatched_scope(
    store_url: str, namespaces: Sequence[str], actors: Sequence[str]
) -> list[tuple[str, str]]:
    """:func:`memlife.run_scope.unmatched_scope` of the store at ``store_url``."""
    if not namespaces and not actors:
        return []
    from memlife.run_scope import unmatched_scope as unmatched
    from memlife.stores import open_store

    db = open_store(store_url)
    try:
        return unmatched(db, namespaces, actors)
    finally:
        db.close()


def add_scope_unmatched(result: dict[str, Any], unmatched: list[tuple[str, str]]) -> None:
    """In --json: ``scope_unmatched`` (option and value of each) and one
    ``scope_unmatched:<option>=<value>`` count each in ``other_counts``, as the policy's
    ``enforcement_glob_unmatched:<glob>`` is counted (the run's summary and receipt carry
    the same counts; the CLI names them whichever engine ran)."""
    result["scope_unmatched"] = [{"option": o, "value": v} for o, v in unmatched]
    other = result.setdefault("other_counts", {})
    for option, value in unmatched:
        other[f"scope_unmatched:{option}={value}"] = 1


def model_estimate(result: dict[str, Any], config: RunConfig) -> None:
    """Which consolidator an apply run would use (``apply_consolidator``): without
    ANTHROPIC_API_KEY it consolidates extractively, and the dry run estimated no calls."""
    model = result.setdefault("model", {})
    key = bool(settings().anthropic_api_key)
    if not config.consolidate:
        model["apply_consolidator"] = None
    else:
        model["apply_consolidator"] = f"anthropic:{settings().model_name}" if key else "extractive"


def model_line(result: dict[str, Any], config: RunConfig) -> str | None:
    """What a dry run says about the model: the estimate, or that none would be called; what
    an apply run took from a dry run's answers (consolidate/answers.py)."""
    model = result.get("model", {})
    reused = model.get("answers_reused", 0)
    if reused and (config.with_model or not config.dry_run):
        return singular(
            f"model: {model.get('calls', 0):,} calls; {reused:,} answers reused from a dry run "
            "(checked again, not asked again)"
        )
    if not config.dry_run or config.with_model:
        return None
    if model.get("apply_consolidator") == "extractive":
        return (
            "model: none configured (ANTHROPIC_API_KEY unset): an apply run consolidates "
            "extractively and makes no model calls"
        )
    estimated = model.get("estimated_calls")
    if not estimated:
        return None
    return singular(
        f"model: not called (dry run); an apply run would make about {estimated:,} calls, "
        f"~{model.get('estimated_input_tokens', 0):,} input tokens (--with-model to call it)"
    )


def exit_code(status: str) -> int:
    """0 success; 5 blocked by the regression gate; 3 any other incomplete run (README)."""
    return {"success": 0, "blocked": EXIT_BLOCKED}.get(status, EXIT_PARTIAL)
