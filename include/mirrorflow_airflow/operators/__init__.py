"""Operators: thin wrappers over the stock ones, adding only the checks mirrorflow needs."""
