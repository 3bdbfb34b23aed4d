"""Token-level semantics every backend shares, so that backends agree with lm-eval and
with each other: how a (context, continuation) pair is tokenised, how an over-long request
is fitted to the window, and how a long text is cut into rolling windows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

Encode = Callable[[str], list[int]]


def encode_pair(
    encode: Encode, context: str, continuation: str, prefix_token: int
) -> tuple[list[int], list[int]]:
    """Tokenise like lm-eval: trailing context spaces move to the continuation, the pair is
    encoded whole and split at the context's length (so merges across the boundary go to the
    continuation), and an empty context is replaced by the model's prefix token (BOS/EOS)."""
    if context == "":
        return [prefix_token], encode(continuation)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole = encode(context + continuation)
    context_ids = encode(context)
    return context_ids, whole[len(context_ids) :]


@dataclass(frozen=True)
class Window:
    """Token ids fed to the model and how many of the last positions are scored."""

    input_ids: list[int]
    """Tokens the model reads; logits at position i predict token i+1 of `tokens`."""
    targets: list[int]
    """The tokens scored, predicted from the last len(targets) positions of input_ids."""
    truncated: bool = False


def fit_window(context_ids: Sequence[int], continuation_ids: Sequence[int], max_len: int) -> Window:
    """Left-truncate context+continuation to `max_len` model inputs, as lm-eval does.

    The model reads all tokens but the last; the continuation tokens are the targets.
    Raises ValueError when the continuation alone does not fit.
    """
    if len(continuation_ids) > max_len:
        raise ValueError(
            f"continuation of {len(continuation_ids)} tokens does not fit a window of {max_len}"
        )
    whole = list(context_ids) + list(continuation_ids)
    kept = whole[-(max_len + 1) :]
    return Window(
        input_ids=kept[:-1],
        targets=list(continuation_ids),
        truncated=len(whole) > max_len + 1,
    )


def rolling_windows(ids: Sequence[int], prefix_token: int, max_len: int) -> list[Window]:
    """Disjoint prediction windows over a whole text, each with as much left context as fits.

    Every token of `ids` is predicted exactly once; the first from `prefix_token` alone
    (lm-eval's loglikelihood_rolling with context_len=1).
    """
    windows: list[Window] = []
    if not ids:
        return windows
    first = min(max_len, len(ids))
    windows.append(Window(input_ids=[prefix_token, *ids[: first - 1]], targets=list(ids[:first])))
    done = first
    while done < len(ids):
        n_pred = min(len(ids) - done, max_len)
        end = done + n_pred
        windows.append(
            Window(
                input_ids=list(ids[max(0, end - max_len - 1) : end - 1]),
                targets=list(ids[done:end]),
            )
        )
        done = end
    return windows
