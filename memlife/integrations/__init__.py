"""Adapters for agent frameworks (optional extras)."""
