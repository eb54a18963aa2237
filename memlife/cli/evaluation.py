"""`memlife eval`: run an evaluation set on demand; `memlife eval init`: a starter set."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from memlife.cli.common import (
    JsonOpt,
    ReceiptsOpt,
    StoreOpt,
    check_receipts,
    check_store,
    console,
    err_console,
    fail,
    option_time,
    plain,
    print_id_table,
    print_json,
)
from memlife.evalset import EvalSetError, dump_cases, load_cases
from memlife.evalset_starter import starter_cases
from memlife.policy import PolicyError, load_policy
from memlife.stores import open_store

PolicyOpt = Annotated[str, typer.Option("--policy", help="Policy file (gate thresholds).")]


def _verdict(passed: bool) -> Text:
    return Text("pass", style="green") if passed else Text("FAIL", style="red")


def gate_table(report: dict[str, Any], title: str) -> Table:
    table = Table(title=title)
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("gate", "left"),
        ("value", "right"),
        ("threshold", "right"),
        ("result", "left"),
    )
    for col, justify in columns:
        table.add_column(col, justify=justify)
    for name, g in report["gates"].items():
        before = f" (before {g['before']:.3f})" if "before" in g else ""
        table.add_row(
            plain(name),
            f"{g['value']:.3f}{before}",
            f"{g['threshold']:.3f}",
            _verdict(g["passed"]),
        )
    return table


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Evaluation sets for the regression gate (docs/evaluation.md).")

    @group.callback(invoke_without_command=True)
    def evaluate_cmd(
        ctx: typer.Context,
        cases: Annotated[  # text, not a Path: a Path made "s3://b/k" the local "s3:/b/k"
            str | None,
            typer.Option("--cases", help="Cases file (YAML or JSONL), file:// or s3:// URL"),
        ] = None,
        policy: PolicyOpt = "policies/default.yaml",
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Run a set against the store as it is and print the gate table (exit 1: a gate or a
        high-impact case failed, or a case could not read its records)."""
        if ctx.invoked_subcommand is not None:
            return
        if cases is None:
            raise fail("give --cases FILE (or use `memlife eval init` to write a starter set)")
        from memlife.gate import evaluate

        url = check_store(store, must_exist=True)  # a typo must not become an empty store
        try:
            loaded = load_cases(cases)
            pol = load_policy(policy)
        except (EvalSetError, PolicyError) as exc:
            raise fail(str(exc)) from None
        db = open_store(url)
        try:
            report = evaluate(db, loaded, policy=pol)
        finally:
            db.close()
        if json_out:
            print_json(report)
        else:
            console.print(
                gate_table(
                    report, f"evaluation: {report['cases']} cases, {report['replicas']} replica(s)"
                )
            )
            # case ids and the record ids hit are what an operator acts on: never cut
            # (rich cut them to "pref-u-000003…" at 80 columns, as review list once did)
            print_id_table(
                "cases",
                ("case", "kind", "impact", "recall@k", "forbidden hits", "result"),
                [
                    (
                        r["id"],
                        r["kind"],
                        r["impact"],
                        f"{r['must_hits']}/{r['must_total']}" if r["must_total"] else "-",
                        ", ".join(r["forbidden_hits"]) or "-",
                        "pass" if r["passed"] else "FAIL",
                    )
                    for r in report["results"]
                ],
                {"case", "forbidden hits"},
            )
            if report["high_impact_failed"]:
                err_console.print(
                    f"high-impact cases failed: {', '.join(report['high_impact_failed'])}"
                )
            for u in report["unreadable_cases"]:  # ids and the field only, never the value
                err_console.print(
                    f"case {u['case']} not evaluated: record {u['record_id']} does not "
                    f"decode (field {u['field']}, CORRUPT_RECORD)",
                    markup=False, highlight=False,
                )  # fmt: skip
        raise typer.Exit(1 if report["blocked"] else 0)

    @group.command("init")
    def init(
        output: Annotated[
            Path,
            typer.Option("--output", "-o", dir_okay=False, help="Where to write (.yaml or .jsonl)"),
        ] = Path("eval/cases.yaml"),
        actors: Annotated[
            int, typer.Option("--actors", min=1, help="How many actors to sample")
        ] = 5,
        actor: Annotated[
            list[str] | None, typer.Option("--actor", help="Actor id (repeatable)")
        ] = None,
        per_kind: Annotated[
            int, typer.Option("--per-kind", min=1, help="Cases per kind per actor")
        ] = 2,
        now: Annotated[
            str | None, typer.Option("--now", help="Cutoff the planner uses, ISO-8601")
        ] = None,
        policy: PolicyOpt = "policies/default.yaml",
        force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file")] = False,
        store: StoreOpt = None,
        receipts: ReceiptsOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Write a starter set derived from the store: current preferences, superseded and
        expired statements, procedures, and erased records (from the erasure receipts).
        Queries are questions from templates; review them before the gate relies on them."""
        from memlife.audit import open_sink

        if output.exists() and not force:
            raise fail(f"{output} exists (use --force to overwrite)")
        cutoff = option_time(now, "--now")
        check_receipts(receipts)
        db = open_store(check_store(store, must_exist=True))
        try:
            cases = starter_cases(
                db,
                policy=load_policy(policy),
                now=cutoff,
                actors=actors,
                actor_ids=actor or (),
                per_kind=per_kind,
                sink=open_sink(receipts),
            )
        finally:
            db.close()
        if not cases:  # every load refuses a set of no case: the gate would stop each run
            raise fail(
                "no starter case found (no subjects, preference namespaces, procedures, "
                "expiries or erasures to pin one on): write the cases by hand "
                "(docs/evaluation.md); nothing was written",
                1,
            )
        dump_cases(cases, output)
        kinds: dict[str, int] = {}
        for c in cases:
            kinds[c.kind.value] = kinds.get(c.kind.value, 0) + 1
        where = (
            f"review it, then give it to the gate: `memlife run --eval-cases {output}`; the "
            "shipped deployments read MEMLIFE_EVAL_CASES (deploy/prefect.yaml): copy it to that "
            "path on the workers or upload it to S3 and set MEMLIFE_EVAL_CASES=s3://bucket/key"
        )
        if json_out:
            print_json({"output": str(output), "cases": len(cases), "kinds": kinds, "next": where})
        else:
            err_console.print(f"wrote {len(cases)} cases to {output}: {kinds}")
            err_console.print(where, markup=False, highlight=False)

    app.add_typer(group, name="eval")
