"""The soak run behind ``scripts/soak``: workload, crashes, resource sampling, verdict."""
