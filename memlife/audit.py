"""Receipt sinks: where evidence goes. ``file://`` (default ``.memlife/receipts``) or ``s3://``.

Every write is create-only: ``put_new`` returns False when the key already exists and
never overwrites it (S3 ``If-None-Match: *``; a hard link for files, which fails when the
name is taken). A rerun that finds its evidence already written simply moves on.
Layout (DESIGN.md "Receipts"):
    runs/{yyyy}/{mm}/{dd}/{run_id}/manifest.json | receipt.json | operations.parquet
    operations/{operation_id}.json
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from memlife.errors import ReceiptReadError as ReceiptReadError  # one hierarchy; re-exported
from memlife.errors import ReceiptWriteError as ReceiptWriteError  # moved; re-exported
from memlife.settings import endpoint_problem, settings, without_password

DEFAULT_RECEIPTS_URL = "file://.memlife/receipts"


def holds_exactly(sink: ReceiptSink, key: str, body: bytes) -> bool:
    """``key`` holds exactly ``body`` (a killed attempt's file a seal may name as its own,
    audit 47k); one this role cannot read (403) is not provably that file."""
    try:
        return sink.get(key) == body
    except (ReceiptReadError, OSError):  # a 403; a folder, a file this user may not read
        return False


class ReceiptSink(Protocol):
    url: str

    def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
        """Create ``key``; False (and nothing written) when it already exists."""
        ...

    def get(self, key: str) -> bytes | None: ...

    def list(self, prefix: str) -> Iterator[str]: ...

    def location(self, key: str) -> str: ...


def run_prefix(run_id: str, started: datetime) -> str:
    return f"runs/{started:%Y/%m/%d}/{run_id}"


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, indent=1, default=str).encode()


class FileSink:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.url = f"file://{self.root}"

    @cached_property
    def _real_root(self) -> Path:
        return self.root.resolve()  # once: a run's evidence chain reads every receipt

    def _path(self, key: str) -> Path:
        """The file of ``key``, refused when it would land outside the receipts folder
        (``..``, an absolute key, a symlink out). The folder part is resolved once per
        folder (every operation receipt shares one): a full resolve per key was most of
        the evidence chain's time on a rerun (10k receipts)."""
        folder, _, name = key.rpartition("/")
        if name in ("", ".", ".."):
            raise ValueError(f"receipt key {key!r} names no file in the receipts folder")
        path = self._folder(folder) / name
        if path.is_symlink():  # a link may point anywhere: where it lands decides
            real = path.resolve()
            if not real.is_relative_to(self._real_root):
                raise ValueError(f"receipt key {key!r} escapes the receipts folder")
        return path

    def _folder(self, folder: str) -> Path:
        cache: dict[str, Path] = self.__dict__.setdefault("_folders", {})
        real = cache.get(folder)
        if real is None:
            real = (self.root / folder).resolve()
            if not real.is_relative_to(self._real_root):  # a string prefix let receipts2/ pass
                raise ValueError(f"receipt folder {folder!r} escapes the receipts folder")
            if len(cache) < 4096:  # run folders are one a day: a bounded memo is plenty
                cache[folder] = real
        return real

    def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            return False
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, path)  # atomic create-only: fails if the name exists
            except FileExistsError:
                return False
            return True
        except OSError as exc:
            raise ReceiptWriteError(f"{self.url}/{key}: {exc}") from exc
        finally:
            Path(tmp).unlink(missing_ok=True)

    def get(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except (FileNotFoundError, NotADirectoryError):  # as exists() said: not there
            return None

    def list(self, prefix: str) -> Iterator[str]:
        base = self.root / prefix
        start = base if base.is_dir() else base.parent
        if not start.exists():
            return
        for p in sorted(start.rglob("*")):
            if p.is_file() and not p.name.startswith(".tmp-"):
                key = p.relative_to(self.root).as_posix()
                if key.startswith(prefix):
                    yield key

    def location(self, key: str) -> str:
        return str(self.root / key)


class S3Sink:
    """Receipts in S3 through boto3 (standard credential chain; optional endpoint URL)."""

    concurrent_gets = 16  # a GET is a round trip: the evidence chain reads many at once

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        client: Any = None,
    ):
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.client = client or boto3.client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region,
            config=Config(
                retries={"mode": "standard", "max_attempts": 5},
                max_pool_connections=self.concurrent_gets,
            ),
        )

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_new(self, key: str, body: bytes, content_type: str = "application/json") -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=self._key(key),
                Body=body,
                ContentType=content_type,
                IfNoneMatch="*",
            )
            return True
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status == 412:
                return False
            raise ReceiptWriteError(f"{self.url}/{key}: {code or exc}") from exc
        except BotoCoreError as exc:
            raise ReceiptWriteError(f"{self.url}/{key}: {exc}") from exc

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            body: bytes = self.client.get_object(Bucket=self.bucket, Key=self._key(key))[
                "Body"
            ].read()
            return body
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                return None
            raise ReceiptReadError(key, str(code)) from exc
        except BotoCoreError as exc:  # no answer, or a body cut: named as a refusal is
            # (a bare botocore error stopped every check of verify, audit 53g)
            raise ReceiptReadError(key, type(exc).__name__) from exc

    def list(self, prefix: str) -> Iterator[str]:
        """Keys under ``prefix``; a listing S3 refuses (SlowDown after the retries, a 500)
        or the network cuts is a ReceiptReadError naming the prefix, as a GET's is: a bare
        botocore error stopped verify, history and list with no key named (audit 53g)."""
        from botocore.exceptions import BotoCoreError, ClientError

        cut = len(self.prefix) + 1 if self.prefix else 0
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self._key(prefix)
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    yield obj["Key"][cut:]
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code") or "error")
            raise ReceiptReadError(prefix, code) from exc
        except BotoCoreError as exc:
            raise ReceiptReadError(prefix, type(exc).__name__) from exc

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def overwritten(self, prefix: str) -> tuple[str, ...] | None:
        """Keys under ``prefix`` with more than one version. Evidence is written once
        (``put_new``), so on a versioned bucket a later version is an overwrite: Object
        Lock keeps the first, but a reader of the current version would see the second.
        None where the versions cannot be listed (no s3:ListBucketVersions; an endpoint
        without the call). Any other refusal (SlowDown, a 500) is a ReceiptReadError: read
        as "not allowed", a throttled listing verified a receipt overwritten (audit 51g)."""
        from botocore.exceptions import BotoCoreError, ClientError

        seen: dict[str, int] = {}
        try:
            pages = self.client.get_paginator("list_object_versions").paginate(
                Bucket=self.bucket, Prefix=self._key(prefix)
            )
            for page in pages:
                for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]:
                    seen[v["Key"]] = seen.get(v["Key"], 0) + 1
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code") or "error")
            if code in _VERSIONS_NOT_LISTABLE:
                return None
            raise ReceiptReadError(prefix, code) from exc
        except BotoCoreError as exc:  # no answer at all (a cut connection): named, never a crash
            raise ReceiptReadError(prefix, type(exc).__name__) from exc
        cut = len(self.prefix) + 1 if self.prefix else 0
        return tuple(k[cut:] for k, n in sorted(seen.items()) if n > 1)


# the refusals that mean this reader cannot list versions at all: the check is skipped
_VERSIONS_NOT_LISTABLE = frozenset({"AccessDenied", "NotImplemented"})

S3_PARAMS = frozenset({"endpoint_url", "region"})


def receipts_url_problem(url: str) -> str | None:
    """Why ``url`` is no receipts location, or None. Strict, because evidence written
    elsewhere than the operator meant is lost evidence: ``file:/x`` (one slash) used to
    become the relative folder ``mp/...``, and a misspelled S3 parameter sent receipts to
    AWS itself."""
    if url != url.strip():
        return "has leading or trailing spaces"
    parsed = urlparse(url)
    if parsed.scheme == "file":
        if not url.startswith("file://") or not url[len("file://") :]:
            return "use file://path (two slashes; file:///abs/path for an absolute path)"
        if "?" in url or "#" in url:  # 'receipts?region=..' would become the folder's name
            return "a file:// URL takes no query string or fragment ('?', '#'): give only the path"
        if url[len("file://") :].startswith("~"):  # no shell expands it: a folder named '~'
            return "no shell expands '~' in file://~/...: give the folder's full path"
        return None
    if parsed.scheme == "s3":
        if not parsed.netloc:
            return "names no bucket (s3://bucket/prefix)"
        unknown = sorted(set(parse_qs(parsed.query, keep_blank_values=True)) - S3_PARAMS)
        if unknown:
            return f"unknown parameter {', '.join(unknown)} (known: {', '.join(sorted(S3_PARAMS))})"
        for endpoint in parse_qs(parsed.query, keep_blank_values=True).get("endpoint_url", []):
            if (problem := endpoint_problem(endpoint)) is not None:
                return f"endpoint_url: {problem}"
        return None
    return "use file://path or s3://bucket/prefix"


def as_sink(receipts: str | ReceiptSink | None) -> ReceiptSink:
    """The sink given, or the one a URL names (None: ``MEMLIFE_RECEIPTS``, the default)."""
    return (
        receipts if receipts is not None and not isinstance(receipts, str) else open_sink(receipts)
    )


def open_sink(url: str | None = None) -> ReceiptSink:
    """``file://path`` (relative or absolute) or ``s3://bucket/prefix?endpoint_url=..&region=..``."""
    url = url or settings().receipts_url
    problem = receipts_url_problem(url)
    if problem is not None:
        # printed by the CLI, kept by Prefect: never an endpoint's password
        raise ValueError(f"receipts URL {without_password(url)!r}: {problem}")
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return FileSink(url[len("file://") :])
    q = {k: v[0] for k, v in parse_qs(parsed.query).items()}
    endpoint = q.get("endpoint_url") or settings().s3_endpoint_url
    return S3Sink(parsed.netloc, parsed.path, endpoint_url=endpoint, region=q.get("region"))
