"""The order a betting test takes a unit's examples in: pseudo-random, fixed by the examples.

A betting test (regress.stats.bounded_mean) stakes on each value in turn, and its guarantee
asks each value's expectation, given the ones before it, to respect the null. Taken in the
dataset's order that fails where the order has structure: a group unit runs task by task (an
MMLU subject, a built-in skill), and a run of examples that all moved one way can carry the
wealth past 1/alpha though the unit's mean did not move. The stored order is no better: it
is the dataset's, or whatever order the run that made the baseline saved.

So every betting test takes its examples sorted by a hash of each one's name (task, doc_id
and doc_hash; a judged turn adds its turn): a permutation fixed before any answer is seen,
the same for any run of the same examples (fixed or sequential, sharded or cached, a subset
or the whole), which interleaves the blocks as a random shuffle would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from regress.core.judgements import Judgement
from regress.core.records import Record


def betting_order(keys: Sequence[str]) -> np.ndarray:
    """Indices of `keys` (one per example, naming it) in the order a betting test takes
    them: by each key's sha256, so the order depends on which examples they are alone."""
    digests = [hashlib.sha256(key.encode()).digest() for key in keys]
    return np.asarray(sorted(range(len(keys)), key=digests.__getitem__), dtype=int)


def record_key(record: Record) -> str:
    """An example's name for `betting_order`: its task, doc_id and document hash."""
    return f"{record.task}/{record.doc_id}/{record.doc_hash}"


def judgement_key(judgement: Judgement) -> str:
    """A judged example's name for `betting_order`: its task, doc_id and turn (None: the
    whole example)."""
    return f"{judgement.task}/{judgement.doc_id}/{judgement.turn}"
