"""Megatron-LM (Narayanan et al., "Efficient Large-Scale Language Model
Training on GPU Clusters Using Megatron-LM", SC'21): its weak-scaling table
(Table 1) as LLM jobs (``[[llm_jobs]]``, docs/llm.md) on a DGX A100 fabric
(``repro.py``; docs/reproductions.md)."""
