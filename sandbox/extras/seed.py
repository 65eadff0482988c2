"""Seeding helpers: realistic content for the emulated extras (model folders, quotas, models)."""

from __future__ import annotations

import json
from typing import Any

from sandbox.extras.state import ExtrasState

RUN_SERVICE = "run.googleapis.com"


def seed_model_folder(
    state: ExtrasState,
    bucket: str,
    folder: str,
    *,
    config: dict[str, Any] | str | None,
    shards: int = 2,
    shard_size: int = 5 * 2**30,
    extra_files: dict[str, int] | None = None,
) -> None:
    """A Hugging Face style weights folder: config.json (a dict, raw text, or None to omit it),
    ``shards`` safetensors files of ``shard_size`` reported bytes, and tokenizer files."""
    prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
    if config is not None:
        raw = config if isinstance(config, str) else json.dumps(config)
        state.put_object(bucket, f"{prefix}config.json", raw.encode(), content_type="application/json")
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors" if shards > 1 else "model.safetensors"
        state.put_object(bucket, f"{prefix}{name}", b"", size=shard_size)
    if shards > 1:
        state.put_object(
            bucket, f"{prefix}model.safetensors.index.json", b"{}", content_type="application/json"
        )
    state.put_object(bucket, f"{prefix}tokenizer.json", b"{}", content_type="application/json")
    for name, size in (extra_files or {}).items():
        state.put_object(bucket, f"{prefix}{name}", b"", size=size)


def gpu_quota_info(
    project: str,
    quota_id: str,
    *,
    regions: dict[str, int],
    default: int | None = None,
    other_regions: list[str] | None = None,
    display_name: str = "",
) -> dict[str, Any]:
    """A Cloud Quotas ``QuotaInfo`` (REST JSON) with a per-region value for each of ``regions`` and,
    if ``default`` is set, one region-less entry that applies to ``other_regions``."""
    infos: list[dict[str, Any]] = [
        {"dimensions": {"region": r}, "details": {"value": str(v)}, "applicableLocations": [r]}
        for r, v in regions.items()
    ]
    if default is not None:
        infos.append({"details": {"value": str(default)}, "applicableLocations": list(other_regions or [])})
    return {
        "name": f"projects/{project}/locations/global/services/{RUN_SERVICE}/quotaInfos/{quota_id}",
        "quotaId": quota_id,
        "metric": f"{RUN_SERVICE}/{quota_id}",
        "service": RUN_SERVICE,
        "isPrecise": True,
        "containerType": "PROJECT",
        "dimensions": ["region"],
        "quotaDisplayName": display_name or quota_id,
        "metricDisplayName": display_name or quota_id,
        "metricUnit": "1",
        "dimensionsInfos": infos,
    }


def seed_run_gpu_quotas(state: ExtrasState, project: str) -> None:
    """Cloud Run quotas as a project that was granted L4s without zonal redundancy in two regions:
    the L4 quotas with and without zonal redundancy, an RTX PRO 6000 one, and non-GPU noise."""
    others = ["asia-southeast1", "europe-west4", "us-east4"]
    state.set_quota_infos(
        project,
        RUN_SERVICE,
        [
            gpu_quota_info(
                project,
                "CpuAllocPerProjectRegion",
                regions={"us-central1": 200},
                default=20,
                other_regions=others,
            ),
            gpu_quota_info(
                project,
                "NvidiaL4GpuAllocNoZonalRedundancyPerProjectRegion",
                regions={"us-central1": 3, "europe-west1": 1},
                default=0,
                other_regions=others,
                display_name=(
                    "Total Nvidia L4 GPU allocation without zonal redundancy, per project per region"
                ),
            ),
            gpu_quota_info(
                project,
                "NvidiaL4GpuAllocPerProjectRegion",
                regions={"us-central1": 1},
                default=0,
                other_regions=["europe-west1", *others],
                display_name="Total Nvidia L4 GPU allocation with zonal redundancy, per project per region",
            ),
            gpu_quota_info(
                project,
                "NvidiaRtxPro6000GpuAllocNoZonalRedundancyPerProjectRegion",
                regions={"us-central1": 0},
            ),
            gpu_quota_info(project, "MemAllocPerProjectRegion", regions={"us-central1": 400}),
        ],
    )


def vertex_model(
    project: str, location: str, model_id: str, display_name: str, *, artifact_uri: str = "", image: str = ""
) -> dict[str, Any]:
    """A Vertex AI ``Model`` (REST JSON)."""
    body: dict[str, Any] = {
        "name": f"projects/{project}/locations/{location}/models/{model_id}",
        "displayName": display_name,
        "versionId": "1",
        "createTime": "2026-05-01T10:00:00.000000Z",
        "updateTime": "2026-05-01T10:00:00.000000Z",
        "labels": {"source": "sandbox"},
    }
    if artifact_uri:
        body["artifactUri"] = artifact_uri
    if image:
        body["containerSpec"] = {"imageUri": image}
    return body


def seed_demo(state: ExtrasState, project: str, location: str, bucket: str = "sandbox-models") -> None:
    """A small, consistent world for demos and the main sandbox: a weights bucket with the reference
    Gemma 4 12B checkpoint (bf16, which does not fit one L4) and its QAT w4a16 variant (which does),
    Cloud Run GPU quotas, and one registered Vertex AI model pointing at the bucket."""
    seed_model_folder(
        state,
        bucket,
        "models/gemma-4-12B-it",
        config={
            "architectures": ["Gemma4ForConditionalGeneration"],
            "model_type": "gemma4",
            "torch_dtype": "bfloat16",
        },
        shards=5,
        shard_size=int(4.8 * 2**30),
    )
    seed_model_folder(
        state,
        bucket,
        "models/gemma-4-12B-it-qat-w4a16-ct",
        config={
            "architectures": ["Gemma4ForConditionalGeneration"],
            "model_type": "gemma4",
            "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "compressed-tensors"},
        },
        shards=2,
        shard_size=int(4.1 * 2**30),
    )
    seed_run_gpu_quotas(state, project)
    state.add_vertex_model(
        project,
        location,
        vertex_model(
            project,
            location,
            "1001",
            "gemma-4-12B-it-qat",
            artifact_uri=f"gs://{bucket}/models/gemma-4-12B-it-qat-w4a16-ct",
            image="vllm/vllm-openai:latest",
        ),
    )
