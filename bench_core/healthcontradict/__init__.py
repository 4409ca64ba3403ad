"""HealthContradict (knowledge conflicts): yes/no health questions under no, correct, incorrect or mixed documents."""
