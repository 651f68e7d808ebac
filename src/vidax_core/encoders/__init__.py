"""Text encoders shared by model plugins (UMT5, ...)."""
