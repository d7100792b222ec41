"""Primitive definitions, one module per op family. Importing this package registers them all."""
