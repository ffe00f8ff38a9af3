"""Measure and reduce the biases of toxicity classifiers (Zhou et al., 2021)."""
