"""The package's version, in a module of its own so that every part can read it
without importing the package's public face."""

__version__ = "0.1.0"
