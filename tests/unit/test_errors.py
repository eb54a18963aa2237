"""One exception hierarchy: every memlife error is a MemlifeError with a reason code."""

from __future__ import annotations

import inspect
import pickle
from datetime import UTC, datetime

import pytest

import memlife.errors as errors
from memlife.consolidate.base import Group, pick_survivor
from memlife.errors import ConsolidationError, MemlifeError, Reason
from memlife.model import MemoryRecord

# The names other modules always exported: they must stay the same classes.
HOMES = {
    "memlife.stores.base": ["StoreError", "BadPageToken"],
    "memlife.journal.base": ["JournalStateError"],
    "memlife.consolidate.base": ["ConsolidationError"],
    "memlife.erase": ["EraseError"],
    "memlife.faults": ["InjectedFault"],
    "memlife.online.compaction": ["SummarizerError"],
    "memlife.namespaces": ["NamespaceError"],
    "memlife.evalset": ["EvalSetError"],
    "memlife.policy": ["PolicyError"],
    "memlife.embed": ["EmbeddingModelError"],
    "memlife.audit": ["ReceiptWriteError"],
    "memlife.model": ["RecordError"],
}


def _classes() -> list[type[BaseException]]:
    return [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, BaseException) and c.__module__ == errors.__name__
    ]


@pytest.mark.parametrize(("module", "names"), sorted(HOMES.items()))
def test_old_homes_re_export_the_same_class(module: str, names: list[str]) -> None:
    mod = __import__(module, fromlist=names)
    for name in names:
        assert getattr(mod, name) is getattr(errors, name)


def test_every_error_is_a_memlife_error_and_keeps_its_builtin_base() -> None:
    classes = _classes()
    assert len(classes) >= 15
    for cls in classes:
        assert issubclass(cls, MemlifeError), cls
        if cls is not MemlifeError:  # callers still catch ValueError / RuntimeError
            assert issubclass(cls, (ValueError, RuntimeError)), cls


def test_bad_input_exits_2_failures_exit_1() -> None:
    assert errors.PolicyError("x").exit_code == errors.BAD_INPUT
    assert errors.RecordError("m-1", "content", "too long").exit_code == errors.BAD_INPUT
    assert errors.StoreError("x").exit_code == errors.FAILED
    assert errors.ConsolidationError(Reason.EMPTY_GROUP).exit_code == errors.FAILED


def test_known_codes_become_reasons_and_backend_codes_stay_strings() -> None:
    assert errors.StoreError("x", code="QUOTA_EXCEEDED").code is Reason.QUOTA_EXCEEDED
    assert errors.StoreError("x").code is Reason.STORE_ERROR
    assert errors.StoreError("x", code="SIDECAR_Weird").code == "SIDECAR_Weird"
    assert errors.PolicyError("x").code is Reason.INVALID_POLICY
    exc = ConsolidationError("UNGROUNDED_CLAIM", "claim 2")
    assert exc.code == "UNGROUNDED_CLAIM" and str(exc) == "UNGROUNDED_CLAIM: claim 2"


def test_errors_survive_pickling_as_their_class() -> None:
    # Prefect moves task exceptions between processes.
    exc = pickle.loads(pickle.dumps(errors.StoreError("boom", code="THROTTLED")))
    assert isinstance(exc, errors.StoreError) and str(exc) == "boom"


def test_survivor_outside_the_group_has_its_own_code() -> None:
    rec = MemoryRecord(
        id="m-1",
        actor_id="u",
        namespace="/n",
        memory_type="semantic",
        content="x",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    group = Group("k", "u", "/n", "s", [rec], survivor_id="m-9")
    with pytest.raises(ConsolidationError) as info:
        pick_survivor(group)
    assert info.value.code is Reason.SURVIVOR_NOT_IN_GROUP
    assert info.value.code != Reason.UNKNOWN_SOURCE  # that one means "source id not in group"


def test_cli_turns_a_memlife_error_into_one_line_and_its_exit_code() -> None:
    from memlife.cli import one_line_error

    assert one_line_error(errors.PolicyError("policies/x.yaml: key 'a'\n bad")) == (
        "policies/x.yaml: key 'a' bad",
        2,
    )
    message, code = one_line_error(errors.StoreError("quota", code="QUOTA_EXCEEDED"))
    assert (message, code) == ("StoreError: quota", 1)


def test_every_exception_class_in_memlife_is_a_memlife_error() -> None:
    """Wherever a module defines its own exception, it joins the one hierarchy."""
    import importlib
    import pkgutil

    import memlife

    strays = []
    for info in pkgutil.walk_packages(memlife.__path__, "memlife."):
        if info.name.endswith("__main__"):  # runs the CLI
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
                and not issubclass(obj, MemlifeError)
                # a stop signal is no error: cli.Stopped (SIGTERM) is a KeyboardInterrupt so
                # that no `except Exception` swallows it (audit 52j); it joins Ctrl-C's kind
                and not issubclass(obj, KeyboardInterrupt)
            ):
                strays.append(f"{module.__name__}.{obj.__name__}")
    assert not strays, f"exceptions outside MemlifeError: {strays}"


def test_file_sink_refuses_a_sibling_folder_with_the_same_prefix(tmp_path) -> None:
    from memlife.audit import FileSink

    sink = FileSink(tmp_path / "receipts")
    (tmp_path / "receipts2").mkdir()
    with pytest.raises(ValueError, match="escapes"):
        sink.put_new("../receipts2/x.json", b"{}")
    assert not (tmp_path / "receipts2" / "x.json").exists()
    assert sink.put_new("runs/a.json", b"{}")


def test_file_sink_refuses_keys_and_links_that_leave_the_folder(tmp_path) -> None:
    """The folder part of a key is resolved once per folder (the evidence chain reads
    thousands of receipts): that shortcut must refuse what the full resolve refused."""
    from memlife.audit import FileSink

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_bytes(b"{}")
    sink = FileSink(tmp_path / "receipts")
    assert sink.put_new("operations/a.json", b"{}")
    for key in ("operations/..", "operations/", "/etc/passwd", "operations/../../outside/x.json",
                "a/../../outside/secret.json"):  # fmt: skip
        with pytest.raises(ValueError):
            sink.get(key)
    (tmp_path / "receipts" / "operations" / "link.json").symlink_to(outside / "secret.json")
    with pytest.raises(ValueError, match="escapes"):
        sink.get("operations/link.json")  # a file link out of the folder
    (tmp_path / "receipts" / "runs").symlink_to(outside)
    with pytest.raises(ValueError, match="escapes"):
        sink.put_new("runs/new.json", b"{}")  # a folder link out of the folder
    assert not (outside / "new.json").exists()
    assert sink.get("operations/a.json") == b"{}" and sink.get("operations/none.json") is None
