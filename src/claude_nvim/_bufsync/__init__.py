"""Buffers follow their files: ``bufsync.lua``."""
