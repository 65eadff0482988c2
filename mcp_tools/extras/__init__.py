"""The GCP "extras" of the MCP toolset: deployment configs, quotas, buckets, Vertex, HF token, help.

Plain typed functions returning pydantic models; the MCP server registers them as tools under these
names. Each imports its Google client inside the function, so importing this package stays fast.
"""

from __future__ import annotations

from mcp_tools.extras.copy_instructions import (
    get_huggingface_model_copy_instructions,
    get_huggingfacehub_download_path,
    get_vertex_ai_model_copy_instructions,
)
from mcp_tools.extras.deploy_config import (
    TEMPLATE_URI,
    VllmServing,
    get_vllm_deployment_config,
    get_vllm_gpu_deployment_config,
    vllm_deployment_template,
)
from mcp_tools.extras.help import get_help
from mcp_tools.extras.quotas import check_gpu_quotas
from mcp_tools.extras.secrets import save_hf_token
from mcp_tools.extras.storage import list_bucket_models
from mcp_tools.extras.vertex import list_vertex_models

__all__ = [
    "TEMPLATE_URI",
    "VllmServing",
    "check_gpu_quotas",
    "get_help",
    "get_huggingface_model_copy_instructions",
    "get_huggingfacehub_download_path",
    "get_vertex_ai_model_copy_instructions",
    "get_vllm_deployment_config",
    "get_vllm_gpu_deployment_config",
    "list_bucket_models",
    "list_vertex_models",
    "save_hf_token",
    "vllm_deployment_template",
]
