"""Parts several policies share: fairness weights, gang placement, Gavel's share accounting,
Pollux's size search, packing of GPUs, and a job's plan options."""
