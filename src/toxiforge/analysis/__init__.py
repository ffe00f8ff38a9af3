"""Dataset analyses: summaries now; statistics, implicitness, similarity split, perplexity, mentions later."""
