"""Inference servers sits-doctor does not read yet (SGLang, TGI, Ollama, llama.cpp, Infinity):
recognised by how a file starts them, so a deployment of one is reported as "not checked" instead
of being refused as an unknown file or judged by vLLM's rules.

Each pattern is a launch a user would write: the server's module or binary, its official image,
or (Ray Serve LLM) its server class. Comments are left out before matching, so a file that only
mentions a server in a comment is not taken for one.
"""

from __future__ import annotations

import re

# server -> launch patterns (regular expressions, matched against the file without its comments)
SERVERS: dict[str, tuple[str, ...]] = {
    # python -m sglang.launch_server (docs.sglang.ai "Server Arguments"), `sglang serve`, the
    # lmsysorg/sglang images, the router, and Ray Serve LLM's SGLangServer (ray.llm._internal.serve.engines.sglang)
    "SGLang": (r"\bsglang\.launch_server\b", r"\bsglang\s+serve\b", r"\blmsysorg/sglang\b", r"\bsglang_router\b",
               r"\bSGLangServer\b", r"\bdynamo\.sglang\b"),
    # NVIDIA Dynamo's own vLLM worker (python -m dynamo.vllm, ai-dynamo/dynamo components/backends/vllm): it adds
    # its own options to vLLM's engine arguments, so it is not judged as `vllm serve`
    "NVIDIA Dynamo's vLLM worker": (r"\bdynamo\.vllm\b",),
    # text-generation-launcher and ghcr.io/huggingface/text-generation-inference (huggingface/text-generation-inference)
    "Text Generation Inference": (r"\btext-generation-launcher\b", r"huggingface/text-generation-inference\b"),
    # KubeAI Model resources name their engine (spec.engine: OLlama / Infinity; kubeai.org/v1 Model)
    "Ollama": (r"\bollama\s+serve\b", r"\bollama/ollama\b", r"\bengine:\s*['\"]?OLlama\b"),
    "llama.cpp": (r"\bllama-server\b", r"ggml-org/llama\.cpp\b", r"\bllama_cpp\.server\b"),
    "Infinity": (r"\binfinity_emb\b", r"\bmichaelf34/infinity\b", r"\bengine:\s*['\"]?Infinity\b"),
}
_COMPILED = {name: re.compile("|".join(patterns)) for name, patterns in SERVERS.items()}
_COMMENT = re.compile(r"(?m)(^|\s)#.*$")  # YAML and shell comments (a '#' inside a word is kept)
TEXT_LIMIT = 1 << 20  # only a file's first MiB is looked at


def servers_in(text: str) -> list[str]:
    """The servers ``text`` starts, in SERVERS order (empty when none)."""
    bare = _COMMENT.sub(r"\1", text[:TEXT_LIMIT])
    return [name for name, pattern in _COMPILED.items() if pattern.search(bare)]


def note(servers: list[str]) -> str:
    """What a user is told about a deployment of ``servers``."""
    names = " and ".join(servers)
    return (f"runs {names}: not checked (sits-doctor reads vLLM, TensorRT-LLM, ONNX Runtime GenAI and transformers "
            f"deployments; {names} settings are not read, and vLLM's rules are not applied to them)")
