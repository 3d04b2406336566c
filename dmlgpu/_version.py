"""dmlgpu's version: the one source (the build's metadata reads it; so does the kernel cache's key)."""
__version__ = "0.1.0"
