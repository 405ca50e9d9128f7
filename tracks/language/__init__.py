"""Language track: a character-level Transformer LM with and without residual connections."""
