"""Model weight folders in a Cloud Storage bucket (google-cloud-storage).

A folder that holds ``config.json`` and at least one ``*.safetensors`` file is a model. The listing
is bounded (``max_objects``); a truncated listing says so.
"""

from __future__ import annotations

import json
import logging
import posixpath
from typing import Any

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.extras._common import EXTRAS
from mcp_tools.google_api import build_client, call
from mcp_tools.names import validate_bucket, validate_object_prefix
from mcp_tools.settings import get_settings

log = logging.getLogger(__name__)

MAX_CONFIG_BYTES = 1_000_000


class BucketModel(BaseModel):
    path: str = Field(description="folder inside the bucket, e.g. models/gemma-4-12B-it")
    uri: str = Field(description="gs://bucket/folder")
    size_bytes: int
    size_gib: float
    shard_count: int = Field(description="number of *.safetensors files")
    architecture: str | None = None
    model_type: str | None = None
    torch_dtype: str | None = None
    quantization: str | None = Field(default=None, description="quant_method from config.json, if any")
    config_error: str | None = None


class BucketModels(BaseModel):
    bucket: str
    prefix: str
    models: list[BucketModel]
    objects_scanned: int
    truncated: bool = Field(description="True when the listing stopped at max_objects")
    note: str | None = None


def _quantization(config: dict[str, Any]) -> str | None:
    for key in ("quantization_config", "compression_config"):
        q = config.get(key)
        if isinstance(q, dict):
            method = q.get("quant_method") or q.get("format")
            if method:
                return str(method)
    text_cfg = config.get("text_config")
    if isinstance(text_cfg, dict):
        return _quantization(text_cfg)
    return None


def list_bucket_models(bucket: str, prefix: str = "", *, max_objects: int = 5000) -> BucketModels:
    """Model folders (``config.json`` + ``*.safetensors``) under ``gs://bucket/prefix``."""
    settings = get_settings()
    bucket_name = validate_bucket(bucket)
    prefix = validate_object_prefix(prefix)
    if isinstance(max_objects, bool) or not isinstance(max_objects, int) or not 1 <= max_objects <= 100_000:
        raise UserError(f"max_objects must be from 1 to 100000, got {max_objects!r}")

    from google.cloud import storage  # type: ignore[attr-defined]

    client = build_client(
        storage.Client,
        settings,
        endpoint=settings.storage_api_endpoint,
        handwritten=True,
        timeout_s=EXTRAS.timeout_s,
        project=settings.project,
    )

    folders: dict[str, dict[str, Any]] = {}
    scanned = 0
    truncated = False

    def _scan() -> None:
        nonlocal scanned, truncated
        blobs = client.list_blobs(
            bucket_name,
            prefix=prefix or None,
            max_results=max_objects + 1,
            page_size=1000,
            fields="items(name,size),nextPageToken",
            **EXTRAS.rpc,
        )
        for blob in blobs:
            if scanned >= max_objects:
                truncated = True
                break
            scanned += 1
            folder, base = posixpath.split(blob.name)
            entry = folders.setdefault(folder, {"size": 0, "shards": 0, "config": None})
            entry["size"] += int(blob.size or 0)
            if base == "config.json":
                entry["config"] = blob.name
            elif base.endswith(".safetensors"):
                entry["shards"] += 1

    call(
        f"Cloud Storage (list gs://{bucket_name}/{prefix})",
        _scan,
        policy=EXTRAS,
        not_found=f"bucket {bucket_name!r} not found",
    )

    models: list[BucketModel] = []
    for folder, entry in sorted(folders.items()):
        if not entry["config"] or not entry["shards"]:
            continue
        model = BucketModel(
            path=folder,
            uri=f"gs://{bucket_name}/{folder}" if folder else f"gs://{bucket_name}",
            size_bytes=entry["size"],
            size_gib=round(entry["size"] / 2**30, 2),
            shard_count=entry["shards"],
        )
        _read_config(client, bucket_name, entry["config"], model)
        models.append(model)

    note = None
    if truncated:
        note = f"stopped after {max_objects} objects: pass a narrower prefix or a larger max_objects"
    elif not models:
        note = "no folder with config.json and *.safetensors found"
    return BucketModels(
        bucket=bucket_name,
        prefix=prefix,
        models=models,
        objects_scanned=scanned,
        truncated=truncated,
        note=note,
    )


def _read_config(client: Any, bucket_name: str, name: str, model: BucketModel) -> None:
    """Fill architecture / dtype / quantization from config.json; record why when unreadable."""
    from mcp_tools.errors import ExternalError

    try:
        blob = client.bucket(bucket_name).blob(name)
        data = call(
            f"Cloud Storage (read gs://{bucket_name}/{name})",
            lambda: blob.download_as_bytes(start=0, end=MAX_CONFIG_BYTES - 1, **EXTRAS.rpc),
            policy=EXTRAS,
        )
        config = json.loads(data)
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except (ExternalError, UserError, ValueError) as exc:
        model.config_error = f"config.json unreadable: {str(exc)[:160]}"
        return
    archs = config.get("architectures")
    if isinstance(archs, list) and archs:
        model.architecture = str(archs[0])
    model.model_type = str(config["model_type"]) if config.get("model_type") else None
    dtype = config.get("torch_dtype") or config.get("dtype")
    if not dtype and isinstance(config.get("text_config"), dict):
        dtype = config["text_config"].get("torch_dtype") or config["text_config"].get("dtype")
    model.torch_dtype = str(dtype) if dtype else None
    model.quantization = _quantization(config)
