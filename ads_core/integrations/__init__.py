"""Adapters that drive the framework-agnostic ADS sampler from RL trainers (currently verl)."""
