"""The plan's one owner: which models exist (the catalog), how many blocks each has, which plan
type and plan a job starts with, and the candidates a plan-choosing policy prices.

Imports the model, efficiency and the oracle; nothing above them.
"""
