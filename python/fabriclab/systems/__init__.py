"""The published systems fabriclab implements and reproduces, one package
each: Blink (``blink``), the ETH thesis on friendlier training tenants
(``thesis``), PANAMA (``panama``), C4's diagnosis and recovery (``c4``) and
its path allocation (``c4p``). Each holds what is its own and its
reproduction (``repro*.py``); what they share (planners, the job model,
the simulator) lives in the parts below them."""
