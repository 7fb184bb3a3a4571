"""Tests of common.eval."""
