"""Boundary models shared by every layer: corpus, research, 10-K, job state and step outputs."""
