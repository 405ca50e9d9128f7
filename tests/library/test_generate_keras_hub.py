"""generate() with keras-hub's samplers choosing each token (issue 42); skipped without keras-hub."""

import numpy as np
import pytest

from residual_keras import generate, transformer_lm

samplers = pytest.importorskip("keras_hub.samplers", reason="keras-hub is not installed (pip install keras-hub)")


@pytest.fixture(scope="module")
def model():
    lm = transformer_lm(13, 8, 2, embed_dim=16, num_heads=2)
    rng = np.random.default_rng(0)
    for weight in lm.weights:  # GPT-2's small init makes near-uniform logits: make the argmax clear
        weight.assign(rng.standard_normal(weight.shape).astype("float32") * 0.5)
    return lm


def test_keras_hubs_greedy_sampler_gives_the_greedy_ids(model):
    ours = generate(model, [1, 2, 3], 12, temperature=0)  # 12 new ids: past the 8-id window, it slides
    theirs = generate(model, [1, 2, 3], 12, sampler=samplers.GreedySampler())
    np.testing.assert_array_equal(theirs, ours)


def test_top_k_of_one_and_a_tiny_top_p_are_greedy_too(model):
    greedy = generate(model, [4], 6, temperature=0)
    np.testing.assert_array_equal(generate(model, [4], 6, sampler=samplers.TopKSampler(k=1, seed=0)), greedy)
    np.testing.assert_array_equal(generate(model, [4], 6, sampler=samplers.TopPSampler(p=1e-6, seed=0)), greedy)


def test_a_random_sampler_keeps_to_the_vocabulary_and_its_seed(model):
    first = generate(model, [4], 20, sampler=samplers.TopKSampler(k=5, seed=3))
    assert first.shape == (21,) and first.min() >= 0 and first.max() < 13


def test_a_sampler_beside_our_sampling_arguments_is_refused(model):
    with pytest.raises(ValueError, match="chooses the tokens itself"):
        generate(model, [1], 2, temperature=0.5, sampler=samplers.GreedySampler())
    with pytest.raises(TypeError, match="keras_hub.samplers.Sampler"):
        generate(model, [1], 2, sampler="greedy")
