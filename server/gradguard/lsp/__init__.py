"""The language server: a thin LSP adapter over :func:`gradguard.api.check_source` (see docs/lsp.md).

Importing this package (and starting the server) never imports torch.
"""
