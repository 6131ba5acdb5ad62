"""The tree optimizer of thesis ch. 5: cost model, interest summaries, the layer."""
