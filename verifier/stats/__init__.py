"""Statistics every kind shares: intervals (Wilson, Newcombe, bootstrap, clustered SEs), survival (Kaplan-Meier),
multiple testing (Holm, Benjamini-Hochberg)."""
