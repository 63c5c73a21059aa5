"""The chunked link head (model.head_chunk): the same parameters and logits as the unchunked head, the
same gradients up to float32 summation order, and a compiled train step that keeps less memory."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dygnex_jax.models.head import LinkHead


def _inputs(n=300, q=5000, h=16, seed=0):
    rng = np.random.default_rng(seed)
    emb = jnp.asarray(rng.normal(size=(n, h)), jnp.float32)
    src = jnp.asarray(rng.integers(0, n, q), jnp.int32)
    dst = jnp.asarray(rng.integers(0, n, q), jnp.int32)
    return emb, src, dst


def _loss(head, params, emb, src, dst):
    logits = head.apply(params, emb, src, dst)
    return jnp.sum(jax.nn.log_softmax(logits)[:, 1] * jnp.linspace(0.0, 1.0, len(src)))


@pytest.mark.parametrize("chunk", [1000, 1024, 4999])  # a remainder chunk, an even split, one row left
def test_chunked_head_equals_unchunked(chunk):
    emb, src, dst = _inputs()
    plain, chunked = LinkHead(32), LinkHead(32, chunk)
    params = plain.init(jax.random.key(3), emb, src, dst)
    params_c = chunked.init(jax.random.key(3), emb, src, dst)
    assert jax.tree.structure(params) == jax.tree.structure(params_c)
    for x, y in zip(jax.tree.leaves(params), jax.tree.leaves(params_c)):
        np.testing.assert_array_equal(x, y)  # same initialisation
    np.testing.assert_allclose(
        plain.apply(params, emb, src, dst), chunked.apply(params, emb, src, dst), rtol=1e-6, atol=1e-6
    )
    g = jax.grad(lambda p, e: _loss(plain, p, e, src, dst), argnums=(0, 1))(params, emb)
    gc = jax.grad(lambda p, e: _loss(chunked, p, e, src, dst), argnums=(0, 1))(params, emb)
    for x, y in zip(jax.tree.leaves(g), jax.tree.leaves(gc)):
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-5)


def test_unchunked_below_the_threshold_is_the_plain_head():
    emb, src, dst = _inputs(q=500)
    plain, chunked = LinkHead(32), LinkHead(32, 500)  # Q == chunk: not chunked
    params = plain.init(jax.random.key(0), emb, src, dst)
    np.testing.assert_array_equal(plain.apply(params, emb, src, dst), chunked.apply(params, emb, src, dst))


def test_chunked_head_keeps_less_memory():
    emb, src, dst = _inputs(n=2000, q=400_000, h=16)

    def temp_bytes(head):
        params = head.init(jax.random.key(0), emb, src[:10], dst[:10])
        grad = jax.jit(jax.grad(lambda p, e: _loss(head, p, e, src, dst), argnums=(0, 1)))
        return grad.lower(params, emb).compile().memory_analysis().temp_size_in_bytes

    plain, chunked = temp_bytes(LinkHead(128)), temp_bytes(LinkHead(128, 8192))
    # unchunked keeps [Q, 128] activations (>= 200 MB here); chunked only [Q, 2]-sized arrays and one chunk
    assert plain > 200e6
    assert chunked < plain / 5


@pytest.mark.parametrize(
    "sizes", [(300, 300, 32), (257, 1, 7), (1, 513, 100)]
)  # rows past a block, one column
def test_dense_pair_scores_are_the_heads_logit_margins(sizes):
    """Evaluation's all-pairs scores (one hidden unit at a time into [rows, D] blocks) equal the head's
    own logits, logit_edge - logit_nonedge, for every (src, dst) pair, and the matmul form's."""
    from dygnex_jax.models.head import dense_pair_scores, dense_pair_scores_matmul

    s, d, hidden = sizes
    rng = np.random.default_rng(s + d)
    h_src = jnp.asarray(rng.normal(size=(s, 12)), jnp.float32)
    h_dst = jnp.asarray(rng.normal(size=(d, 12)), jnp.float32)
    head = LinkHead(hidden)
    params = head.init(jax.random.key(1), h_src, jnp.zeros(1, jnp.int32), jnp.zeros(1, jnp.int32))
    src, dst = (x.ravel() for x in np.meshgrid(np.arange(s), np.arange(d), indexing="ij"))
    emb = jnp.concatenate([h_src, h_dst])  # dst rows after the src rows
    logits = np.asarray(head.apply(params, emb, jnp.asarray(src), jnp.asarray(dst + s)))
    scores = np.asarray(jax.jit(dense_pair_scores)(params["params"], h_src, h_dst))
    assert scores.shape == (s, d)
    np.testing.assert_allclose(scores.ravel(), logits[:, 1] - logits[:, 0], rtol=1e-5, atol=1e-5)
    reference = jax.jit(dense_pair_scores_matmul)(params["params"], h_src, h_dst)
    np.testing.assert_allclose(scores, reference, rtol=1e-5, atol=1e-5)


def test_auto_chunk_follows_the_backend_and_a_setting_is_kept():
    """model.head_chunk=-1 (the default) is cache-sized on CPU and large on an accelerator; any other
    setting, 0 (never chunk) included, reaches the head as given."""
    from dygnex_jax.config import ModelConfig, load_config
    from dygnex_jax.errors import UserError
    from dygnex_jax.models import create_model
    from dygnex_jax.models.head import head_chunk

    assert ModelConfig().head_chunk == -1
    assert head_chunk(-1, "cpu") == 4096 and head_chunk(-1, "gpu") == head_chunk(-1, "tpu") == 65536
    assert head_chunk(0, "cpu") == 0 and head_chunk(100, "gpu") == 100
    assert create_model(ModelConfig(), 8).head.chunk == head_chunk(-1, jax.default_backend())
    assert create_model(ModelConfig(head_chunk=0), 8).head.chunk == 0
    with pytest.raises(UserError, match=r"model.head_chunk must be .*-1 \(auto\)"):
        load_config(None, ["model.head_chunk=-2"])
