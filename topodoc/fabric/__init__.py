"""Fabric planning across nodes: the switch table, the Clos / fat-tree planner, the check of a real
fleet against a plan, and the plan's diagram (``topodoc fabric``)."""
