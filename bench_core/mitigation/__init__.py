"""Search mitigation: a tool-using harness over MedMisBench items, its search backends, metrics and report."""
