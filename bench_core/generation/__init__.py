"""Building a MedMisBench-style benchmark: source loaders, generator prompts, output checks, pipeline, report."""
