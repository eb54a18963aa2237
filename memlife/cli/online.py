"""`memlife remember`, `memlife recall`, `memlife chat`: the online library from a shell."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memlife.cli.common import (
    JsonOpt,
    StoreOpt,
    check_store,
    console,
    err_console,
    fail,
    interactive,
    print_json,
    progress_bar,
    safe,
)

if TYPE_CHECKING:
    from memlife.online.memory import LongTermMemory

ActorOpt = Annotated[str, typer.Option("--actor", help="The actor (user) the memories belong to.")]
NamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace", help="Namespace (default /users/<actor>/facts; env MEMLIFE_NAMESPACE)."
    ),
]
LedgerOpt = Annotated[
    Path | None,
    typer.Option("--ledger", help="Access ledger folder (default $MEMLIFE_HOME/ledger)."),
]


@contextmanager
def _memory(store_url: str | None, ledger_root: Path | None) -> Iterator[LongTermMemory]:
    from memlife.backends import open_ledger
    from memlife.online.memory import LongTermMemory
    from memlife.stores import open_store

    store = open_store(store_url)
    mem = LongTermMemory(store, ledger=open_ledger(ledger_root, store=store))
    try:
        yield mem
    finally:
        mem.close()
        store.close()


def register(app: typer.Typer) -> None:
    @app.command("remember")
    def remember(
        fact: Annotated[str, typer.Argument(help="The fact to remember, one sentence.")],
        actor: ActorOpt,
        namespace: NamespaceOpt = None,
        subject: Annotated[
            str | None, typer.Option("--subject", help="What the fact is about.")
        ] = None,
        source: Annotated[
            str,
            typer.Option(
                "--source", help="user_stated, user_confirmed, agent_inferred, system_of_record"
            ),
        ] = "user_stated",
        memory_type: Annotated[
            str, typer.Option("--type", help="semantic, episodic or procedural")
        ] = "semantic",
        owner: Annotated[str | None, typer.Option("--owner")] = None,
        store: StoreOpt = None,
        ledger: LedgerOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Save a fact for an actor; an exact or near duplicate refreshes the existing one."""
        from memlife.online.memory import default_namespace

        if not fact.strip():
            raise fail("the fact is blank")
        try:
            with _memory(check_store(store, must_exist=False), ledger) as mem:
                res = mem.remember(
                    actor,
                    namespace or default_namespace(actor),
                    subject,
                    fact,
                    source=source,
                    memory_type=memory_type,
                    owner=owner,
                )
        except ValueError as exc:
            raise fail(str(exc)) from None
        if json_out:
            print_json(
                {
                    "id": res.record_id,
                    "created": res.created,
                    "refreshed_duplicate_of": res.refreshed_duplicate_of,
                    "similarity": res.similarity,
                }
            )
        else:  # the id alone on stdout: ID=$(memlife remember ...) captures it
            sys.stdout.write(res.record_id + "\n")
            err_console.print("remembered" if res.created else "already known: refreshed")

    @app.command("recall")
    def recall(
        query: Annotated[str, typer.Argument(help="What to look for.")],
        actor: ActorOpt,
        namespace: Annotated[
            str | None,
            typer.Option("--namespace", help="Only this namespace (default: all of the actor's)."),
        ] = None,
        k: Annotated[int, typer.Option("--k", min=1, max=1000)] = 5,
        threshold: Annotated[
            float | None, typer.Option("--threshold", help="Minimum cosine (default 0.25).")
        ] = None,
        store: StoreOpt = None,
        ledger: LedgerOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """The actor's most relevant active memories, best first (each hit is ledgered)."""
        with _memory(check_store(store, must_exist=True), ledger) as mem:
            hits = mem.recall(actor, query, k=k, namespace=namespace, threshold=threshold)
        rows = [
            {
                "id": h.record.id,
                "score": round(h.score, 6),
                "similarity": round(h.similarity, 6),
                "rank": h.rank,
                "content": h.record.content,
                "namespace": h.record.namespace,
                "subject": h.record.subject,
            }
            for h in hits
        ]
        if json_out:
            print_json(rows)
            return
        if not rows:
            err_console.print("no memories above the threshold")
        for r in rows:
            console.print(
                f"{r['rank']}. [bold]{r['score']:.3f}[/bold] {safe(r['content'])}  "
                f"[dim]{safe(r['id'])}[/dim]",
                markup=True,
            )

    @app.command("warm")
    def warm(
        actors: Annotated[
            list[str] | None,
            typer.Option("--actor", help="Only this actor (repeatable; default: every actor)."),
        ] = None,
        store: StoreOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Embed what active memories lack (vectors, token codes): after an upgrade or a model change.

        Also after an import that did not embed. Recall then finds all of them stored."""
        with _memory(check_store(store, must_exist=True), None) as mem:
            shards = [
                (a, ns)
                for a in (actors or sorted(mem.store.list_actors()))
                for ns in mem.store.list_namespaces(a)
            ]
            for a in sorted(set(actors or ()) - {a for a, _ in shards}):
                err_console.print(
                    f"[yellow]warning:[/yellow] actor {safe(repr(a))} has no memories", markup=True
                )
            read = embedded = 0
            with progress_bar("shards", len(shards), interactive(json_out)) as advance:
                for actor, namespace in shards:
                    n, e = mem.warm(actor, namespace)
                    read, embedded = read + n, embedded + e
                    advance(1)
            model = mem.cache.model_id
        out = {"shards": len(shards), "records": read, "embedded": embedded, "model": model}
        if json_out:
            print_json(out)
        else:
            err_console.print(
                f"{len(shards)} shards, {read} active records: {embedded} contents embedded "
                f"({model})"
            )

    @app.command("chat")
    def chat(
        actor: ActorOpt,
        namespace: NamespaceOpt = None,
        model: Annotated[
            str | None, typer.Option("--model", help="Anthropic model (env MEMLIFE_CHAT_MODEL).")
        ] = None,
        max_steps: Annotated[int, typer.Option("--max-steps", min=1, max=50)] = 4,
        budget_tokens: Annotated[
            int, typer.Option("--budget-tokens", help="Compact the history above this.")
        ] = 8000,
        store: StoreOpt = None,
        ledger: LedgerOpt = None,
    ) -> None:
        """Chat with the example agent: one user message per stdin line (ANTHROPIC_BASE_URL honoured)."""
        from memlife.settings import settings

        if not settings().anthropic_api_key and not settings().anthropic_auth_token:
            raise fail(
                "chat needs a model: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a local server)"
            )
        import anthropic

        from memlife.online.agent import MemoryAgent

        with _memory(check_store(store, must_exist=False), ledger) as mem:
            agent = MemoryAgent(
                mem,
                actor,
                namespace=namespace,
                model=model,
                max_steps=max_steps,
                budget_tokens=budget_tokens,
            )
            for line in sys.stdin:
                text = line.strip()
                if not text:
                    continue
                try:
                    reply = agent.send(text)
                except anthropic.APIError as exc:
                    raise fail(f"model call failed: {exc}", code=1) from None
                for call in reply.tool_calls:
                    err_console.print(
                        f"[dim]tool {safe(call['name'])}: {safe(call['result'])}[/dim]",
                        markup=True,
                    )
                if reply.stopped == "step_limit":
                    err_console.print(
                        f"[yellow]stopped at the step limit ({max_steps})[/yellow]", markup=True
                    )
                sys.stdout.write(reply.text + "\n")
                sys.stdout.flush()
