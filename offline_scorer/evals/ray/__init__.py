"""The Ray backend of ``run_evals``: only what is Ray-specific (needs ``offline-scorer[ray]``)."""
