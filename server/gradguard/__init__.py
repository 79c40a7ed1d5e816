"""gradguard: find PyTorch autograd in-place hazards before backward() fails, and explain them when it does."""

__version__ = "0.1.0"
