"""The `saliency` command line."""
