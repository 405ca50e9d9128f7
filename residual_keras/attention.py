"""Causal multi-head self-attention, written out, and its fused twin.

For queries, keys and values of shape (B, T, H, D) (H heads of size D):

    A = softmax(q k^T / sqrt(D) + mask)      # (B, H, T, T), the mask: -inf where not allowed
    out = A v                                # (B, T, H, D)

`reference_attention` writes this out: the scores, the mask, the float32
softmax and the dropout on the probabilities are each a line a student can
read, and it returns the probabilities (the instruments and
`return_attention_scores` need them). `fused_attention` computes the same
with `keras.ops.dot_product_attention`, which each backend fuses (cuDNN or
flash attention on GPUs); the two agree within float tolerance
(tests/library/test_transformer.py). The fused op has no dropout on the attention
probabilities. `allowed_keys` combines the causal, padding and attention
masks into the boolean "query may attend to key" mask both take.

`TransformerBlock` (transformer.py) uses these for its attention sublayer.
"""

from keras import ops

# A head narrower than this is a mistake (for instance keras-hub's argument
# order, `(intermediate_dim, num_heads)`, passed positionally to the old one).
MIN_HEAD_DIM = 4

# Added to the attention scores of masked positions. Large enough that
# exp(score - max) is exactly 0 in float32, finite so that no NaN can appear.
MASKED_SCORE = -1e9


def check_heads(embed_dim, num_heads, key_dim=None):
    """Raises `ValueError` unless `num_heads` heads fit `embed_dim` and are not too narrow."""
    if key_dim is None:
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}: "
                "every head needs embed_dim / num_heads features (or pass key_dim)."
            )
        key_dim = embed_dim // num_heads
    if key_dim < MIN_HEAD_DIM:
        raise ValueError(
            f"num_heads={num_heads} on embed_dim={embed_dim} gives heads of size {key_dim} "
            f"(< {MIN_HEAD_DIM}). Did you pass keras-hub's positional order (intermediate_dim, "
            "num_heads)? Name the arguments: TransformerBlock(num_heads=..., intermediate_dim=...)."
        )


def allowed_keys(length, causal=True, padding_mask=None, attention_mask=None):
    """(B or 1, T, T) booleans: which keys each query may attend to, or None for all.

    `causal`: key position <= query position; `padding_mask` (B, T): 1 for
    real tokens (as keys); `attention_mask` (B, T, T): any other mask.
    """
    allowed = None
    if causal:
        positions = ops.arange(length)
        allowed = (positions[:, None] >= positions[None, :])[None]  # (1, T, T), key <= query
    if padding_mask is not None:
        keys = ops.cast(padding_mask, "bool")[:, None, :]  # (B, 1, T): real tokens as keys
        allowed = keys if allowed is None else ops.logical_and(allowed, keys)
    if attention_mask is not None:
        given = ops.cast(attention_mask, "bool")  # (B, T, T)
        allowed = given if allowed is None else ops.logical_and(allowed, given)
    return allowed


def reference_attention(query, key, value, allowed=None, dropout=None, training=None):
    """softmax(q k^T / sqrt(D) + mask) v, written out: ((B, T, H, D), probabilities (B, H, T, T)).

    The softmax computes in float32; the probabilities come back in the
    query's dtype. `dropout` is a Dropout layer applied to the probabilities
    (or None).
    """
    head_dim = query.shape[-1]
    query = query * ops.cast(head_dim**-0.5, query.dtype)
    scores = ops.einsum("bqhd,bkhd->bhqk", query, key)  # (B, H, T, T)
    scores = ops.cast(scores, "float32")  # softmax in float32
    if allowed is not None:
        scores = ops.where(allowed[:, None], scores, MASKED_SCORE)
    weights = ops.cast(ops.softmax(scores, axis=-1), query.dtype)
    dropped = weights if dropout is None else dropout(weights, training=training)
    return ops.einsum("bhqk,bkhd->bqhd", dropped, value), weights  # (B, T, H, D)


def fused_attention(query, key, value, allowed=None, only_causal=False):
    """The same with `keras.ops.dot_product_attention` (fused by the backend): (B, T, H, D).

    The causal mask alone (`only_causal=True`) goes as `is_causal=True`
    (what flash attention takes); otherwise the combined boolean mask
    `allowed` goes instead. A query with no allowed key gets uniform weights,
    as in `reference_attention`. On PyTorch the gradient is wrong for such a
    query (left padding): measured in tests/library/test_transformer.py.
    """
    return ops.dot_product_attention(
        query, key, value,
        mask=None if only_causal or allowed is None else allowed[:, None],  # (B, 1, T, T)
        is_causal=only_causal,
        scale=query.shape[-1] ** -0.5,
    )


__all__ = ["MASKED_SCORE", "MIN_HEAD_DIM", "allowed_keys", "check_heads", "fused_attention", "reference_attention"]
