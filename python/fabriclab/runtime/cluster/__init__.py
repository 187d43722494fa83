"""The cluster-in-a-box: a scenario's hosts as network namespaces joined by
veth links shaped with tc (``plan.py`` pure, ``apply.py`` runs it,
``cli.py`` its commands). See docs/cluster.md."""
