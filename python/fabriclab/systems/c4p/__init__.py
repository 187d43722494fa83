"""C4P (C4 Performance; Dong et al., "Boosting Large-scale Parallel Training
Efficiency with C4", section 3.2): a path master that probes leaf-spine
paths, allocates one path per RDMA queue pair by its source port, and a
collective that balances messages over its queue pairs. See docs/c4p.md."""
