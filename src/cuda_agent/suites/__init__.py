"""Task suites by name (`registry.py`: "name[:arg]" -> loader); FlashInfer-Bench (`flashinfer.py`)."""
