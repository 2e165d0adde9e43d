"""Scoring runs: DPR answer matching, top-k accuracy, recall/MRR/nDCG."""
