"""Retracted-paper contamination ("Trojan paper"): does a model rely on retracted medical findings."""
