"""PyTorch / PyG-Temporal baselines (needs the ``torch`` extra: ``pip install -r requirements-torch.txt``)."""
