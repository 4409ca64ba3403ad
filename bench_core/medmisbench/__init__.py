"""MedMisBench (epistemic resilience): multiple-choice questions with option-aligned misleading context."""
