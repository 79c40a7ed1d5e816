"""The runtime doctor (`gradguard run`): see docs/runtime.md. Importing this package does not import torch."""
