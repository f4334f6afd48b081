"""Loads the unreleased transformers DeepSeek-V4.1 source (PR-branch snapshot) into an installed release.

No transformers release on PyPI contains `transformers.models.deepseek_v41` (5.23.0 and 5.24.0 checked).
The newest public version of the model is a snapshot of the PR branch; its three files are fetched by
hand (see tools/reference/README.md) into a folder OUTSIDE this repository and registered here as the
package `transformers.models.deepseek_v41` of the installed release. Every file's sha256 is checked
first: a different file means a different reference, so the script refuses to run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys

REQUIRED_TRANSFORMERS = "5.24.0"

# The configuration file is not stored at the modeling file's commit; f026c83 is the newest stored
# version and the one whose classes the dfcfb77 modeling imports (text, vision and composite configs).
SOURCE_FILES = {
    "modeling_deepseek_v41.py": dict(
        commit="dfcfb777ee5bfaf80278369d556188b86d7e1b0b",
        sha256="3c1f1579d763023bce14eeef77e8b3a054697e38490d1233a7dc625234258509", chars=149999),
    "configuration_deepseek_v41.py": dict(
        commit="f026c8315a275221a61e087edc3536f341e55f09",
        sha256="fa31e747db62e4da82f1632a90cc07d2e1414b465c03baffc3b8e37ba86d2748", chars=30896),
    "__init__.py": dict(
        commit="34890d8dd52aed77d8faefc1825c5f204cc59591",
        sha256="f06a66958e90ba22db3155059d0974a567fae726d9e59f21be0e12c9c37fb3c0", chars=1010),
}
REPO_PATH = "src/transformers/models/deepseek_v41/"
PACKAGE = "transformers.models.deepseek_v41"


def raw_url(name: str) -> str:
    return f"https://raw.githubusercontent.com/huggingface/transformers/{SOURCE_FILES[name]['commit']}/{REPO_PATH}{name}"


def verify_source(folder: str) -> dict:
    """sha256 of every source file, or SystemExit naming the first file that is missing or differs."""
    found = {}
    for name, want in SOURCE_FILES.items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            sys.exit(f"missing {path}; fetch it from {raw_url(name)} (see tools/reference/README.md)")
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        if digest != want["sha256"]:
            sys.exit(f"{path} has sha256 {digest}, expected {want['sha256']} ({raw_url(name)}); refusing to run")
        found[name] = {"commit": want["commit"], "sha256": digest, "url": raw_url(name)}
    return found


def register_source(folder: str):
    """Import the verified folder as `transformers.models.deepseek_v41` (its relative imports need that name)."""
    import transformers

    if transformers.__version__ != REQUIRED_TRANSFORMERS:
        sys.exit(f"need transformers=={REQUIRED_TRANSFORMERS}, found {transformers.__version__}")
    spec = importlib.util.spec_from_file_location(
        PACKAGE, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = module
    spec.loader.exec_module(module)
    return importlib.import_module(PACKAGE + ".modeling_deepseek_v41")


def new_cache(config):
    """The cache `DynamicCache(config=config)` builds on the PR branch.

    The branch's `get_layer_types_and_kwargs` hands `config` to every cache layer once a
    `shared_compressed_attention` layer exists; 5.24.0's per-layer version hands it to none of them,
    so `DeepseekV41CSACache(config)` fails there. Same layers, built directly.
    """
    from transformers.cache_utils import Cache, DynamicCache, DynamicSlidingWindowLayer

    modeling = sys.modules[PACKAGE + ".modeling_deepseek_v41"]
    layers = [modeling.DeepseekV41CSACache(config=config) if kind == "shared_compressed_attention"
              else DynamicSlidingWindowLayer(sliding_window=config.sliding_window)
              for kind in config.layer_types]
    cache = DynamicCache.__new__(DynamicCache)
    Cache.__init__(cache, layers=layers)
    return cache
