"""YAML for files a pull request can change (suites, policies): safe tags, bounded size.

PyYAML's safe loader shares an aliased node instead of copying it, so a few hundred bytes of
nested aliases (a "billion laughs") describe a value with billions of elements, which blows
up whatever walks or prints it. `load` counts the nodes the document expands to (aliases
included, each shared subtree counted once per use, without expanding it) and refuses a
document above `MAX_NODES` or `MAX_BYTES` before anything is built.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_BYTES = 1024 * 1024
"""A suite or policy is a few kilobytes; anything near this is not one."""
MAX_NODES = 200_000
"""Scalars, lists and mappings after alias expansion (a suite's `docs:` lists fit easily)."""


class YamlTooLarge(yaml.YAMLError):
    """The document is larger than a configuration file can be, or its aliases expand to one.

    A `yaml.YAMLError`, so callers that already turn YAML errors into one line handle it.
    """

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        """Read by error formatters the way they read a parser error's `problem`."""


def load(text: str, loader_class: type[yaml.SafeLoader] = yaml.SafeLoader) -> Any:
    """Parse one YAML document like `yaml.safe_load`, refusing oversized or alias-bomb input.

    `loader_class` may add constructors to the safe loader (task files read `!function` only
    to refuse it by name)."""
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_BYTES:
        raise YamlTooLarge(f"{size} bytes, more than the {MAX_BYTES} a configuration file may be")
    loader = loader_class(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _count(node, {}, set())
        return loader.construct_document(node)
    except RecursionError:
        raise YamlTooLarge("nested too deeply for a configuration file") from None
    finally:
        loader.dispose()


def _count(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Nodes under `node` with aliases expanded; memoised by identity, so linear in the text."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise YamlTooLarge("an alias refers to a node that contains it (recursive alias)")
    open_nodes.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    for child in children:
        total += _count(child, sizes, open_nodes)
        if total > MAX_NODES:
            raise YamlTooLarge(
                f"aliases expand to more than {MAX_NODES} values (an alias bomb?); "
                "write the values out or split the file"
            )
    open_nodes.discard(key)
    sizes[key] = total
    return total
