"""Instructions (text) to copy model weights into a Cloud Storage bucket, and the HF hub paths.

Nothing here calls an API or downloads anything: the steps are for a person to run. Every value
that lands in a command is validated and shell-quoted.
"""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel, Field

from mcp_tools.errors import UserError
from mcp_tools.names import (
    describe,
    validate_bucket,
    validate_model_id,
    validate_object_prefix,
    validate_project,
    validate_secret_id,
)
from mcp_tools.settings import get_settings

HF_ENDPOINT = "https://huggingface.co"
_REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")
_GS_URI_RE = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](?:/[^\x00-\x1f\x7f]*)?$")
_VERTEX_MODEL_RE = re.compile(
    r"^(?:projects/[^/\s]+/locations/[a-z0-9-]+/models/)?(?:publishers/[a-z0-9-]+/models/)?[A-Za-z0-9._@-]{1,128}$"
)


class CopyInstructions(BaseModel):
    source: str
    destination: str = Field(description="gs:// URI the weights end up at")
    steps: list[str] = Field(description="commands to run, in order, every value shell-quoted")
    text: str = Field(description="the steps as readable Markdown")
    notes: list[str]


class HubDownloadPath(BaseModel):
    model_id: str
    revision: str
    repo_url: str
    file_url_pattern: str = Field(description="URL of one file: replace {filename}")
    file_url: str | None = Field(default=None, description="URL of the named file, if one was given")
    cache_dir: str = Field(
        description="where huggingface_hub caches the repo; HF_HOME defaults to ~/.cache/huggingface"
    )
    snapshot_path_pattern: str
    download_command: str


def _destination(bucket: str, prefix: str, name: str) -> tuple[str, str]:
    bucket_name = validate_bucket(bucket)
    sub = validate_object_prefix(prefix, "destination_prefix").strip("/")
    path = f"{sub}/{name}" if sub else name
    return bucket_name, f"gs://{bucket_name}/{path}"


def _render(title: str, steps: list[tuple[str, str]], notes: list[str]) -> str:
    lines = [f"## {title}", ""]
    for n, (what, cmd) in enumerate(steps, 1):
        lines += [f"{n}. {what}", "", "```sh", cmd, "```", ""]
    if notes:
        lines += ["Notes:", *(f"- {n}" for n in notes)]
    return "\n".join(lines).rstrip() + "\n"


def _check_revision(revision: str) -> str:
    if not isinstance(revision, str) or not _REVISION_RE.match(revision) or ".." in revision:
        raise UserError(f"revision {describe(revision)} is not a valid branch, tag or commit")
    return revision


def get_huggingface_model_copy_instructions(
    model_id: str,
    bucket: str,
    *,
    destination_prefix: str = "models",
    revision: str = "main",
    hf_token_secret: str = "hf-token",
    project: str | None = None,
) -> CopyInstructions:
    """Steps to copy a Hugging Face model's weights into ``gs://bucket/destination_prefix/<name>``."""
    model_id = validate_model_id(model_id)
    revision = _check_revision(revision)
    secret = validate_secret_id(hf_token_secret)
    name = model_id.split("/")[1]
    _, dest = _destination(bucket, destination_prefix, name)
    project_id = project or get_settings().project
    proj = [f"--project={validate_project(project_id)}"] if project_id else []
    local = f"./{name}"
    q = shlex.quote
    steps = [
        ("Install the Hugging Face CLI.", "python3 -m pip install -U 'huggingface_hub[hf_transfer]'"),
        (
            "Read the token from Secret Manager into the environment (never paste it into a chat).",
            'export HF_TOKEN="$(gcloud secrets versions access latest '
            + " ".join(q(a) for a in [f"--secret={secret}", *proj])
            + ')"',
        ),
        (
            "Download the weights (safetensors, config and tokenizer files).",
            " ".join(
                q(a)
                for a in [
                    "hf",
                    "download",
                    model_id,
                    f"--revision={revision}",
                    f"--local-dir={local}",
                    "--exclude=*.bin",
                    "--exclude=*.pth",
                    "--exclude=original/*",
                ]
            ),
        ),
        (
            "Copy them to the bucket.",
            f"gcloud storage cp --recursive {q(local)}/* " + " ".join(q(a) for a in [f"{dest}/", *proj]),
        ),
        (
            "Check that the folder is recognised as a model.",
            " ".join(q(a) for a in ["gcloud", "storage", "ls", "--long", f"{dest}/", *proj]),
        ),
    ]
    notes = [
        "Gated models (Gemma among them) need the license accepted on the model page "
        "with the token's account.",
        "Run the copy from a VM or Cloud Shell in the bucket's region to avoid egress through your machine.",
        "list_bucket_models then shows the folder, its size, shard count and quantization.",
    ]
    return CopyInstructions(
        source=f"{HF_ENDPOINT}/{model_id}",
        destination=dest,
        steps=[cmd for _, cmd in steps],
        text=_render(f"Copy {model_id} from Hugging Face to {dest}", steps, notes),
        notes=notes,
    )


def get_vertex_ai_model_copy_instructions(
    model: str,
    bucket: str,
    *,
    source_uri: str | None = None,
    destination_prefix: str = "models",
    project: str | None = None,
) -> CopyInstructions:
    """Steps to copy a Vertex AI model's weights (Model Garden or Model Registry) into a bucket.

    ``model``: a Model Garden id (``publishers/google/models/gemma...`` or just its name) or a
    registry model resource name; ``source_uri``: the ``gs://`` artifact URI when known (from
    ``list_vertex_models`` or the model card).
    """
    if not isinstance(model, str) or not _VERTEX_MODEL_RE.match(model):
        raise UserError(f"model {describe(model)} is not a Vertex AI model id or resource name")
    if source_uri is not None and (not isinstance(source_uri, str) or not _GS_URI_RE.match(source_uri)):
        raise UserError(f"source_uri {describe(source_uri)} must be a gs:// URI")
    name = model.rsplit("/", 1)[-1].split("@", 1)[0]
    _, dest = _destination(bucket, destination_prefix, name)
    project_id = project or get_settings().project
    proj = [f"--project={validate_project(project_id)}"] if project_id else []
    q = shlex.quote
    src = source_uri.rstrip("/") if source_uri else None
    steps: list[tuple[str, str]] = []
    if src is None:
        if model.startswith("projects/"):
            region = model.split("/")[3]
            steps.append(
                (
                    "Find the model's artifact URI in the Model Registry (or use list_vertex_models).",
                    " ".join(
                        q(a)
                        for a in [
                            "gcloud",
                            "ai",
                            "models",
                            "describe",
                            model,
                            f"--region={region}",
                            "--format=value(artifactUri)",
                            *proj,
                        ]
                    ),
                )
            )
        else:
            steps.append(
                (
                    "Open the model card in Vertex AI Model Garden, accept the license, and note the "
                    "gs:// URI of the weights it shows for download (or deploy once and read the "
                    "artifact URI from list_vertex_models).",
                    "echo 'set SOURCE_URI to the gs:// URI from the model card'",
                )
            )
        src_arg = '"$SOURCE_URI"'
    else:
        src_arg = q(f"{src}/*")
    steps.append(
        (
            "Copy the weights into your bucket (server-side: nothing passes through your machine).",
            "gcloud storage cp --recursive "
            + (f"{src_arg}/*" if src is None else src_arg)
            + " "
            + " ".join(q(a) for a in [f"{dest}/", *proj]),
        )
    )
    steps.append(
        (
            "Check that the folder is recognised as a model.",
            " ".join(q(a) for a in ["gcloud", "storage", "ls", "--long", f"{dest}/", *proj]),
        )
    )
    notes = [
        "The copy needs roles/storage.objectViewer on the source and "
        "roles/storage.objectCreator on the bucket.",
        "Keep the bucket in the region the service runs in: "
        "loading weights across regions is slow and billed.",
    ]
    return CopyInstructions(
        source=src or model,
        destination=dest,
        steps=[cmd for _, cmd in steps],
        text=_render(f"Copy Vertex AI model {name} to {dest}", steps, notes),
        notes=notes,
    )


def get_huggingfacehub_download_path(
    model_id: str, *, revision: str = "main", filename: str | None = None
) -> HubDownloadPath:
    """The Hugging Face hub URLs and local cache layout for ``model_id`` (no network call)."""
    model_id = validate_model_id(model_id)
    revision = _check_revision(revision)
    file_url = None
    if filename is not None:
        fname = validate_object_prefix(filename, "filename")
        if not fname or fname.endswith("/"):
            raise UserError(f"filename {describe(filename)} must name a file in the repo")
        file_url = f"{HF_ENDPOINT}/{model_id}/resolve/{revision}/{fname}"
    org, name = model_id.split("/")
    cache_dir = f"$HF_HOME/hub/models--{org}--{name}"
    return HubDownloadPath(
        model_id=model_id,
        revision=revision,
        repo_url=f"{HF_ENDPOINT}/{model_id}",
        file_url_pattern=f"{HF_ENDPOINT}/{model_id}/resolve/{revision}/{{filename}}",
        file_url=file_url,
        cache_dir=cache_dir,
        snapshot_path_pattern=f"{cache_dir}/snapshots/{{commit_sha}}/",
        download_command=" ".join(
            shlex.quote(a) for a in ["hf", "download", model_id, f"--revision={revision}"]
        ),
    )
