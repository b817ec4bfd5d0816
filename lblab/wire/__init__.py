"""The RSocket 1.0 wire contract: frame types, codec and metadata, free of I/O."""
