"""topodoc: how a GPU server is wired, which transport NCCL uses, and why collectives are slow."""

__version__ = "0.1.0"
